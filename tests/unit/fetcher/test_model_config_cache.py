"""The model-config cache and the safetensors parameter count (no network)."""

from __future__ import annotations

import pytest

from inferfleet.caching.fetcher.modelconfig import (
    Access,
    ModelConfigCache,
    ModelConfigUnavailable,
    tensor_parameters,
)
from inferfleet.planner import FetchedModel


def test_parameters_count_unpacked_values_and_skip_quantization_metadata() -> None:
    header = {
        "__metadata__": {"format": "pt"},
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [1000, 64]},
        # gpt-oss MXFP4 experts: two 4-bit values per byte, one scale byte per 32
        "model.layers.0.mlp.experts.gate_up_proj_blocks": {"dtype": "U8", "shape": [32, 5760, 90, 16]},
        "model.layers.0.mlp.experts.gate_up_proj_scales": {"dtype": "U8", "shape": [32, 5760, 90]},
        # block FP8 with its inverse scales
        "model.layers.1.mlp.down_proj.weight": {"dtype": "F8_E4M3", "shape": [4096, 1536]},
        "model.layers.1.mlp.down_proj.weight_scale_inv": {"dtype": "F32", "shape": [32, 12]},
    }
    assert tensor_parameters(header) == 1000 * 64 + 32 * 5760 * 90 * 16 * 2 + 4096 * 1536
    with pytest.raises(ModelConfigUnavailable):
        tensor_parameters({"w": {"dtype": "F16", "shape": "big"}})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_answers_are_kept_failures_retried_after_a_while_and_new_credentials_at_once() -> None:
    calls: list[tuple[str, str | None]] = []
    outcomes = [ModelConfigUnavailable("no config.json"), FetchedModel({"a": 1}, 1.0, "hf://x@abc")]

    def reader(uri: str, revision: str, access: Access, need_parameters: bool) -> FetchedModel:
        calls.append((uri, access.token))
        outcome = outcomes[min(len(calls) - 1, len(outcomes) - 1)]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    clock = Clock()
    cache = ModelConfigCache(reader, clock=clock, success_ttl_s=100, failure_ttl_s=10)
    model, problem = cache.get("hf://x", "main", Access(), need_parameters=True, identity=("s", "1"))
    assert model is None and problem == "hf://x@main: no config.json"
    clock.now = 5
    assert cache.get("hf://x", "main", Access(), need_parameters=True, identity=("s", "1"))[1] == problem
    # a rotated secret (new resourceVersion) is tried at once
    model, problem = cache.get("hf://x", "main", Access("t2"), need_parameters=True, identity=("s", "2"))
    assert problem is None and model is not None and model.parameters_billion == 1.0
    clock.now = 50
    assert cache.get("hf://x", "main", Access("t2"), need_parameters=True, identity=("s", "2"))[0] == model
    assert len(calls) == 2
    clock.now = 200  # a branch may move: read again after the success TTL
    cache.get("hf://x", "main", Access("t2"), need_parameters=True, identity=("s", "2"))
    assert len(calls) == 3
