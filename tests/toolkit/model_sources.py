"""Model sources for the config.json probe: a model the catalog lacks, and hostile servers.

- `uncatalogued_model_files()`: config.json, an index and two shards whose safetensors
  headers describe `UNCATALOGUED_PARAMETERS` parameters (the data is zeros);
- `HostileServer`: one loopback HTTP server per behaviour a tenant can pick for the
  source it names, answering every request the same way:
  - `slow`: a 200 whose body arrives one byte every `interval_s` (a source that never
    quite stalls, so no read timeout fires);
  - `huge`: an answer (500 by default) with a body of `size_bytes`, streamed, never
    held in memory here;
  - `endless-s3`: an S3 ListObjectsV2 listing that is always truncated, each page with
    `page_keys` keys and a new continuation token.
  Each records the Authorization header of every request (`authorizations`) and how many
  requests it answered, so tests can tell which credentials reached it.

Used by tests/integration/fetcher/test_probe_bounds.py, tests/e2e/test_tenancy_probe.py and
hack/bench/tenant_sources.py.
"""

from __future__ import annotations

import contextlib
import json
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

UNCATALOGUED_MODEL = "acme/private-moe"
UNCATALOGUED_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
UNCATALOGUED_PARAMETERS = 1000 * 64 + 64 * 256 + 1000 * 64


def shard(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A safetensors file whose header describes `tensors`; the data is zeros."""
    sizes = {"F16": 2, "BF16": 2, "F32": 4, "I32": 4, "U8": 1}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = sizes[dtype]
        for dim in shape:
            count *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + count]}
        offset += count
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def uncatalogued_model_files() -> dict[str, bytes]:
    first = {"model.embed_tokens.weight": ("BF16", [1000, 64])}
    second = {"model.layers.0.mlp.weight": ("BF16", [64, 256]), "lm_head.weight": ("BF16", [1000, 64])}
    index = {
        "metadata": {"total_size": 0},
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "model.layers.0.mlp.weight": "model-00002-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors",
        },
    }
    return {
        "config.json": json.dumps(UNCATALOGUED_CONFIG).encode(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": shard(first),
        "model-00002-of-00002.safetensors": shard(second),
    }


@dataclass
class HostileState:
    mode: str  # slow, huge, endless-s3
    interval_s: float = 5.0
    size_bytes: int = 300 * 1024 * 1024
    status: int = 500
    page_keys: int = 1000
    requests: int = 0
    pages: int = 0
    bytes_sent: int = 0
    authorizations: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        state = self.server.state
        with state.lock:
            state.requests += 1
            state.authorizations.append(self.headers.get("Authorization", ""))
            state.headers.append(dict(self.headers.items()))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            if state.mode == "slow":
                self._slow(state)
            elif state.mode == "huge":
                self._huge(state)
            else:
                self._endless(state)

    def _sent(self, count: int) -> None:
        state = self.server.state
        with state.lock:
            state.bytes_sent += count

    def _slow(self, state: HostileState) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1024 * 1024))
        self.end_headers()
        while True:
            self.wfile.write(b" ")
            self.wfile.flush()
            self._sent(1)
            time.sleep(state.interval_s)

    def _huge(self, state: HostileState) -> None:
        self.send_response(state.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(state.size_bytes))
        self.end_headers()
        if self.command == "HEAD":
            return
        chunk = b'{"error": "' + b"x" * (1024 * 1024 - 16) + b'"}    '
        left = state.size_bytes
        while left > 0:
            piece = chunk[: min(len(chunk), left)]
            self.wfile.write(piece)
            self._sent(len(piece))
            left -= len(piece)

    def _endless(self, state: HostileState) -> None:
        query = parse_qs(urlsplit(self.path).query)
        token = int((query.get("continuation-token") or ["0"])[0])
        with state.lock:
            state.pages += 1
        keys = "".join(
            f"<Contents><Key>m/shard-{token:09d}-{i:05d}.safetensors</Key><Size>1</Size>"
            f'<ETag>"{i:032x}"</ETag></Contents>'
            for i in range(state.page_keys)
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>weights</Name><Prefix>m/</Prefix><KeyCount>{state.page_keys}</KeyCount>"
            f"<MaxKeys>{state.page_keys}</MaxKeys><IsTruncated>true</IsTruncated>{keys}"
            f"<NextContinuationToken>{token + 1}</NextContinuationToken></ListBucketResult>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._sent(len(body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HostileState


class HostileServer:
    """`with HostileServer(HostileState("slow")) as server:`; `server.endpoint` is the
    URL to name (HF_ENDPOINT, AWS_ENDPOINT_URL_S3, STORAGE_EMULATOR_HOST)."""

    def __init__(self, state: HostileState) -> None:
        self.state = state
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = state
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
