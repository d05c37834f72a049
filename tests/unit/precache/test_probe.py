"""The probe Job and its result, as a hostile tenant would feed them (pure).

The Job runs with the tenant's Secret only as files, as the pre-cache fetcher does, and
passes Pod Security `restricted`; its name changes with what it reads. The result must
fit the kubelet's 4 KiB termination message for any real config, and reading one back
must survive anything a pod status can hold.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferfleet.api import load_all
from inferfleet.caching.precache import probe
from inferfleet.caching.precache.probe import ProbeResult, decode_result, encode_result
from inferfleet.catalog import parse_hf_config
from inferfleet.catalog.hf_config import planner_config
from inferfleet.config import OperatorSettings

SETTINGS = OperatorSettings()
SPEC = """
apiVersion: inferfleet.dev/v1alpha1
kind: InferenceService
metadata: {{name: private, namespace: team-a, uid: 1234-5678}}
spec:
  model: {{name: acme/private, {model}}}
  workload:
    inputTokens: {{p50: 500, p95: 2000, p99: 4000}}
    outputTokens: {{p50: 200, p95: 400, p99: 800}}
    peakRequestsPerSecond: 2
  tiers:
    - {{name: h100, gpu: H100-SXM-80GB}}
"""


def service(model: str = "credentialsSecretRef: {name: hub-token, key: token}") -> Any:
    return load_all(SPEC.format(model=model))[0]


def job_of(model: str = "credentialsSecretRef: {name: hub-token, key: token}") -> dict[str, Any]:
    found = service(model)
    return probe.job(found, SETTINGS, probe.probe_key(found), 1)


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """Pod Security Standards `restricted` (v1.30), the checks a pod spec can fail."""
    found = []
    pod = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(field)
    allowed_volumes = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim"}
    allowed_volumes |= {"projected", "secret"}
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= allowed_volumes:
            found.append(f"volume {volume['name']}: {kinds}")
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            found.append("privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append("allowPrivilegeEscalation")
        if (context.get("capabilities") or {}).get("drop") != ["ALL"]:
            found.append("capabilities.drop")
        if set((context.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append("capabilities.add")
        if not (context.get("runAsNonRoot") or pod.get("runAsNonRoot")):
            found.append("runAsNonRoot")
        if (context.get("runAsUser", pod.get("runAsUser")) or 0) == 0:
            found.append("runAsUser 0")
        seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append("seccompProfile")
        if container.get("ports") and any(p.get("hostPort") for p in container["ports"]):
            found.append("hostPort")
    return found


def test_the_job_is_restricted_has_no_api_token_and_is_bounded() -> None:
    job = job_of()
    spec = pod_spec(job)
    assert restricted_violations(spec) == []
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == SETTINGS.model_probe_deadline_s + probe.START_MARGIN_S
    (container,) = spec["containers"]
    assert container["image"] == SETTINGS.operator_image
    assert container["command"] == ["inferfleet", "cache", "probe"]
    assert container["terminationMessagePolicy"] == "File"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"]["memory"] == "512Mi" and "cpu" in container["resources"]["limits"]
    args = container["args"]
    assert args[args.index("--deadline-s") + 1] == str(SETTINGS.model_probe_deadline_s)
    metadata = job["metadata"]
    assert metadata["namespace"] == "team-a"
    assert metadata["labels"]["inferfleet.dev/service"] == "private"
    assert metadata["labels"]["inferfleet.dev/component"] == "model-probe"
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "inferfleet"
    assert job["spec"]["template"]["metadata"]["labels"] == metadata["labels"]
    (owner,) = metadata["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "InferenceService",
        "private",
        "1234-5678",
        True,
    )


@pytest.mark.parametrize(
    ("source", "flag", "env"),
    [
        ("hf://acme/private", "--token-file", None),
        ("s3://weights/acme", "--credentials-dir", None),
        ("gs://weights/acme", None, "GOOGLE_APPLICATION_CREDENTIALS"),
    ],
)
def test_the_secret_reaches_the_probe_only_as_files_like_the_pre_cache(
    source: str, flag: str | None, env: str | None
) -> None:
    job = job_of(f"source: '{source}', credentialsSecretRef: {{name: hub-token, key: token}}")
    spec = pod_spec(job)
    (container,) = spec["containers"]
    secrets = [v for v in spec["volumes"] if "secret" in v]
    assert [v["secret"]["secretName"] for v in secrets] == ["hub-token"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == secrets[0]["name"])
    assert mount["readOnly"] is True
    # never an environment value: no secretKeyRef, no envFrom
    assert "envFrom" not in container
    assert all("valueFrom" not in item for item in container["env"])
    if flag is not None:
        value = container["args"][container["args"].index(flag) + 1]
        assert value.startswith(mount["mountPath"])
    if env is not None:
        values = {item["name"]: item.get("value") for item in container["env"]}
        assert values[env] == f"{mount['mountPath']}/token"


def test_without_a_secret_nothing_is_mounted() -> None:
    spec = pod_spec(job_of("revision: v1"))
    assert [v for v in spec["volumes"] if "secret" in v] == []
    assert "--token-file" not in spec["containers"][0]["args"]


def test_the_job_name_follows_source_revision_and_secret_and_stays_a_dns_label() -> None:
    names = {
        job_of(model)["metadata"]["name"]
        for model in (
            "credentialsSecretRef: {name: hub-token, key: token}",
            "credentialsSecretRef: {name: hub-token, key: other}",
            "credentialsSecretRef: {name: other-token, key: token}",
            "revision: v2, credentialsSecretRef: {name: hub-token, key: token}",
            "source: 'hf://acme/other', credentialsSecretRef: {name: hub-token, key: token}",
            "parametersBillion: 7, credentialsSecretRef: {name: hub-token, key: token}",
        )
    }
    assert len(names) == 6
    assert job_of()["metadata"]["name"] == job_of()["metadata"]["name"]
    long = load_all(SPEC.format(model="revision: v1").replace("name: private,", f"name: {'x' * 46},"))[0]
    name = probe.job(long, SETTINGS, probe.probe_key(long), 12)["metadata"]["name"]
    assert len(name) <= 63 and name.endswith("-12")


def test_only_models_the_planner_cannot_size_need_a_probe() -> None:
    catalogs = SETTINGS.catalogs()
    assert probe.needs_fetch(service(), catalogs)
    inline = service(
        "config: {hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4}, parametersBillion: 1"
    )
    assert not probe.needs_fetch(inline, catalogs)
    catalogued = load_all(SPEC.format(model="revision: main").replace("acme/private", "Qwen/Qwen3-8B"))[0]
    assert not probe.needs_fetch(catalogued, catalogs)
    assert probe.unprobeable(service("source: 'pvc://weights/acme'")) is not None
    assert probe.unprobeable(service()) is None


# --- the result ----------------------------------------------------------------------

GPT_OSS = {
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 36,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "max_position_embeddings": 131072,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "rope_scaling": {
        "rope_type": "yarn",
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "beta": 1,
    },
    "quantization_config": {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "lm_head"],
    },
    "architectures": ["GptOssForCausalLM"],
    "eos_token_id": 200002,
}
# A compressed-tensors FP8 MoE whose ignore list names every layer's router gate, and a
# chat template-sized blob the planner never reads.
BIG_MOE = {
    "model_type": "qwen3_moe",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_hidden_layers": 94,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "quantization_config": {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "targets": ["Linear"]}},
        "ignore": [f"model.layers.{i}.mlp.gate" for i in range(94)]
        + [f"model.layers.{i}.self_attn.q_proj" for i in range(3)]
        + ["lm_head"],
    },
    "chat_template": "{% for message in messages %}" * 2000,
}


def same_arch(config: dict[str, Any], reduced: dict[str, Any]) -> bool:
    return parse_hf_config(config, "m", 30.0) == parse_hf_config(reduced, "m", 30.0)


@pytest.mark.parametrize("config", [GPT_OSS, BIG_MOE], ids=["gpt-oss", "big-moe"])
def test_the_planners_keys_plan_the_same_and_fit_a_termination_message(config: dict[str, Any]) -> None:
    assert len(json.dumps(config)) > probe.TERMINATION_MESSAGE_BYTES or config is GPT_OSS
    assert same_arch(config, planner_config(config))
    text = encode_result(ProbeResult(ok=True, reason="Resolved", config=config, parameters_billion=30.5))
    assert len(text.encode()) <= probe.TERMINATION_MESSAGE_BYTES
    back = decode_result(text)
    assert back.ok and back.parameters_billion == 30.5 and back.config is not None
    assert same_arch(config, dict(back.config))


def test_a_config_that_does_not_fit_even_compressed_asks_for_it_inline() -> None:
    import random

    noise = random.Random(7)
    hostile = {
        **GPT_OSS,
        "model_type": "".join(noise.choice("abcdefghijklmnop0123456789") for _ in range(9000)),
    }
    result = decode_result(encode_result(ProbeResult(ok=True, reason="Resolved", config=hostile)))
    assert not result.ok and result.reason == "ConfigTooLarge"
    assert "spec.model.config" in result.message


def _packed(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, 9)).decode()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Reason: detail",
        "[" * 100_000,
        '{"v":1,"ok":true,"config":' + "[" * 50_000 + "]" * 50_000 + "}",
        '{"v":2,"ok":true,"config":{}}',
        '{"v":1,"ok":"yes","config":{}}',
        '{"v":1,"ok":true}',
        '{"v":1,"ok":true,"config":{},"parametersBillion":NaN}',
        '{"v":1,"ok":true,"config":{},"parametersBillion":-3}',
        '{"v":1,"ok":true,"config":{},"parametersBillion":true}',
        '{"v":1,"ok":true,"config":{},"revision":"../../etc"}',
        '{"v":1,"ok":true,"configZ":12}',
        '{"v":1,"ok":true,"configZ":"!!!not base64"}',
        # a zip bomb: 50 MB of JSON whitespace in 50 KB ... capped before it is inflated
        '{"v":1,"ok":true,"configZ":"' + _packed(b"{" + b" " * 50_000_000 + b"}") + '"}',
        '{"v":1,"ok":true,"configZ":"' + _packed(b'{"hidden_size": NaN}') + '"}',
        "x" * 2_000_000,
    ],
)
def test_garbled_forged_or_oversized_results_are_invalid_never_an_exception(text: str) -> None:
    result = decode_result(text)
    assert not result.ok and result.reason == "ProbeResultInvalid", result
    assert len(result.message) <= probe.MAX_MESSAGE_CHARS


def test_a_failure_keeps_its_reason_and_a_clean_bounded_message() -> None:
    text = encode_result(
        probe.failure("DeadlineExceeded", "hf://a/b@main: slow\n\u202eevil\x00" + "é" * 5000)
    )
    assert len(text.encode()) <= probe.TERMINATION_MESSAGE_BYTES
    back = decode_result(text)
    assert back.reason == "DeadlineExceeded" and not back.ok
    assert "\n" not in back.message and "\u202e" not in back.message and "\x00" not in back.message
    forged = json.dumps({"v": 1, "ok": False, "reason": "Ok\nInjected", "message": 7})
    assert decode_result(forged).reason == "ProbeFailed"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=5000))
def test_any_text_decodes_to_a_result(text: str) -> None:
    result = decode_result(text)
    assert isinstance(result, ProbeResult) and len(result.message) <= probe.MAX_MESSAGE_CHARS


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20_000), st.from_regex(r"[A-Z][A-Za-z]{0,40}", fullmatch=True))
def test_any_failure_fits_the_kubelets_limit(message: str, reason: str) -> None:
    text = encode_result(probe.failure(reason, message))
    assert len(text.encode()) <= probe.TERMINATION_MESSAGE_BYTES
    assert decode_result(text).reason == reason
