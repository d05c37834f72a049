// Source of the third-party CRDs the e2e cluster installs, at pinned versions: the
// LeaderWorkerSet CRD (multi-node tiers), the prometheus-operator PodMonitor CRD, and the
// front door's InferencePool (Gateway API Inference Extension) and HTTPRoute (Gateway API,
// standard channel), whose schemas the unit tests validate rendered objects against.
// Nothing is built from here: hack/controlplane reads the YAML files from these modules'
// directories in the Go module cache after `go mod download` (checked against go.sum).
module inferfleet.test/controlplane/crds

go 1.26

require (
	github.com/prometheus-operator/prometheus-operator v0.85.0
	sigs.k8s.io/gateway-api v1.5.1
	sigs.k8s.io/gateway-api-inference-extension v1.5.0
	sigs.k8s.io/lws v0.8.0
)
