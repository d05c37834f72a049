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
TRACE="${2:-operator/inferfleet/simulate/data/azure-llm-2023-code.csv}"
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

echo; echo "== inferfleet simulate -f $EXAMPLE --trace $TRACE --policy all --plot $OUT/$name.sim.png"
echo "   (the trace's prompts are not the ones the example declares: see WorkloadDrift below)"
inferfleet simulate -f "$EXAMPLE" --trace "$TRACE" --policy all --plot "$OUT/$name.sim.png" \
  --observed-workload-out "$OUT/$name.observed.json"

echo; echo "== what spec.scaling.replan: auto does: plan for the observed workload, replay the same trace"
inferfleet plan -f "$EXAMPLE" --observed-workload "$OUT/$name.observed.json" -o json > "$OUT/$name.replanned.json"
inferfleet simulate -f "$EXAMPLE" --trace "$TRACE" --policy all --observed-workload "$OUT/$name.observed.json"
echo; echo "wrote $OUT/$name.plan.json, $OUT/$name.yaml, $OUT/$name.sim-<policy>.png,"
echo "      $OUT/$name.observed.json (the workload the engines reported) and $OUT/$name.replanned.json"
