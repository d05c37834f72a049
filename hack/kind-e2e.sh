#!/usr/bin/env bash
# End-to-end run on a throwaway kind cluster (needs Docker; not run in CI here):
#   1. create a kind cluster (or reuse one with the same name),
#   2. build the operator image (hack/Dockerfile) and the CPU-only vLLM stand-in
#      (hack/vllm-standin/) and load both into the cluster,
#   3. install the prometheus-operator and LeaderWorkerSet CRDs the operator's children use,
#   4. install the chart with the stand-in as the default vLLM image,
#   5. optionally apply a CPU-only InferenceService (E2E_EXAMPLE) and wait for Ready,
#   6. run `pytest tests/e2e` against the cluster (the e2e tests create their own CRs).
#
# Requirements: docker, kind, kubectl, helm (v3.8+), and the repo's .venv (hack/setup.sh).
# Environment:
#   CLUSTER=inferfleet-e2e       kind cluster name
#   KEEP_CLUSTER=0               1 keeps the cluster afterwards (for debugging)
#   E2E_EXAMPLE=                 an InferenceService file to apply and wait for (optional)
#   E2E_TIMEOUT=600s             how long to wait for Ready
#   INSTALL_CRDS=1               0 skips the prometheus-operator/LWS CRDs
#   PROMETHEUS_OPERATOR_VERSION, LWS_VERSION  versions of those CRDs
#   PYTEST_ARGS=                 extra arguments for pytest tests/e2e
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-inferfleet-e2e}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
E2E_EXAMPLE=${E2E_EXAMPLE:-}
E2E_TIMEOUT=${E2E_TIMEOUT:-600s}
INSTALL_CRDS=${INSTALL_CRDS:-1}
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.76.0}
LWS_VERSION=${LWS_VERSION:-v0.6.2}
NAMESPACE=inferfleet-system
OPERATOR_IMAGE=ghcr.io/inferfleet/inferfleet:e2e
STANDIN_IMAGE=inferfleet/vllm-standin:e2e
CONTEXT="kind-${CLUSTER}"

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "kind-e2e: '$tool' is required" >&2; exit 2; }
done
[ -x .venv/bin/pytest ] || { echo "kind-e2e: run hack/setup.sh first (WITH_TESTS=1)" >&2; exit 2; }

created=0
cleanup() {
  if [ "$created" = 1 ] && [ "$KEEP_CLUSTER" != 1 ]; then
    echo "== deleting kind cluster $CLUSTER"
    kind delete cluster --name "$CLUSTER"
  fi
}
trap cleanup EXIT

if ! kind get clusters | grep -qx "$CLUSTER"; then
  echo "== creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 180s
  created=1
fi
kctl() { kubectl --context "$CONTEXT" "$@"; }

echo "== building images"
docker build -f hack/Dockerfile -t "$OPERATOR_IMAGE" .
docker build -t "$STANDIN_IMAGE" hack/vllm-standin
kind load docker-image --name "$CLUSTER" "$OPERATOR_IMAGE" "$STANDIN_IMAGE"

if [ "$INSTALL_CRDS" = 1 ]; then
  echo "== installing PodMonitor/ServiceMonitor and LeaderWorkerSet CRDs"
  kctl apply --server-side -f "https://github.com/prometheus-operator/prometheus-operator/releases/download/${PROMETHEUS_OPERATOR_VERSION}/stripped-down-crds.yaml"
  kctl apply --server-side -f "https://github.com/kubernetes-sigs/lws/releases/download/${LWS_VERSION}/manifests.yaml"
fi

echo "== installing the chart"
helm upgrade --install inferfleet charts/inferfleet \
  --kube-context "$CONTEXT" --namespace "$NAMESPACE" --create-namespace \
  --set image.tag=e2e --set image.pullPolicy=Never \
  --set serving.vllmImage="$STANDIN_IMAGE" \
  --set scaling.syncPeriodSeconds=5 \
  --wait --timeout 5m
kctl -n "$NAMESPACE" rollout status deployment/inferfleet --timeout=180s

if [ -n "$E2E_EXAMPLE" ]; then
  echo "== applying $E2E_EXAMPLE and waiting for Ready"
  kctl apply -f "$E2E_EXAMPLE"
  ns=$(kctl apply -f "$E2E_EXAMPLE" --dry-run=client -o jsonpath='{.metadata.namespace}')
  name=$(kctl apply -f "$E2E_EXAMPLE" --dry-run=client -o jsonpath='{.metadata.name}')
  kctl -n "${ns:-default}" wait "inferenceservice/$name" --for=condition=Ready --timeout="$E2E_TIMEOUT"
fi

echo "== pytest tests/e2e"
export KUBECONFIG="${KUBECONFIG:-$HOME/.kube/config}"
export INFERFLEET_E2E_CONTEXT="$CONTEXT" INFERFLEET_E2E_NAMESPACE="$NAMESPACE"
export INFERFLEET_E2E_VLLM_IMAGE="$STANDIN_IMAGE"
kctl config use-context "$CONTEXT" >/dev/null
# shellcheck disable=SC2086  # PYTEST_ARGS is a word list on purpose
.venv/bin/pytest tests/e2e ${PYTEST_ARGS:-}
