"""A vLLM-API-compatible stand-in: the OpenAI endpoints and metric names, no model.

Accepts vLLM's command line (a positional model or --model, --port, --host,
--served-model-name, --max-num-seqs; every other flag is ignored) so the operator's
rendered pods start unchanged with this image in place of vLLM. Standard library only.

Like vLLM's scheduler it runs at most --max-num-seqs requests at once and queues the
rest, so load shows in `vllm:num_requests_waiting` and in the TTFT histogram (time
queued + a 10 ms first token). A request holds its slot for `max_tokens` x
STANDIN_SECONDS_PER_TOKEN (default 0.01 s), so a client controls how long.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def parse_args(argv: list[str]) -> tuple[str, str, int]:
    """(served model name, host, port) from a vLLM command line."""
    model, served, host, port = "stand-in", "", "0.0.0.0", 8000
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, _, inline = arg.partition("=")
        value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
        step = 1 if inline or not key.startswith("--") else 2
        if key == "--model":
            model = value
        elif key == "--served-model-name":
            served = value
        elif key == "--host":
            host = value
        elif key == "--port":
            port = int(value)
        elif not arg.startswith("-") and i == 0:
            model = arg
        elif key.startswith("--") and (inline or i + 1 >= len(argv) or argv[i + 1].startswith("--")):
            step = 1  # a boolean flag such as --enforce-eager
        i += step
    return served or model, host, port


def parse_max_num_seqs(argv: list[str]) -> int:
    """vLLM's --max-num-seqs (its default, 256, when absent); the last one wins."""
    found = 256
    for index, arg in enumerate(argv):
        key, _, inline = arg.partition("=")
        if key == "--max-num-seqs":
            value = inline or (argv[index + 1] if index + 1 < len(argv) else "")
            if value.isdigit() and int(value) > 0:
                found = int(value)
    return found


# vLLM's TTFT histogram buckets (seconds).
TTFT_BUCKETS_S = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
FIRST_TOKEN_S = 0.01


class State:
    def __init__(
        self, model: str, max_num_seqs: int = 256, seconds_per_token: float = 0.01, api_key: str | None = None
    ) -> None:
        self.model = model
        # Like vLLM's --api-key: /v1/* then needs `Authorization: Bearer <key>`, /health
        # and /metrics stay open. Only the in-process tests set it (tests/toolkit/vllm.py).
        self.api_key = api_key
        self.max_num_seqs = max_num_seqs
        self.seconds_per_token = seconds_per_token
        self.slots = threading.Semaphore(max_num_seqs)
        self.lock = threading.Lock()
        self.requests = 0
        self.running = 0
        self.waiting = 0
        self.prompt_tokens = 0
        self.ttft_counts = [0] * len(TTFT_BUCKETS_S)
        self.ttft_sum_s = 0.0

    def observe_ttft(self, seconds: float) -> None:
        with self.lock:
            self.ttft_sum_s += seconds
            for index, bound in enumerate(TTFT_BUCKETS_S):
                if seconds <= bound:
                    self.ttft_counts[index] += 1


def prompt_tokens(request: dict[str, Any]) -> int:
    """A rough token count of a request's prompt (words; at least one, as for a BOS)."""
    prompt = request.get("prompt")
    parts = list(prompt) if isinstance(prompt, list) else [prompt]
    for message in request.get("messages") or []:
        if isinstance(message, dict):
            parts.append(message.get("content"))
    return max(1, sum(len(part.split()) for part in parts if isinstance(part, str)))


def handler_for(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def reply(self, code: int, body: str, content_type: str = "application/json") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def refused(self) -> bool:
            """401 for /v1/* without the key, as vLLM's AuthenticationMiddleware."""
            if state.api_key is None or not self.path.startswith("/v1"):
                return False
            if self.headers.get("Authorization") == f"Bearer {state.api_key}":
                return False
            self.reply(401, json.dumps({"error": "Unauthorized"}))
            return True

        def do_GET(self) -> None:
            if self.refused():
                return
            if self.path == "/health":
                self.reply(200, "")
            elif self.path == "/v1/models":
                entry = {"id": state.model, "object": "model", "owned_by": "stand-in"}
                models = {"object": "list", "data": [entry]}
                self.reply(200, json.dumps(models))
            elif self.path == "/metrics":
                self.reply(200, metrics(state), "text/plain; version=0.0.4")
            else:
                self.reply(404, json.dumps({"error": "not found"}))

        def do_POST(self) -> None:
            if self.refused():
                return
            if self.path == "/v1/completions":
                choice: dict[str, Any] = {"index": 0, "text": " stand-in", "finish_reason": "length"}
                kind = "text_completion"
            elif self.path == "/v1/chat/completions":
                message = {"role": "assistant", "content": "stand-in"}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                kind = "chat.completion"
            else:
                self.reply(404, json.dumps({"error": "not found"}))
                return
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            tokens = prompt_tokens(request)
            max_tokens = request.get("max_tokens")
            steps = max_tokens if isinstance(max_tokens, int) and 0 < max_tokens <= 100_000 else 1
            arrived = time.monotonic()
            with state.lock:
                state.waiting += 1
            state.slots.acquire()
            with state.lock:
                state.waiting -= 1
                state.running += 1
                state.prompt_tokens += tokens
            state.observe_ttft(time.monotonic() - arrived + FIRST_TOKEN_S)
            try:
                time.sleep(max(FIRST_TOKEN_S, steps * state.seconds_per_token))
            finally:
                with state.lock:
                    state.running -= 1
                    state.requests += 1
                    number = state.requests
                state.slots.release()
            body = {
                "id": f"standin-{number}",
                "object": kind,
                "created": int(time.time()),
                "model": request.get("model", state.model),
                "choices": [choice],
                "usage": {
                    "prompt_tokens": tokens,
                    "completion_tokens": steps,
                    "total_tokens": tokens + steps,
                },
            }
            self.reply(200, json.dumps(body))

    return Handler


def metrics(state: State) -> str:
    label = f'model_name="{state.model}"'
    with state.lock:
        requests, running, waiting = state.requests, state.running, state.waiting
        tokens, counts, ttft_sum_s = state.prompt_tokens, list(state.ttft_counts), state.ttft_sum_s
    started = running + requests  # every request that got a slot has had its first token
    usage = running / state.max_num_seqs
    buckets = [
        f'vllm:time_to_first_token_seconds_bucket{{{label},le="{bound:g}"}} {count}'
        for bound, count in zip(TTFT_BUCKETS_S, counts, strict=True)
    ]
    return "\n".join(
        [
            f"vllm:num_requests_running{{{label}}} {running}",
            f"vllm:num_requests_waiting{{{label}}} {waiting}",
            f"vllm:gpu_cache_usage_perc{{{label}}} {usage:g}",
            f"vllm:kv_cache_usage_perc{{{label}}} {usage:g}",
            f'vllm:request_success_total{{{label},finished_reason="stop"}} {requests}',
            f"vllm:prompt_tokens_total{{{label}}} {tokens}",
            *buckets,
            f'vllm:time_to_first_token_seconds_bucket{{{label},le="+Inf"}} {started}',
            f"vllm:time_to_first_token_seconds_count{{{label}}} {started}",
            f"vllm:time_to_first_token_seconds_sum{{{label}}} {ttft_sum_s:.6f}",
            "",
        ]
    )


def main(argv: list[str]) -> None:
    model, host, port = parse_args(argv)
    seconds_per_token = float(os.environ.get("STANDIN_SECONDS_PER_TOKEN", "0.01"))
    state = State(model, parse_max_num_seqs(argv), seconds_per_token)
    server = ThreadingHTTPServer((host, port), handler_for(state))
    print(f"vLLM stand-in serving {model!r} on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
