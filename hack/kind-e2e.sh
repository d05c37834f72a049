#!/usr/bin/env bash
# End-to-end tests on a throwaway kind cluster, CPU only:
#   1. create the cluster (or reuse $KIND_CLUSTER if it exists),
#   2. build the vLLM stand-in image (hack/e2e/standin) and load it into the nodes,
#   3. install the CRD, then run tests/e2e, which starts the operator in-process.
# Needs docker, kind and kubectl. KEEP_CLUSTER=1 keeps the cluster afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER="${KIND_CLUSTER:-inferfleet-e2e}"
IMAGE="${INFERFLEET_E2E_IMAGE:-inferfleet/vllm-standin:e2e}"

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "kind-e2e: $tool is required" >&2; exit 2; }
done
if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --wait 120s
fi
trap '[ "${KEEP_CLUSTER:-0}" = 1 ] || kind delete cluster --name "$CLUSTER"' EXIT
kubectl config use-context "kind-$CLUSTER"
docker build -t "$IMAGE" hack/e2e/standin
kind load docker-image "$IMAGE" --name "$CLUSTER"
kubectl apply -f crds/inferenceservices.inferfleet.dev.yaml
kubectl wait --for=condition=Established crd/inferenceservices.inferfleet.dev --timeout=60s
INFERFLEET_E2E_IMAGE="$IMAGE" .venv/bin/pytest -q -m e2e tests/e2e "$@"
