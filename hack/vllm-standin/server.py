"""A vLLM-API-compatible stand-in: the OpenAI endpoints and metric names, no model.

Accepts vLLM's command line (a positional model or --model, --port, --host,
--served-model-name; every other flag is ignored) so the operator's rendered pods start
unchanged with this image in place of vLLM. Standard library only.
"""

from __future__ import annotations

import json
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


class State:
    def __init__(self, model: str) -> None:
        self.model = model
        self.lock = threading.Lock()
        self.requests = 0
        self.running = 0
        self.prompt_tokens = 0


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

        def do_GET(self) -> None:
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
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            tokens = prompt_tokens(request)
            with state.lock:
                state.requests += 1
                state.running += 1
                state.prompt_tokens += tokens
            try:
                time.sleep(0.01)
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
                body = {
                    "id": f"standin-{state.requests}",
                    "object": kind,
                    "created": int(time.time()),
                    "model": request.get("model", state.model),
                    "choices": [choice],
                    "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1},
                }
                self.reply(200, json.dumps(body))
            finally:
                with state.lock:
                    state.running -= 1

    return Handler


def metrics(state: State) -> str:
    label = f'model_name="{state.model}"'
    with state.lock:
        requests, running, tokens = state.requests, state.running, state.prompt_tokens
    return "\n".join(
        [
            f"vllm:num_requests_running{{{label}}} {running}",
            f"vllm:num_requests_waiting{{{label}}} 0",
            f"vllm:gpu_cache_usage_perc{{{label}}} 0.0",
            f"vllm:kv_cache_usage_perc{{{label}}} 0.0",
            f'vllm:request_success_total{{{label},finished_reason="stop"}} {requests}',
            f"vllm:prompt_tokens_total{{{label}}} {tokens}",
            f'vllm:time_to_first_token_seconds_bucket{{{label},le="0.1"}} {requests}',
            f'vllm:time_to_first_token_seconds_bucket{{{label},le="+Inf"}} {requests}',
            f"vllm:time_to_first_token_seconds_count{{{label}}} {requests}",
            f"vllm:time_to_first_token_seconds_sum{{{label}}} {requests * 0.01}",
            "",
        ]
    )


def main(argv: list[str]) -> None:
    model, host, port = parse_args(argv)
    server = ThreadingHTTPServer((host, port), handler_for(State(model)))
    print(f"vLLM stand-in serving {model!r} on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
