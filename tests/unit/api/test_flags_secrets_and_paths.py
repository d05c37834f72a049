"""Planned flags cannot be overridden, secrets are never literals, caches stay off system paths."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import SpecInvalid, parse
from inferfleet.api.host_paths import is_under, unsafe_reason
from inferfleet.api.vllm_flags import PLANNED_FLAGS, extra_arg_problem
from tests.unit.api.samples import base_spec, document


def problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalid) as raised:
        parse(document(spec))
    return [(p.path, p.message) for p in raised.value.problems]


@pytest.mark.parametrize(
    ("arg", "flag", "field"),
    [
        ("--max-model-len", "--max-model-len", "overrides.maxModelLen"),
        ("--max_model_len=4096", "--max-model-len", "overrides.maxModelLen"),
        ("--tensor-parallel-size=8", "--tensor-parallel-size", "overrides.tensorParallelSize"),
        ("-tp", "--tensor-parallel-size", "overrides.tensorParallelSize"),
        ("--gpu-memory-utilization", "--gpu-memory-utilization", "overrides.gpuMemoryUtilization"),
        # an abbreviation argparse resolves to the planned flag
        ("--gpu-memory", "--gpu-memory-utilization", "overrides.gpuMemoryUtilization"),
        ("--kv-cache-dtype=fp8", "--kv-cache-dtype", "overrides.kvCacheDtype"),
        ("--no-enable-prefix-caching", "--no-enable-prefix-caching", "serving.prefixCaching"),
        ("--speculative-config.method", "--speculative-config", "serving.speculativeDecoding"),
        ("--served-model-name", "--served-model-name", "model.servedModelName"),
        ("--port=9000", "--port", "port 8000"),
    ],
)
def test_planned_flags_in_extra_args_point_to_the_field_that_sets_them(
    arg: str, flag: str, field: str
) -> None:
    spec = base_spec()
    spec["serving"] = {"extraArgs": ["--seed", "7", arg, "1"]}
    ((path, message),) = problems(spec)
    assert path == "spec.serving.extraArgs[2]"
    assert message.startswith(f"{flag} is set by the operator") and field in message


@pytest.mark.parametrize("arg", ["--api-key", "--api-key=sk-live", "--api_key"])
def test_api_key_on_the_command_line_is_refused(arg: str) -> None:
    spec = base_spec()
    spec["serving"] = {"extraArgs": [arg, "sk-live"]}
    ((path, message),) = problems(spec)
    assert path == "spec.serving.extraArgs[0]" and "VLLM_API_KEY" in message and "secretKeyRef" in message
    assert "sk-live" not in message  # the error never repeats the secret


@pytest.mark.parametrize(
    "arg",
    [
        "--seed",
        "7",
        "--model-impl",
        "--quantization-param-path",
        "--max-num-partial-prefills",
        "--api-server-count",
        "--enable-lora-bias",
        "-O3",
        "--kv-cache-memory-bytes",
        "--trust-remote-code",
    ],
)
def test_other_flags_and_values_pass(arg: str) -> None:
    assert extra_arg_problem(arg) is None


def test_every_planned_flag_is_refused() -> None:
    for flag in PLANNED_FLAGS:
        assert extra_arg_problem(flag) is not None, flag


def test_env_from_secret_and_config_map() -> None:
    spec = base_spec()
    spec["serving"] = {
        "env": [
            {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}},
            {
                "name": "VLLM_LOGGING_LEVEL",
                "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level", "optional": True}},
            },
            {"name": "PLAIN", "value": ""},
        ]
    }
    env = parse(document(spec)).spec.serving.env  # type: ignore[union-attr]
    assert env is not None
    assert [e.to_wire() for e in env] == spec["serving"]["env"]


@pytest.mark.parametrize("name", ["VLLM_API_KEY", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY"])
def test_secret_variables_cannot_be_literals(name: str) -> None:
    spec = base_spec()
    spec["serving"] = {"env": [{"name": name, "value": "leaked"}]}
    ((path, message),) = problems(spec)
    assert path == "spec.serving.env[0]" and "secretKeyRef" in message


def test_unsafe_cache_paths_name_the_field() -> None:
    for path in ("/", "/etc", "/var/lib/kubelet", "/proc", "/sys", "/etc/inferfleet", "/mnt/x/../../etc"):
        spec = base_spec()
        spec["cache"] = {"nodePath": path}
        found = problems(spec)
        assert [p for p, _ in found] == ["spec.cache.nodePath"], path


def test_host_path_rules() -> None:
    assert unsafe_reason("/mnt/nvme/inferfleet") is None
    assert unsafe_reason("/var/lib/kubelet/pods/x") is not None
    assert unsafe_reason("/var/lib/inferfleet") is None
    assert unsafe_reason("/etcetera") is None  # only the directory itself and what is under it
    assert is_under("/mnt/nvme/inferfleet/a", "/mnt/nvme/inferfleet")
    assert is_under("/mnt/nvme/inferfleet", "/mnt/nvme/inferfleet/")
    assert not is_under("/mnt/nvme/inferfleet2", "/mnt/nvme/inferfleet")


def test_opting_out_needs_a_placement_of_the_tiers_own() -> None:
    spec = base_spec()
    spec["tiers"][0]["gpuNodeAffinity"] = "none"
    spec["tiers"][0]["affinity"] = {"podAntiAffinity": {}}  # not a node placement
    ((path, message),) = problems(spec)
    assert path == "spec.tiers[0]" and "gpuNodeAffinity none" in message
    spec["tiers"][0]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    parse(document(spec))


@pytest.mark.parametrize(
    "node_affinity",
    [
        "zone-a",
        {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
        {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}},
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": "x"}]
            }
        },
    ],
)
def test_a_malformed_required_node_affinity_is_named(node_affinity: Any) -> None:
    spec = base_spec()
    spec["tiers"][1]["affinity"] = {"nodeAffinity": node_affinity}
    ((path, message),) = problems(spec)
    assert path == "spec.tiers[1]" and "affinity.nodeAffinity" in message


def test_inline_gpu_node_labels_are_label_syntax() -> None:
    spec = base_spec()
    spec["tiers"][0]["gpu"] = {"name": "x", "memoryGiB": 24, "nodeLabels": {"bad key!": "v"}}
    assert problems(spec)
    spec["tiers"][0]["gpu"]["nodeLabels"] = {"example.com/gpu": ["ok", "not ok"]}
    assert problems(spec)
    spec["tiers"][0]["gpu"]["nodeLabels"] = {"example.com/gpu": ["ok", "also-ok"]}
    parse(document(spec))
