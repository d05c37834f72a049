#!/usr/bin/env bash
# Regenerate crds/ from the API models (tests fail when it is stale).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/inferfleet crd -o crds/inferenceservices.inferfleet.dev.yaml
