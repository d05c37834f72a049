#!/usr/bin/env bash
# Re-render tests/golden/*.yaml from manifests/examples/ through the production code.
# Run after a change to the planner or the renderer, then review `git diff tests/golden`.
set -euo pipefail
cd "$(dirname "$0")/.."
UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/golden -p no:cacheprovider "$@"
