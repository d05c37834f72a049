#!/usr/bin/env bash
# Copy the generated CRDs into the Helm chart's crds/ folder (tests fail when stale):
# crds/*.yaml (from the API models, see hack/gen-crd.sh) and kopf's peering CRDs.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=charts/inferfleet/crds
mkdir -p "$dest"
find "$dest" -name '*.yaml' -delete
cp crds/*.yaml "$dest/"
cp hack/kopf-peering-crds.yaml "$dest/kopf.dev-peerings.yaml"
echo "wrote $(ls "$dest" | wc -l) CRD files to $dest"
