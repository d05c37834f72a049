// The front door's third-party CRDs, at pinned versions: the Gateway API Inference
// Extension's InferencePool (inference.networking.k8s.io/v1) and the Gateway API's
// HTTPRoute (gateway.networking.k8s.io/v1, standard channel). Nothing is built from here:
// hack/update_frontdoor_schemas.py reads the CRD YAML from these modules in the Go module
// cache after `go mod download` (checked against go.sum) and writes the schemas the tests
// validate rendered objects against (tests/schemas/); the e2e control plane installs the
// CRDs themselves from the same module directories.
module inferfleet.test/frontdoor-crds

go 1.26

require (
	sigs.k8s.io/gateway-api v1.5.1
	sigs.k8s.io/gateway-api-inference-extension v1.5.0
)
