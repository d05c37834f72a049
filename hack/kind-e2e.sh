#!/usr/bin/env bash
# The e2e suite (tests/e2e) against a throwaway kind cluster instead of the local
# control plane: the same tests, unchanged. For users with Docker:
#   1. create the cluster (or reuse $KIND_CLUSTER if it exists),
#   2. run tests/e2e with INFERFLEET_E2E_KUBECONFIG set: the suite starts KWOK locally
#      for the fake GPU fleet (nodes named e2e-*, removed afterwards), installs the CRDs
#      and runs `inferfleet run` on this machine. The API server must reach the
#      operator's webhook, so it listens on the kind network's gateway address.
# Needs docker, kind, and Go (KWOK, the LeaderWorkerSet controller and kubectl are built by
# hack/controlplane/build.sh; the controller runs here, its webhooks on the gateway too).
# KEEP_CLUSTER=1 keeps the cluster afterwards; arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER="${KIND_CLUSTER:-inferfleet-e2e}"

for tool in docker kind go; do
  command -v "$tool" >/dev/null || { echo "kind-e2e: $tool is required" >&2; exit 2; }
done
[ -x .venv/bin/pytest ] || WITH_TESTS=1 hack/setup.sh
hack/controlplane/build.sh >/dev/null
if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --wait 120s
fi
trap '[ "${KEEP_CLUSTER:-0}" = 1 ] || kind delete cluster --name "$CLUSTER"' EXIT
kubeconfig="$(mktemp -t inferfleet-kind-kubeconfig.XXXXXX)"
kind get kubeconfig --name "$CLUSTER" >"$kubeconfig"
# The address of this machine on kind's Docker network: where kube-apiserver (inside the
# node container) calls the webhook.
gateway="$(docker network inspect kind -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | awk '{print $1}')"
INFERFLEET_E2E_KUBECONFIG="$kubeconfig" INFERFLEET_E2E_WEBHOOK_HOST="$gateway" .venv/bin/pytest -q tests/e2e "$@"
