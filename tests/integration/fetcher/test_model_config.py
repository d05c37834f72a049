"""config.json and parameter counts read from a loopback hub, as the operator and CLI do."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from inferfleet.caching.fetcher.modelconfig import (
    Access,
    ModelConfigCache,
    ModelConfigUnavailable,
    read_model,
)
from tests.integration.fetcher.conftest import run_cli
from tests.integration.fetcher.hub_server import FakeRepo, HubServer
from tests.toolkit.model_sources import HostileServer, HostileState

pytestmark = pytest.mark.integration

PRIVATE = "acme/private-moe"
CONFIG = {
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
# A 4-bit GPTQ tensor: 8 values per int32, with scales and zero points beside it.
PACKED = {"layer.qweight": ("I32", [512, 4096]), "layer.scales": ("F16", [32, 4096]),
          "layer.qzeros": ("I32", [32, 512])}  # fmt: skip


def shard(tensors: dict[str, tuple[str, list[int]]], padding: int = 0) -> bytes:
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
    raw = json.dumps(header).encode() + b" " * padding
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def model_files() -> dict[str, bytes]:
    first = {"model.embed_tokens.weight": ("BF16", [1000, 64])}
    second = {"model.layers.0.mlp.weight": ("BF16", [64, 256]), "lm_head.weight": ("BF16", [1000, 64])}
    index = {"metadata": {"total_size": 0}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.mlp.weight": "model-00002-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
    }}  # fmt: skip
    return {
        "config.json": json.dumps(CONFIG).encode(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        # a header longer than the first probe: read again at its own length
        "model-00001-of-00002.safetensors": shard(first, padding=300 * 1024),
        "model-00002-of-00002.safetensors": shard(second),
        "README.md": b"# a model the catalog does not know\n",
    }


PARAMETERS = 1000 * 64 + 64 * 256 + 1000 * 64


@pytest.fixture
def private_hub(hub: HubServer) -> HubServer:
    hub.add_repo(FakeRepo(PRIVATE, token="hf_secret")).add_commit(model_files())
    return hub


def test_config_and_parameters_come_from_headers_only(private_hub: HubServer) -> None:
    found = read_model(f"hf://{PRIVATE}", "main", Access(token="hf_secret"))
    assert found.config["num_experts"] == 128 and found.parameters_billion * 1e9 == PARAMETERS
    assert found.source.startswith(f"hf://{PRIVATE}@")
    # range reads from the start of each shard, never a whole weight file
    gets = private_hub.state.file_gets(".safetensors")
    assert gets and all(start == 0 for _, start in gets)


def test_packed_quantized_tensors_count_their_unpacked_values(hub: HubServer) -> None:
    files = {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": shard(PACKED)}
    hub.add_repo(FakeRepo("acme/gptq")).add_commit(files)
    found = read_model("hf://acme/gptq", "main", Access())
    assert found.parameters_billion * 1e9 == 512 * 4096 * 8  # scales and zero points are not parameters


def test_missing_pieces_and_refused_tokens_are_reasons(private_hub: HubServer) -> None:
    private_hub.add_repo(FakeRepo("acme/no-config")).add_commit({"model.safetensors": shard(PACKED)})
    with pytest.raises(ModelConfigUnavailable, match=r"no config\.json"):
        read_model("hf://acme/no-config", "main", Access())
    cache = ModelConfigCache()
    model, problem = cache.get(f"hf://{PRIVATE}", "main", Access(token="wrong"), need_parameters=True)
    assert model is None and problem is not None and PRIVATE in problem
    # remembered: a broken source is not asked again within the failure TTL
    again = cache.get(f"hf://{PRIVATE}", "main", Access(token="wrong"), need_parameters=True)
    assert again == (None, problem)
    assert cache.reads == 1


SPEC = f"""
apiVersion: inferfleet.dev/v1alpha1
kind: InferenceService
metadata: {{name: private, namespace: team}}
spec:
  model:
    name: {PRIVATE}
    credentialsSecretRef: {{name: hub-token, key: token}}
  workload:
    inputTokens: {{p50: 500, p95: 2000, p99: 4000}}
    outputTokens: {{p50: 200, p95: 400, p99: 800}}
    peakRequestsPerSecond: 2
  tiers:
    - {{name: h100, gpu: H100-SXM-80GB}}
"""


def test_plan_reads_an_uncatalogued_model_with_this_machines_token(
    private_hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")  # the user's own, as huggingface_hub finds it
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN")
    done = run_cli("plan", "-f", str(spec), "-o", "json")
    assert done.returncode == 0, done.stderr
    (tier,) = json.loads(done.stdout)["tiers"]
    assert tier["feasible"] and "128 experts" in tier["reasons"][0]


def test_plan_reads_a_slow_source_within_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`inferfleet plan` goes through the probe's bounded reader: a source that sends one
    byte every 5 s ends the read at --source-deadline-s, and the tier says why."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with HostileServer(HostileState("slow", interval_s=5.0)) as slow:
        monkeypatch.setenv("HF_ENDPOINT", slow.endpoint)
        started = time.monotonic()
        done = run_cli("plan", "-f", str(spec), "-o", "json", "--source-deadline-s", "3", timeout=60)
        elapsed_s = time.monotonic() - started
    assert done.returncode == 1  # no feasible tier
    (tier,) = json.loads(done.stdout)["tiers"]
    assert not tier["feasible"] and "deadline of 3 s" in tier["reasons"][0]
    assert elapsed_s < 3 + 20  # the deadline plus the interpreter's start on a loaded host
