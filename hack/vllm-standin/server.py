"""A vLLM-API-compatible stand-in: the OpenAI endpoints and metric names, no model.

Accepts vLLM's command line (a positional model or --model, --port, --host,
--served-model-name, --max-num-seqs; every other flag is ignored) so the operator's
rendered pods start unchanged with this image in place of vLLM. Standard library only.

Like vLLM's scheduler it runs at most --max-num-seqs requests at once and queues the
rest, so load shows in `vllm:num_requests_waiting` and in the TTFT histogram (time
queued + a 10 ms first token). A request holds its slot for `max_tokens` x
STANDIN_SECONDS_PER_TOKEN (default 0.01 s), so a client controls how long.

Like vLLM's OpenAI server it answers 400 when the prompt plus `max_tokens` exceeds
--max-model-len (a prompt counts one token per word), and reports the request mix the
autoscaler reads: `vllm:generation_tokens_total`, the `vllm:request_prompt_tokens` /
`vllm:request_generation_tokens` histograms (vLLM's 1-2-5 buckets up to max-model-len)
and the HTTP layer's `http_requests_total` by handler and status class.
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


def parse_positive(argv: list[str], flag: str, default: int) -> int:
    """A positive integer flag (`default` when absent); the last one wins."""
    found = default
    for index, arg in enumerate(argv):
        key, _, inline = arg.partition("=")
        if key == flag:
            value = inline or (argv[index + 1] if index + 1 < len(argv) else "")
            if value.isdigit() and int(value) > 0:
                found = int(value)
    return found


def parse_max_num_seqs(argv: list[str]) -> int:
    """vLLM's --max-num-seqs (its default, 256, when absent); the last one wins."""
    return parse_positive(argv, "--max-num-seqs", 256)


# Without --max-model-len vLLM takes the model's context; the stand-in has no model.
DEFAULT_MAX_MODEL_LEN = 131_072


def token_buckets(max_model_len: int) -> list[int]:
    """vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max-model-len."""
    bounds: list[int] = []
    base = 1
    while base <= max_model_len:
        bounds.extend(base * m for m in (1, 2, 5) if base * m <= max_model_len)
        base *= 10
    return bounds


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
        self,
        model: str,
        max_num_seqs: int = 256,
        seconds_per_token: float = 0.01,
        api_key: str | None = None,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    ) -> None:
        self.model = model
        self.max_model_len = max_model_len
        self.token_bounds = token_buckets(max_model_len)
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
        self.generation_tokens = 0
        # Finished requests per token-length bucket (the last one: beyond every bound).
        self.prompt_counts = [0] * (len(self.token_bounds) + 1)
        self.output_counts = [0] * (len(self.token_bounds) + 1)
        # Answers per (handler, status class), as prometheus-fastapi-instrumentator counts.
        self.http: dict[tuple[str, str], int] = {}

    def answered(self, handler: str, code: int) -> None:
        with self.lock:
            key = (handler, f"{code // 100}xx")
            self.http[key] = self.http.get(key, 0) + 1

    def finished(self, prompt_tokens: int, output_tokens: int) -> None:
        with self.lock:
            self.generation_tokens += output_tokens
            for counts, tokens in ((self.prompt_counts, prompt_tokens), (self.output_counts, output_tokens)):
                counts[next((i for i, b in enumerate(self.token_bounds) if tokens <= b), -1)] += 1

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
            if tokens + steps > state.max_model_len:
                # vLLM's OpenAI server refuses it before the engine sees it.
                state.answered(self.path, 400)
                error = (
                    f"This model's maximum context length is {state.max_model_len} tokens. However, "
                    f"you requested {tokens + steps} tokens ({tokens} in the messages, {steps} in the "
                    "completion). Please reduce the length of the messages or completion."
                )
                self.reply(400, json.dumps({"object": "error", "message": error, "code": 400}))
                return
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
                state.finished(tokens, steps)
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
            state.answered(self.path, 200)
            self.reply(200, json.dumps(body))

    return Handler


def _histogram(name: str, label: str, bounds: list[int], counts: list[int]) -> list[str]:
    lines, cumulative = [], 0
    for bound, count in zip([*bounds, None], counts, strict=True):
        cumulative += count
        le = "+Inf" if bound is None else f"{float(bound):g}"
        lines.append(f'{name}_bucket{{{label},le="{le}"}} {cumulative}')
    lines.append(f"{name}_count{{{label}}} {cumulative}")
    return lines


def metrics(state: State) -> str:
    label = f'model_name="{state.model}"'
    with state.lock:
        requests, running, waiting = state.requests, state.running, state.waiting
        tokens, counts, ttft_sum_s = state.prompt_tokens, list(state.ttft_counts), state.ttft_sum_s
        generated = state.generation_tokens
        prompt_counts, output_counts = list(state.prompt_counts), list(state.output_counts)
        http = dict(state.http)
    started = running + requests  # every request that got a slot has had its first token
    usage = running / state.max_num_seqs
    buckets = [
        f'vllm:time_to_first_token_seconds_bucket{{{label},le="{bound:g}"}} {count}'
        for bound, count in zip(TTFT_BUCKETS_S, counts, strict=True)
    ]
    answers = [
        f'http_requests_total{{handler="{handler}",method="POST",status="{status}"}} {count}'
        for (handler, status), count in sorted(http.items())
    ]
    return "\n".join(
        [
            f"vllm:num_requests_running{{{label}}} {running}",
            f"vllm:num_requests_waiting{{{label}}} {waiting}",
            f"vllm:gpu_cache_usage_perc{{{label}}} {usage:g}",
            f"vllm:kv_cache_usage_perc{{{label}}} {usage:g}",
            f'vllm:request_success_total{{{label},finished_reason="stop"}} {requests}',
            f"vllm:prompt_tokens_total{{{label}}} {tokens}",
            f"vllm:generation_tokens_total{{{label}}} {generated}",
            *buckets,
            f'vllm:time_to_first_token_seconds_bucket{{{label},le="+Inf"}} {started}',
            f"vllm:time_to_first_token_seconds_count{{{label}}} {started}",
            f"vllm:time_to_first_token_seconds_sum{{{label}}} {ttft_sum_s:.6f}",
            *_histogram("vllm:request_prompt_tokens", label, state.token_bounds, prompt_counts),
            *_histogram("vllm:request_generation_tokens", label, state.token_bounds, output_counts),
            *answers,
            "",
        ]
    )


def main(argv: list[str]) -> None:
    model, host, port = parse_args(argv)
    seconds_per_token = float(os.environ.get("STANDIN_SECONDS_PER_TOKEN", "0.01"))
    state = State(
        model,
        parse_max_num_seqs(argv),
        seconds_per_token,
        max_model_len=parse_positive(argv, "--max-model-len", DEFAULT_MAX_MODEL_LEN),
    )
    server = ThreadingHTTPServer((host, port), handler_for(state))
    print(f"vLLM stand-in serving {model!r} on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
