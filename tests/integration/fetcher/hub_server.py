"""A loopback HTTP server speaking enough of the Hugging Face hub's API for huggingface_hub.

It serves generated repos: `GET /api/models/<repo>/revision/<rev>?blobs=True` (what
`HfApi.model_info(files_metadata=True)` asks) and `GET /<repo>/resolve/<rev>/<path>`
with Range support, the error headers the real hub sends (X-Error-Code), optional bearer
tokens, a per-response throttle (to kill a fetcher mid-file) and deliberate corruption
(to test checksum failures). Files are bytes or paths on disk (sent with sendfile, so the
benchmark measures the fetcher rather than this server). Used by the integration tests
and by hack/bench/cache_fetch.py.

Like the real hub, it can answer LFS downloads with a 302 to a CDN's signed URL on
another host (`HubState.lfs_redirect`, served by a second `HubServer` on the same state,
see `cdn_host()`); the CDN, like S3 behind a presigned URL, refuses a request that also
carries an Authorization header.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

Content = bytes | Path
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
CDN_PREFIX = "/cdn-lfs/"


def safetensors_bytes(tensor_bytes: int, seed: int = 0) -> bytes:
    """A valid safetensors file with one F32 tensor of `tensor_bytes` pseudo-random bytes."""
    header = json.dumps(
        {"weight": {"dtype": "F32", "shape": [tensor_bytes // 4], "data_offsets": [0, tensor_bytes]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    body = hashlib.shake_256(f"seed-{seed}".encode()).digest(tensor_bytes)
    return struct.pack("<Q", len(header)) + header + body


def tiny_model_files(seed: int = 0, shard_bytes: int = 256 * 1024, shards: int = 2) -> dict[str, bytes]:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": 128,
        "torch_dtype": "bfloat16",
        "seed": seed,
    }
    files: dict[str, bytes] = {
        "config.json": json.dumps(config).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE"}}).encode(),
        "tokenizer_config.json": b'{"model_max_length": 4096}',
        "README.md": b"# tiny test model\n",
        "pytorch_model.bin": b"pickled weights we must not download",
    }
    for index in range(shards):
        files[f"model-{index + 1:05d}-of-{shards:05d}.safetensors"] = safetensors_bytes(
            shard_bytes, seed * 100 + index
        )
    return files


def _size(content: Content) -> int:
    return content.stat().st_size if isinstance(content, Path) else len(content)


def _hash(content: Content, algorithm: str, prefix: bytes = b"") -> str:
    hasher = hashlib.new(algorithm)
    hasher.update(prefix)
    if isinstance(content, Path):
        with content.open("rb") as handle:
            while chunk := handle.read(8 << 20):
                hasher.update(chunk)
    else:
        hasher.update(content)
    return hasher.hexdigest()


@dataclass
class FakeRepo:
    repo_id: str
    commits: dict[str, dict[str, Content]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    token: str | None = None  # when set, requests need "Authorization: Bearer <token>"

    def add_commit(self, files: dict[str, Content], branch: str = "main") -> str:
        digest = hashlib.sha1(usedforsecurity=False)
        for name in sorted(files):
            digest.update(name.encode() + str(_size(files[name])).encode())
        digest.update(str(len(self.commits)).encode())
        commit = digest.hexdigest()
        self.commits[commit] = files
        self.branches[branch] = commit
        return commit

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.branches.get(revision)


@dataclass
class HubState:
    repos: dict[str, FakeRepo] = field(default_factory=dict)
    # (method, path, first byte requested)
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    throttle_bytes_per_s: float | None = None
    # path → bytes served instead of the real content (checksum mismatch tests)
    corrupt: dict[str, bytes] = field(default_factory=dict)
    fail_status: int | None = None
    # Base URL of a CDN server (a second HubServer on this state) that LFS files redirect to.
    lfs_redirect: str | None = None
    # Hostile hub (containment tests): fields merged into every model-info answer (e.g.
    # a "sha" that is a path), or the raw bytes sent instead of that answer.
    info_override: dict[str, Any] = field(default_factory=dict)
    info_raw: bytes | None = None
    # (server address "host:port", path, request headers) of every request
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def file_gets(self, suffix: str = "") -> list[tuple[str, int]]:
        with self.lock:
            return [
                (p, start)
                for m, p, start in self.requests
                if m == "GET" and ("/resolve/" in p or p.startswith(CDN_PREFIX)) and p.endswith(suffix)
            ]

    def seen_by(self, endpoint: str) -> list[tuple[str, dict[str, str]]]:
        """(path, headers) of the requests the server at `endpoint` received."""
        address = endpoint.split("://", 1)[-1]
        with self.lock:
            return [(path, headers) for where, path, headers in self.seen if where == address]


class _Handler(BaseHTTPRequestHandler):
    server: _HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _error(self, status: int, code: str | None = None, message: str | None = None) -> None:
        body = json.dumps({"error": message or code or str(status)}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _repo(self, repo_id: str) -> FakeRepo | None:
        state = self.server.state
        repo = state.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound")
            return None
        if repo.token is not None:
            auth = self.headers.get("Authorization", "")
            if not auth:
                self._error(401)  # what the hub answers for private repos without a token
                return None
            if auth != f"Bearer {repo.token}":
                self._error(401, message="Invalid credentials in Authorization header")
                return None
        return repo

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        state = self.server.state
        path = unquote(urlsplit(self.path).path)
        range_header = self.headers.get("Range")
        match = _RANGE.match(range_header or "")
        start = int(match.group(1)) if match else 0
        host, port = self.server.server_address[:2]
        with state.lock:
            state.requests.append((self.command, path, start))
            state.seen.append((f"{host!s}:{port}", path, dict(self.headers.items())))
        if state.fail_status is not None:
            self._error(state.fail_status)
            return
        if path.startswith(CDN_PREFIX):
            self._cdn(path[len(CDN_PREFIX) :], start if match else None)
            return
        if path.startswith("/api/models/"):
            self._model_info(path[len("/api/models/") :])
            return
        if "/resolve/" in path:
            repo_id, _, rest = path.lstrip("/").partition("/resolve/")
            revision, _, name = rest.partition("/")
            self._resolve(repo_id, revision, name, start if match else None)
            return
        self._error(404)

    def _model_info(self, rest: str) -> None:
        repo_id, _, revision = rest.partition("/revision/")
        repo = self._repo(repo_id)
        if repo is None:
            return
        commit = repo.resolve(revision or "main")
        if commit is None:
            self._error(404, "RevisionNotFound")
            return
        siblings = []
        for name, content in sorted(repo.commits[commit].items()):
            size = _size(content)
            sibling: dict[str, Any] = {"rfilename": name, "size": size}
            if _is_lfs(name):
                sibling["blobId"] = self.server.sha256(content)[:40]
                sibling["lfs"] = {"sha256": self.server.sha256(content), "size": size, "pointerSize": 134}
            else:
                sibling["blobId"] = _hash(content, "sha1", b"blob %d\0" % size)
            siblings.append(sibling)
        info = {"id": repo.repo_id, "sha": commit, "private": repo.token is not None, "siblings": siblings}
        info.update(self.server.state.info_override)
        raw = self.server.state.info_raw
        data = raw if raw is not None else json.dumps(info).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _resolve(self, repo_id: str, revision: str, name: str, start: int | None) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound")
            return
        content: Content | None = repo.commits[commit].get(name)
        if content is None:
            self._error(404, "EntryNotFound")
            return
        state = self.server.state
        if state.lfs_redirect is not None and _is_lfs(name):
            # What huggingface.co does for LFS files: metadata headers and a signed CDN URL.
            self.send_response(302)
            self.send_header("Location", f"{state.lfs_redirect}{CDN_PREFIX}{repo_id}/{commit}/{name}?X-Sig=x")
            self.send_header("X-Repo-Commit", commit)
            self.send_header("X-Linked-Size", str(_size(content)))
            self.send_header("X-Linked-Etag", f'"{self.server.sha256(content)}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send_content(commit, name, content, start)

    def _cdn(self, rest: str, start: int | None) -> None:
        """A signed CDN URL: no token needed, and one in the request is an error (as S3 says)."""
        if "Authorization" in self.headers:
            self._error(400, message="Only one auth mechanism allowed")
            return
        owner, repo_name, commit, name = rest.split("/", 3)
        repo = self.server.state.repos.get(f"{owner}/{repo_name}")
        content = repo.commits.get(commit, {}).get(name) if repo is not None else None
        if repo is None or content is None:
            self._error(404)
            return
        self._send_content(commit, name, content, start)

    def _send_content(self, commit: str, name: str, content: Content, start: int | None) -> None:
        state = self.server.state
        if name in state.corrupt:
            content = state.corrupt[name]
        size = _size(content)
        offset = start or 0
        if offset > size:
            self._error(416)
            return
        self.send_response(206 if start is not None else 200)
        self.send_header("Content-Length", str(size - offset))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("X-Repo-Commit", commit)
        if start is not None:
            self.send_header("Content-Range", f"bytes {offset}-{size - 1}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._send_body(content, offset, size)

    def _send_body(self, content: Content, offset: int, size: int) -> None:
        throttle = self.server.state.throttle_bytes_per_s
        if throttle is None and isinstance(content, Path):
            with content.open("rb") as handle:
                self.wfile.flush()
                self.connection.sendfile(handle, offset, size - offset)
            return
        data = content.read_bytes() if isinstance(content, Path) else content
        view = memoryview(data)[offset:]
        step = 16 * 1024 if throttle else 4 << 20
        while view:
            self.wfile.write(view[:step])
            view = view[step:]
            if throttle:
                time.sleep(step / throttle)


def _is_lfs(name: str) -> bool:
    return name.endswith(".safetensors")


class _HubServer(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState
    _sha_cache: dict[int, str]

    def sha256(self, content: Content) -> str:
        key = id(content)
        if key not in self._sha_cache:
            self._sha_cache[key] = _hash(content, "sha256")
        return self._sha_cache[key]


class HubServer:
    """`with HubServer() as hub:`; `hub.endpoint` goes into HF_ENDPOINT."""

    def __init__(self, state: HubState | None = None, host: str = "127.0.0.1") -> None:
        self.state = state or HubState()
        self._server = _HubServer((host, 0), _Handler)
        self._server.state = self.state
        self._server._sha_cache = {}
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_repo(self, repo: FakeRepo) -> FakeRepo:
        self.state.repos[repo.repo_id] = repo
        return repo

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def cdn_host() -> str:
    """A loopback address other than 127.0.0.1 when the kernel routes one (Linux routes all
    of 127/8), so the CDN is another host by name too; else 127.0.0.1 (another port is
    another origin all the same)."""
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError:
        return "127.0.0.1"
    return "127.0.0.2"


def serve_forever(repo_dir: Path, repo_id: str, port_file: Path) -> None:
    """Serve one on-disk directory as a repo until killed (benchmark: a separate process)."""
    files: dict[str, Content] = {
        p.relative_to(repo_dir).as_posix(): p for p in repo_dir.rglob("*") if p.is_file()
    }
    server = HubServer()
    repo = server.add_repo(FakeRepo(repo_id))
    repo.add_commit(files)
    for content in files.values():
        server._server.sha256(content)  # hash once up front, outside the timed fetch
    with server:
        port_file.write_text(server.endpoint)
        threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover - used by the benchmark
    import sys

    serve_forever(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
    os._exit(0)
