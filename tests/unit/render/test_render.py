"""The renderer on hand-made plans: what each object carries, and what it must not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from inferfleet import render as render_module
from inferfleet.api import labels
from inferfleet.catalog import placement
from inferfleet.config import OperatorSettings
from inferfleet.design import object_names as names
from inferfleet.render import PodAdditions, TierRenderContext
from inferfleet.render.lifecycle import STARTUP_MIN_S
from tests.toolkit.design import render
from tests.unit.render import plans
from tests.unit.render.validation import validate

SETTINGS = OperatorSettings()


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def container(workload: dict[str, Any], template: str = "template") -> dict[str, Any]:
    spec = workload["spec"]
    pod = spec["template"] if template == "template" else spec["leaderWorkerTemplate"][template]
    first: dict[str, Any] = pod["spec"]["containers"][0]
    return first


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_one_deployment_service_and_budget_per_feasible_tier() -> None:
    objects = render(plans.service(), plans.plan(), SETTINGS)
    kinds = sorted(obj["kind"] for obj in objects)
    expected = ["Service"] * 3 + ["PodDisruptionBudget"] * 2 + ["PodMonitor"] + ["Deployment"] * 2
    expected += ["DaemonSet"] * 2  # the weight pre-cache of each tier (cache.mode nvme by default)
    assert kinds == sorted(expected)
    assert {d["metadata"]["name"] for d in by_kind(objects, "Deployment")} == {"chat-h100", "chat-l4"}


def _selects(selector: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    matched = all(pod_labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
    for expression in selector.get("matchExpressions") or []:
        assert expression["operator"] == "In"
        matched = matched and pod_labels.get(expression["key"]) in expression["values"]
    return matched


def test_disruption_budget_covers_serving_pods_only() -> None:
    """The pre-cache DaemonSet's pods carry the tier's labels too; a budget over them never
    syncs on a real cluster (DaemonSets have no scale subresource) and blocks every drain."""
    objects = render(plans.service(), plans.plan(), SETTINGS)

    def of_tier(kind: str, tier: str) -> dict[str, Any]:
        (found,) = [o for o in by_kind(objects, kind) if o["metadata"]["labels"][labels.LABEL_TIER] == tier]
        return found

    for budget in by_kind(objects, "PodDisruptionBudget"):
        tier = budget["metadata"]["labels"][labels.LABEL_TIER]
        selector = budget["spec"]["selector"]
        assert _selects(selector, of_tier("Deployment", tier)["spec"]["template"]["metadata"]["labels"])
        assert not _selects(selector, of_tier("DaemonSet", tier)["spec"]["template"]["metadata"]["labels"])


def test_infeasible_tier_renders_nothing() -> None:
    objects = render(plans.service(), plans.plan(plans.tier_plan("h100"), plans.infeasible("l4")), SETTINGS)
    tiers = {obj["metadata"]["labels"].get(labels.LABEL_TIER) for obj in objects}
    assert tiers == {None, "h100"}


def test_every_object_validates_against_its_schema() -> None:
    multi = plans.tier_plan(
        "h100", pipelineParallelSize=2, gpusPerReplica=16, nodesPerReplica=2, tensorParallelSize=8
    )
    for plan in (plans.plan(), plans.plan(multi, plans.tier_plan("l4"))):
        for obj in render(plans.service(), plan, SETTINGS):
            validate(obj)


def test_planned_vllm_arguments() -> None:
    tier = plans.tier_plan(
        "h100",
        tensorParallelSize=4,
        gpusPerReplica=4,
        maxModelLen=16384,
        maxNumSeqs=64,
        maxNumBatchedTokens=8192,
        gpuMemoryUtilization=0.92,
        quantization="fp8",
        kvCacheDtype="fp8",
        enforceEager=True,
    )
    service = plans.service(
        model={
            "name": "meta-llama/Llama-3.1-8B-Instruct",
            "servedModelName": "chat-8b",
            "revision": "0e9e39f",
        }
    )
    deployment = by_kind(render(service, plans.plan(tier), SETTINGS), "Deployment")[0]
    args = container(deployment)["args"]
    # Pre-cached (cache.mode nvme by default): the revision the pod pinned replaces --revision.
    assert args[0] == "/run/inferfleet/pinned/model"
    verify = deployment["spec"]["template"]["spec"]["initContainers"][0]
    assert verify["args"][verify["args"].index("--revision") + 1] == "0e9e39f"
    assert flag(args, "--tensor-parallel-size") == "4"
    assert flag(args, "--pipeline-parallel-size") == "1"
    assert flag(args, "--quantization") == "fp8"
    assert flag(args, "--kv-cache-dtype") == "fp8"
    assert flag(args, "--gpu-memory-utilization") == "0.92"
    assert flag(args, "--max-model-len") == "16384"
    assert flag(args, "--max-num-seqs") == "64"
    assert flag(args, "--max-num-batched-tokens") == "8192"
    assert flag(args, "--served-model-name") == "chat-8b"
    assert "--revision" not in args
    assert {"--enable-prefix-caching", "--enable-chunked-prefill", "--enforce-eager"} <= set(args)
    # Memory limit by default: the 48 GiB request plus 4 GPUs x 8 GiB of weights.
    assert container(deployment)["resources"]["limits"] == {"memory": "80Gi", "nvidia.com/gpu": "4"}


def test_serving_switches_and_lora_and_extra_args() -> None:
    service = plans.service(
        model={
            "name": "m/base",
            "adapters": [
                {"name": "sql", "source": "hf://org/sql-lora", "rank": 24},
                {"name": "doc", "source": "hf://org/doc-lora"},
            ],
            "maxSimultaneousAdapters": 1,
        },
        serving={
            "prefixCaching": False,
            "chunkedPrefill": False,
            "extraArgs": ["--seed", "7"],
            "speculativeDecoding": {"method": "ngram", "numSpeculativeTokens": 4},
        },
    )
    objects = render(service, plans.plan(plans.tier_plan("h100")), SETTINGS)
    args = container(by_kind(objects, "Deployment")[0])["args"]
    assert {"--no-enable-prefix-caching", "--no-enable-chunked-prefill", "--enable-lora"} <= set(args)
    assert flag(args, "--max-loras") == "1"
    assert flag(args, "--max-lora-rank") == "32"  # 24 rounds up to a rank vLLM accepts
    assert "sql=/run/inferfleet/pinned/adapter-sql" in args  # pre-cached adapters, pinned
    assert "doc=/run/inferfleet/pinned/adapter-doc" in args
    assert flag(args, "--speculative-config") == '{"method":"ngram","num_speculative_tokens":4}'
    assert args[-2:] == ["--seed", "7"]


def test_hub_token_is_a_read_only_secret_file_never_an_env_value() -> None:
    # A literal HF_TOKEN / HF_TOKEN_PATH in serving.env is refused by validation (tests/unit/api).
    service = plans.service(
        cache={"mode": "none"}, serving={"env": [{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]}
    )
    for deployment in by_kind(render(service, plans.plan(), SETTINGS), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        main = container(deployment)
        env = {entry["name"]: entry for entry in main["env"]}
        assert "HF_TOKEN" not in env
        assert not any("valueFrom" in entry for entry in main["env"])
        assert env["HF_TOKEN_PATH"]["value"] == "/var/run/secrets/inferfleet/hf/token"
        volume = next(v for v in pod["volumes"] if v["name"] == "hf-token")
        assert volume["secret"] == {
            "secretName": "hf",
            "items": [{"key": "token", "path": "token"}],
            "defaultMode": 0o440,
        }
        mount = next(m for m in main["volumeMounts"] if m["name"] == "hf-token")
        assert mount == {"name": "hf-token", "mountPath": "/var/run/secrets/inferfleet/hf", "readOnly": True}
        assert env["VLLM_LOGGING_LEVEL"]["value"] == "DEBUG"
        assert "hf_leaked" not in str(deployment)


def test_pre_cached_pods_get_no_hub_token_at_all() -> None:
    for deployment in by_kind(render(plans.service(), plans.plan(), SETTINGS), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert all(v["name"] != "hf-token" for v in pod["volumes"])
        assert all(e["name"] not in {"HF_TOKEN", "HF_TOKEN_PATH"} for e in container(deployment)["env"])


def test_nvme_cache_mounts_only_its_model_read_only_through_the_claim_and_goes_offline() -> None:
    service = plans.service(cache={"mode": "nvme", "nodePath": "/nvme/weights"})
    deployment = by_kind(render(service, plans.plan(), SETTINGS), "Deployment")[0]
    main = container(deployment)
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The claim of this node path's tree (another root, another claim), read-only; no
    # hostPath anywhere in a tenant's pod (Pod Security baseline refuses one).
    claim = volumes["model-cache"]["persistentVolumeClaim"]
    assert claim["readOnly"] is True and claim["claimName"].startswith("inferfleet-node-cache-")
    assert claim["claimName"] != "inferfleet-node-cache"
    assert not any("hostPath" in volume for volume in pod["volumes"])
    (mount,) = [m for m in main["volumeMounts"] if m["name"] == "model-cache"]
    assert mount["readOnly"] is True
    assert mount["subPath"] == mount["mountPath"].rsplit("/", 1)[1]  # its model directory only
    assert main["args"][0] == "/run/inferfleet/pinned/model"  # vLLM loads the pinned revision
    assert {"name": "pinned-revisions", "mountPath": "/run/inferfleet/pinned", "readOnly": True} in main[
        "volumeMounts"
    ]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in main["env"]


def test_no_cache_downloads_from_the_hub() -> None:
    service = plans.service(cache={"mode": "none"})
    main = container(by_kind(render(service, plans.plan(), SETTINGS), "Deployment")[0])
    assert "--download-dir" not in main["args"]
    assert all(entry["name"] != "HF_HUB_OFFLINE" for entry in main["env"])


def test_probes_prove_the_model_is_loaded_and_startup_follows_cold_start() -> None:
    slow = plans.tier_plan("h100", coldStartSeconds=900.0)
    fast = plans.tier_plan("l4", coldStartSeconds=10.0)
    deployments = {
        d["metadata"]["labels"][labels.LABEL_TIER]: d
        for d in by_kind(render(plans.service(), plans.plan(slow, fast), SETTINGS), "Deployment")
    }
    slow_probe = container(deployments["h100"])["startupProbe"]
    assert slow_probe["httpGet"]["path"] == "/health"
    assert slow_probe["periodSeconds"] * slow_probe["failureThreshold"] >= 2 * 900
    fast_probe = container(deployments["l4"])["startupProbe"]
    assert fast_probe["periodSeconds"] * fast_probe["failureThreshold"] >= STARTUP_MIN_S
    readiness = container(deployments["h100"])["readinessProbe"]["exec"]["command"]
    assert "/v1/models" in readiness[2] and "/health" in readiness[2]
    assert readiness[-1] == "meta-llama/Llama-3.1-8B-Instruct"


def test_termination_drains_in_flight_requests() -> None:
    deployment = by_kind(render(plans.service(), plans.plan(), SETTINGS), "Deployment")[0]
    pod = deployment["spec"]["template"]["spec"]
    pre_stop = container(deployment)["lifecycle"]["preStop"]["exec"]["command"]
    drain_s = float(pre_stop[4])
    # output p99 1000 tokens x ITL SLO 100 ms + TTFT SLO 2 s = 102 s of possible work
    assert drain_s == 102
    assert pod["terminationGracePeriodSeconds"] > drain_s
    assert "num_requests_running" in pre_stop[2]


def test_multi_node_tier_is_a_leader_worker_set() -> None:
    tier = plans.tier_plan(
        "h100", tensorParallelSize=8, pipelineParallelSize=2, gpusPerReplica=16, nodesPerReplica=2
    )
    objects = render(plans.service(), plans.plan(tier), SETTINGS)
    assert not by_kind(objects, "Deployment")
    lws = by_kind(objects, "LeaderWorkerSet")[0]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    leader, worker = container(lws, "leaderTemplate"), container(lws, "workerTemplate")
    assert flag(leader["args"], "--pipeline-parallel-size") == "2"
    assert flag(leader["args"], "--distributed-executor-backend") == "ray"
    assert leader["resources"]["limits"] == worker["resources"]["limits"]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "/v1/models" in leader["readinessProbe"]["exec"]["command"][2]
    # A worker is only a Ray node: alive while its raylet is, ready when the head answers.
    assert "ray health-check" in worker["readinessProbe"]["exec"]["command"][2]
    assert "raylet" in worker["livenessProbe"]["exec"]["command"][2]
    assert "raylet" in worker["startupProbe"]["exec"]["command"][2]
    template_labels = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert template_labels[labels.LABEL_COMPONENT] == names.COMPONENT_WORKER


def test_pod_monitor_relabels_pod_labels_into_series_labels() -> None:
    monitor = by_kind(render(plans.service(), plans.plan(), SETTINGS), "PodMonitor")[0]
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    # The operator's own job first, then the pod's labels; `namespace` stays what
    # prometheus-operator takes from service discovery.
    assert endpoint["relabelings"][0] == {
        "targetLabel": "job",
        "replacement": labels.SCRAPE_JOB_SERVER,
        "action": "replace",
    }
    pairs = {(r["sourceLabels"][0], r["targetLabel"]) for r in endpoint["relabelings"][1:]}
    assert pairs == {
        ("__meta_kubernetes_pod_label_inferfleet_dev_service", labels.SERIES_LABEL_SERVICE),
        ("__meta_kubernetes_pod_label_inferfleet_dev_tier", labels.SERIES_LABEL_TIER),
        # A split's role (absent on colocated pods: the label is then empty).
        ("__meta_kubernetes_pod_label_llm_d_ai_role", labels.SERIES_LABEL_ROLE),
    }
    deployment = by_kind(render(plans.service(), plans.plan(), SETTINGS), "Deployment")[0]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert {labels.LABEL_SERVICE, labels.LABEL_TIER} <= set(pod_labels)


def test_services_select_serving_pods() -> None:
    objects = render(plans.service(), plans.plan(), SETTINGS)
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    assert services["chat"]["spec"]["selector"] == {
        labels.LABEL_SERVICE: "chat",
        labels.LABEL_COMPONENT: names.COMPONENT_SERVER,
    }
    assert services["chat-h100-api"]["spec"]["selector"][labels.LABEL_TIER] == "h100"


def test_owner_reference_only_with_a_uid() -> None:
    for obj in render(plans.service(), plans.plan(), SETTINGS):
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": labels.API_VERSION,
            "kind": labels.KIND,
            "name": "chat",
            "uid": "uid-chat",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    body = plans.service_body()
    del body["metadata"]["uid"]
    from inferfleet.api import parse

    assert all("ownerReferences" not in o["metadata"] for o in render(parse(body), plans.plan(), SETTINGS))


def test_plan_hash_follows_the_pod_template_only() -> None:
    def hashes(service_changes: dict[str, Any], plan: Any = None) -> dict[str, str]:
        objects = render(plans.service(**service_changes), plan or plans.plan(), SETTINGS)
        return {
            d["metadata"]["name"]: d["metadata"]["annotations"][labels.ANNOTATION_PLAN_HASH]
            for d in by_kind(objects, "Deployment")
        }

    base = hashes({})
    peak = copy.deepcopy(plans.BASE_SERVICE["spec"]["workload"]) | {"peakRequestsPerSecond": 50}
    assert hashes({"workload": peak}) == base
    more_replicas = plans.plan(plans.tier_plan("h100", replicasForPeak=9), plans.tier_plan("l4", gpu="L4"))
    assert hashes({}, more_replicas) == base
    revised = hashes(
        {
            "model": {
                "name": "meta-llama/Llama-3.1-8B-Instruct",
                "revision": "abc123",
                "credentialsSecretRef": {"name": "hf"},
            }
        }
    )
    assert all(revised[name] != base[name] for name in base)


def test_new_workloads_start_at_the_warm_minimum() -> None:
    deployments = {
        d["metadata"]["name"]: d
        for d in by_kind(render(plans.service(), plans.plan(), SETTINGS), "Deployment")
    }
    assert deployments["chat-h100"]["spec"]["replicas"] == 2
    assert deployments["chat-l4"]["spec"]["replicas"] == 1


def test_cpu_only_tier_requests_no_accelerator() -> None:
    cpu_tier = {
        "name": "cpu",
        "gpu": {"name": "cpu", "memoryGiB": 16, "resourceName": "none"},
        "image": "registry.local/vllm-cpu:1",
    }
    service = plans.service(tiers=[cpu_tier])
    deployment = by_kind(
        render(service, plans.plan(plans.tier_plan("cpu", gpusPerReplica=1)), SETTINGS), "Deployment"
    )[0]
    assert set(container(deployment)["resources"]["limits"]) == {"memory"}
    pod = deployment["spec"]["template"]["spec"]
    # No accelerator: no GPU taint to tolerate, no GPU type to require; an on-demand tier
    # still stays off spot capacity.
    assert not pod.get("tolerations")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchExpressions": placement.off_spot()}]
    assert container(deployment)["image"] == "registry.local/vllm-cpu:1"


def test_pod_contributors_extend_every_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    init = {"name": "wait-for-cache", "image": "busybox", "command": ["true"]}

    def contribute(ctx: TierRenderContext) -> PodAdditions:
        return PodAdditions(
            init_containers=(init | {"name": f"wait-{ctx.tier.name}"},),
            volumes=({"name": "extra", "emptyDir": {}},),
            mounts=({"name": "extra", "mountPath": "/extra"},),
        )

    monkeypatch.setattr(render_module, "POD_CONTRIBUTORS", (contribute,))
    for deployment in by_kind(render(plans.service(), plans.plan(), SETTINGS), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        tier = deployment["metadata"]["labels"][labels.LABEL_TIER]
        assert pod["initContainers"][0]["name"] == f"wait-{tier}"
        assert {"name": "extra", "mountPath": "/extra"} in pod["containers"][0]["volumeMounts"]
        validate(deployment)


def test_longest_names_the_api_accepts_fit_without_truncation() -> None:
    service_name, tier = "s" * 27, "t" * 24  # 27 + 24 = the API's bound on the pair
    body = plans.service_body(tiers=[{"name": tier, "gpu": "L4"}])
    body["metadata"]["name"] = service_name
    from inferfleet.api import parse

    objects = render(parse(body), plans.plan(plans.tier_plan(tier), name=service_name), SETTINGS)
    for obj in objects:
        limit = names.WORKLOAD_NAME_MAX if obj["kind"] == "Deployment" else names.DNS_LABEL_MAX
        assert len(obj["metadata"]["name"]) <= limit
        assert obj["metadata"]["name"].startswith(service_name)
        validate(obj)
    assert by_kind(objects, "Deployment")[0]["metadata"]["name"] == f"{service_name}-{tier}"
    assert len({o["metadata"]["name"] for o in by_kind(objects, "Service")}) == 2


def test_truncation_stays_a_safety_net_for_names_built_outside_the_api() -> None:
    long = names.workload_name("s" * 63, "t" * 40)
    assert len(long) <= names.WORKLOAD_NAME_MAX
    assert long != names.workload_name("s" * 63, "t" * 39)  # the hash keeps them apart


def _pods(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]
    if "template" in spec:
        return [spec["template"]["spec"]]
    templates = spec["leaderWorkerTemplate"]
    return [templates["leaderTemplate"]["spec"], templates["workerTemplate"]["spec"]]


def test_every_vllm_pod_is_non_root_unprivileged_and_read_only() -> None:
    multi = plans.tier_plan(
        "h100", tensorParallelSize=8, pipelineParallelSize=2, gpusPerReplica=16, nodesPerReplica=2
    )
    for plan in (plans.plan(), plans.plan(multi)):
        objects = render(plans.service(), plan, SETTINGS)
        workloads = by_kind(objects, "Deployment") + by_kind(objects, "LeaderWorkerSet")
        assert workloads
        for pod in (pod for workload in workloads for pod in _pods(workload)):
            assert pod["securityContext"] == {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "runAsGroup": 10001,
                "fsGroup": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            }
            assert pod["automountServiceAccountToken"] is False
            # The vLLM container and whatever the weight cache adds (verify, hold sidecar).
            for box in [*pod.get("initContainers", []), *pod["containers"]]:
                context = box["securityContext"]
                assert context["allowPrivilegeEscalation"] is False
                assert context.get("privileged", False) is False
                assert context["readOnlyRootFilesystem"] is True
                assert context["capabilities"] == {"drop": ["ALL"]}
                assert "memory" in box["resources"]["limits"]
            main = pod["containers"][0]
            env = {e["name"]: e.get("value") for e in main["env"]}
            mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            # Everything vLLM writes lands on a writable emptyDir.
            for path in ("/tmp", env["HOME"]):
                assert "emptyDir" in volumes[mounts[path]], path
            for cache in ("XDG_CACHE_HOME", "VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "NUMBA_CACHE_DIR"):
                assert env[cache].startswith(env["HOME"] + "/"), cache


def test_root_only_when_asked_for_and_never_privileged() -> None:
    settings = SETTINGS.model_copy(update={"vllm_run_as_root": True})
    for deployment in by_kind(render(plans.service(), plans.plan(), settings), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert container(deployment)["securityContext"]["allowPrivilegeEscalation"] is False
    uid = SETTINGS.model_copy(update={"vllm_run_as_user": 20000})
    pod = by_kind(render(plans.service(), plans.plan(), uid), "Deployment")[0]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 20000


def test_memory_limit_from_the_spec_or_never_below_the_request() -> None:
    tier = plans.tier_plan("h100")
    pinned = plans.service(serving={"resources": {"limits": {"memory": "300Gi"}}})
    deployment = by_kind(render(pinned, plans.plan(tier), SETTINGS), "Deployment")[0]
    assert container(deployment)["resources"]["limits"]["memory"] == "300Gi"
    big_request = plans.service(serving={"resources": {"requests": {"memory": "500Gi"}}})
    deployment = by_kind(render(big_request, plans.plan(tier), SETTINGS), "Deployment")[0]
    assert container(deployment)["resources"]["limits"]["memory"] == "500Gi"


def test_gpu_resource_name_comes_from_the_operators_catalog_file(tmp_path: Any) -> None:
    catalog_file = tmp_path / "gpus.yaml"
    catalog_file.write_text(
        "gpus:\n"
        "  - {name: MI300X, family: cdna3, memoryGiB: 192, bandwidthTBs: 5.3, bf16Tflops: 1307,\n"
        "     fp8Tflops: 2615, interconnect: infinity-fabric, gpusPerNode: 8, resourceName: amd.com/gpu}\n"
    )
    settings = SETTINGS.model_copy(update={"catalog_file": str(catalog_file)})
    service = plans.service(tiers=[{"name": "mi300", "gpu": "MI300X"}])
    deployment = by_kind(
        render(service, plans.plan(plans.tier_plan("mi300", gpu="MI300X")), settings), "Deployment"
    )[0]
    assert container(deployment)["resources"]["limits"]["amd.com/gpu"] == "2"
    assert deployment["spec"]["template"]["spec"]["tolerations"][0]["key"] == "amd.com/gpu"


def test_render_is_deterministic_and_pure() -> None:
    service, plan = plans.service(), plans.plan()
    before = copy.deepcopy(service.model_dump()), copy.deepcopy(plan.model_dump())
    assert render(service, plan, SETTINGS) == render(service, plan, SETTINGS)
    assert (service.model_dump(), plan.model_dump()) == before


def test_image_from_settings_unless_the_spec_names_one() -> None:
    settings = SETTINGS.model_copy(update={"vllm_image": "registry.local/vllm:1"})
    default = container(by_kind(render(plans.service(), plans.plan(), settings), "Deployment")[0])
    assert default["image"] == "registry.local/vllm:1"
    pinned = plans.service(serving={"image": "vllm/vllm-openai:v0.33.0"})
    assert container(by_kind(render(pinned, plans.plan(), settings), "Deployment")[0])["image"] == (
        "vllm/vllm-openai:v0.33.0"
    )


def test_hash_of_pre_encoded_members_equals_the_hash_of_the_document() -> None:
    from inferfleet.render.service_objects import canonical_json, content_hash, content_hash_encoded

    pods = {"worker": {"b": [1, "é"], "a": {"z": None, "y": 1.5}}, "server": {"x": True}}
    encoded = {role: canonical_json(pod) for role, pod in pods.items()}
    assert content_hash_encoded(encoded) == content_hash(pods)
