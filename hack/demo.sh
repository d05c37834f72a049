#!/usr/bin/env bash
# The main job on a bundled example, no cluster needed: install, then validate, plan,
# render and simulate one InferenceService against a bundled real trace.
#   hack/demo.sh [EXAMPLE.yaml] [TRACE]
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
inferfleet simulate -f "$EXAMPLE" --trace "$TRACE" --policy all --plot "$OUT/$name.sim.png"
echo; echo "wrote $OUT/$name.plan.json, $OUT/$name.yaml and $OUT/$name.sim-<policy>.png"
