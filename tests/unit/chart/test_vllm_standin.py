"""The CPU-only vLLM stand-in used by hack/kind-e2e.sh starts from vLLM's command line."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from types import ModuleType

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.toolkit.scripts import load_script


def load_server() -> ModuleType:
    return load_script("hack/vllm-standin/server.py", "vllm_standin")


server = load_server()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ("stand-in", "0.0.0.0", 8000)),
        (["meta-llama/Llama-3.1-8B", "--port", "8080"], ("meta-llama/Llama-3.1-8B", "0.0.0.0", 8080)),
        (
            ["--model=/models/llama", "--enforce-eager", "--served-model-name", "llama", "--port=9000"],
            ("llama", "0.0.0.0", 9000),
        ),
        (
            ["--tensor-parallel-size", "2", "--trust-remote-code", "--host", "127.0.0.1"],
            ("stand-in", "127.0.0.1", 8000),
        ),
    ],
)
def test_parses_vllm_command_lines(argv: list[str], expected: tuple[str, str, int]) -> None:
    assert server.parse_args(argv) == expected


def test_serves_openai_endpoints_and_vllm_metrics() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(server.State("m")))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
            assert response.status == 200
        with urllib.request.urlopen(f"{base}/v1/models", timeout=5) as response:
            assert json.load(response)["data"][0]["id"] == "m"
        chat = {"model": "m", "messages": [{"role": "user", "content": "four words of prompt"}]}
        request = urllib.request.Request(
            f"{base}/v1/chat/completions", data=json.dumps(chat).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            reply = json.load(response)
        assert reply["choices"][0]["message"]["role"] == "assistant"
        assert reply["usage"]["prompt_tokens"] == 4
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert 'vllm:num_requests_waiting{model_name="m"} 0' in text
        assert 'vllm:request_success_total{model_name="m",finished_reason="stop"} 1' in text
        # The prefill counter grows by each request's prompt tokens.
        assert 'vllm:prompt_tokens_total{model_name="m"} 4' in text
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_queues_beyond_max_num_seqs_like_vllm() -> None:
    assert server.parse_max_num_seqs(["m", "--max-num-seqs", "2"]) == 2
    assert server.parse_max_num_seqs(["m", "--max-num-seqs=3"]) == 3
    assert server.parse_max_num_seqs(["m"]) == 256
    state = server.State("m", max_num_seqs=1, seconds_per_token=0.2)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"

    def complete() -> None:
        body = json.dumps({"model": "m", "prompt": "p", "max_tokens": 5}).encode()
        request = urllib.request.Request(f"{base}/v1/completions", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    clients = [threading.Thread(target=complete) for _ in range(3)]
    try:
        for client in clients:
            client.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and state.waiting < 2:
            time.sleep(0.01)
        text = server.metrics(state)
        assert 'vllm:num_requests_running{model_name="m"} 1' in text
        assert 'vllm:num_requests_waiting{model_name="m"} 2' in text
        for client in clients:
            client.join()
        text = server.metrics(state)
        # Queued requests waited ~1 s and ~2 s for their first token: they land above 0.75 s.
        assert 'vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.75"} 1' in text
        assert 'vllm:time_to_first_token_seconds_count{model_name="m"} 3' in text
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_refuses_prompts_beyond_max_model_len_and_reports_the_mix_like_vllm() -> None:
    """What WorkloadDrift reads: 400 for prompt + max_tokens beyond --max-model-len (the
    HTTP counter by status class), output tokens, and the token-length histograms with
    vLLM's 1-2-5 buckets up to max-model-len."""
    assert server.parse_positive(["m", "--max-model-len", "100"], "--max-model-len", 7) == 100
    assert server.parse_positive(["m"], "--max-model-len", 7) == 7
    state = server.State("m", seconds_per_token=0.001, max_model_len=100)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"

    def complete(words: int) -> int:
        body = json.dumps({"model": "m", "prompt": "w " * words, "max_tokens": 10}).encode()
        request = urllib.request.Request(f"{base}/v1/completions", data=body, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            assert "maximum context length is 100 tokens" in error.read().decode()
            return int(error.code)

    try:
        assert [complete(40), complete(90), complete(91)] == [200, 200, 400]
        text = server.metrics(state)
    finally:
        httpd.shutdown()
        httpd.server_close()
    samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]

    def by(name: str, label: str) -> dict[str, float]:
        return {s.labels[label]: s.value for s in samples if s.name == name}

    answered = {
        (s.labels["handler"], s.labels["status"]): s.value for s in samples if s.name == "http_requests_total"
    }
    assert answered == {("/v1/completions", "2xx"): 2, ("/v1/completions", "4xx"): 1}
    assert 'vllm:generation_tokens_total{model_name="m"} 20' in text
    # 40 and 90 prompt tokens: buckets 50 and 100; 10 output tokens each: bucket 10.
    prompt = by("vllm:request_prompt_tokens_bucket", "le")
    assert (prompt["20"], prompt["50"], prompt["100"], prompt["+Inf"]) == (0, 1, 2, 2)
    output = by("vllm:request_generation_tokens_bucket", "le")
    assert (output["5"], output["10"], output["+Inf"]) == (0, 2, 2)
