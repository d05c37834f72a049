#!/usr/bin/env bash
# The main job on a bundled example, no cluster needed: install, then validate, plan,
# render and simulate one InferenceService.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
EXAMPLE="${1:-manifests/examples/llama-70b-chat.yaml}"
echo "== inferfleet validate -f $EXAMPLE"
inferfleet validate -f "$EXAMPLE"
