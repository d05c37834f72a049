#!/usr/bin/env bash
# The main job on a bundled example, no cluster needed: install, then validate, plan,
# render and simulate one InferenceService against a bundled real trace.
#   hack/demo.sh [EXAMPLE.yaml] [TRACE]
# The default pair is a deliberate mismatch: the 8B chat example declares chat prompts
# (p50 600 tokens) and the bundled trace is Azure's code hour, whose prompts run to
# 7,400 tokens. The replay shows what the operator does about it: WorkloadDrift says the
# plan is wrong and which plan the observed workload implies, and that plan (what
# spec.scaling.replan: auto deploys) is replayed on the same trace.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
EXAMPLE="${1:-manifests/examples/llama-8b-chat.yaml}"
TRACE="${2:-operator/inferfleet/autoscaling/simulate/data/azure-llm-2023-code.csv}"
OUT="out"
mkdir -p "$OUT"
name="$(basename "$EXAMPLE" .yaml)"

echo "== inferfleet validate -f $EXAMPLE"
inferfleet validate -f "$EXAMPLE"

echo; echo "== inferfleet plan -f $EXAMPLE"
inferfleet plan -f "$EXAMPLE"
inferfleet plan -f "$EXAMPLE" -o json > "$OUT/$name.plan.json"

echo; echo "== inferfleet render -f $EXAMPLE > $OUT/$name.yaml"
inferfleet render -f "$EXAMPLE" > "$OUT/$name.yaml"
grep -E '^kind: ' "$OUT/$name.yaml" | sort | uniq -c

# The front door: one route on the Gateway the example names, to the pool(s) of every
# tier's serving pods, whose endpoint picker filters by prompt length and holds requests
# while a tier wakes from zero.
echo; echo "== the front door in $OUT/$name.yaml"
python - "$OUT/$name.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    meta, spec = d["metadata"], d.get("spec", {})
    if d["kind"] == "HTTPRoute":
        parent = spec["parentRefs"][0]
        backends = ", ".join(f"{b['name']}" + (f" (weight {b['weight']})" if "weight" in b else "")
                             for b in spec["rules"][0]["backendRefs"])
        match = spec.get("hostnames") or [m["path"]["value"] for m in spec["rules"][0]["matches"]]
        print(f"HTTPRoute {meta['name']}: Gateway {parent.get('namespace', meta['namespace'])}/{parent['name']},"
              f" match {', '.join(match)} -> {backends}; request timeout {spec['rules'][0]['timeouts']['request']}")
    elif d["kind"] == "InferencePool":
        print(f"InferencePool {meta['name']}: pods {spec['selector']['matchLabels']}, picker "
              f"{spec['endpointPickerRef']['name']}, hold {meta['annotations']['inferfleet.dev/hold-seconds']} s")
    elif d["kind"] in ("Deployment", "LeaderWorkerSet") and "inferfleet.dev/tier" in meta["labels"]:
        pod = spec["template"] if d["kind"] == "Deployment" else spec["leaderWorkerTemplate"]["leaderTemplate"]
        labels = pod["metadata"]["labels"]
        prompts = labels.get("llm-d.ai/context-length-range", "any (the longest max-model-len)")
        print(f"  tier {meta['labels']['inferfleet.dev/tier']}: prompts {prompts},"
              f" max-model-len {labels['inferfleet.dev/max-model-len']},"
              f" {labels['inferfleet.dev/max-num-seqs']} seqs, {labels['inferfleet.dev/kv-cache-tokens']}"
              f" KV tokens, cost rank {labels['inferfleet.dev/cost-rank']}")
PY

echo; echo "== inferfleet simulate -f $EXAMPLE --trace $TRACE --policy all --plot $OUT/$name.sim.png"
echo "   (the trace's prompts are not the ones the example declares: see WorkloadDrift below)"
inferfleet simulate -f "$EXAMPLE" --trace "$TRACE" --policy all --plot "$OUT/$name.sim.png" \
  --observed-workload-out "$OUT/$name.observed.json"

echo; echo "== what spec.scaling.replan: auto does: plan for the observed workload, replay the same trace"
inferfleet plan -f "$EXAMPLE" --observed-workload "$OUT/$name.observed.json" -o json > "$OUT/$name.replanned.json"
inferfleet simulate -f "$EXAMPLE" --trace "$TRACE" --policy all --observed-workload "$OUT/$name.observed.json"
echo; echo "wrote $OUT/$name.plan.json, $OUT/$name.yaml, $OUT/$name.sim-<policy>.png,"
echo "      $OUT/$name.observed.json (the workload the engines reported) and $OUT/$name.replanned.json"
