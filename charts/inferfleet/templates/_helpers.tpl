{{/* Chart name, truncated to a DNS label. */}}
{{- define "inferfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, or the release alone when it already holds the chart name. */}}
{{- define "inferfleet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "inferfleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "inferfleet.labels" -}}
helm.sh/chart: {{ include "inferfleet.chart" . }}
{{ include "inferfleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: inferfleet
{{- end }}

{{- define "inferfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inferfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "inferfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "inferfleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image, pinned by digest when one is given. */}}
{{- define "inferfleet.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "inferfleet.peeringName" -}}
{{- default (include "inferfleet.fullname" .) .Values.peering.name }}
{{- end }}

{{- define "inferfleet.peeringEnabled" -}}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{/*
RBAC rules: exactly the API calls the operator makes, inferfleet.cluster.API_CALLS (the
cluster port's access table plus kopf's own calls); tests/integration/chart/test_rbac.py
fails when the two drift. No wildcards. "namespacedRules" are granted per watched
namespace (Role) or cluster-wide (ClusterRole); "clusterRules" cover cluster-scoped
resources and live in the ClusterRole (none at all with rbac.namespaceOnly);
"leaderElectionRules" are granted in the release namespace only (a Role), where the
Lease lives. Each rule appears only when the feature needing it is on: leader
election with more than one replica, the webhook's configuration with
webhook.enabled, `patch pods` with scaling.podDeletionCost. Where the API server can
narrow a verb to one object (get/patch/update by name), resourceNames do; `create`
cannot be narrowed that way (the name is not known when it is authorised).
*/}}

{{- define "inferfleet.namespaceOnly" -}}
{{- if .Values.rbac.namespaceOnly }}
{{- if not .Values.watchNamespaces }}
{{- fail "rbac.namespaceOnly needs watchNamespaces: the operator can only be limited to namespaces it is told" }}
{{- end }}
{{- if .Values.webhook.enabled }}
{{- fail "rbac.namespaceOnly cannot register the admission webhook (a cluster-scoped object): set webhook.enabled=false, or let a cluster admin create it" }}
{{- end }}
{{- true }}
{{- end }}
{{- end }}
{{- define "inferfleet.cacheVolumes" -}}
{{- if include "inferfleet.namespaceOnly" . }}preProvisioned{{ else }}{{ .Values.cache.volumes }}{{ end }}
{{- end }}

{{- define "inferfleet.namespacedRules" -}}
# The InferenceService: read, plus kopf's progress annotations (never spec).
- apiGroups: [inferfleet.dev]
  resources: [inferenceservices]
  verbs: [get, list, watch, patch]
- apiGroups: [inferfleet.dev]
  resources: [inferenceservices/status]
  verbs: [patch]
# Per-tier workloads: server-side apply (create/patch), prune (delete), observe.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [leaderworkerset.x-k8s.io]
  resources: [leaderworkersets]
  verbs: [get, list, watch, create, patch, delete]
# The autoscaler owns replica counts through the scale subresource.
- apiGroups: [apps]
  resources: [deployments/scale]
  verbs: [get, patch]
- apiGroups: [leaderworkerset.x-k8s.io]
  resources: [leaderworkersets/scale]
  verbs: [get, patch]
# Other owned children.
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, create, patch, delete]
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [get, list, create, patch, delete]
# The node cache reaches a namespace's pods only through its claim (bound to the
# namespace's own PersistentVolume): read, and created once, never patched.
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, create]
# Weight pre-cache: a DaemonSet per tier (node-local NVMe) or a Job (shared claim); the
# config.json probe Job of a model the catalog lacks. Watched so CacheReady and the
# probe's verdict follow their status.
- apiGroups: [apps]
  resources: [daemonsets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, patch, delete]
# The front door: the InferencePool(s) and HTTPRoute, and per pool an endpoint picker
# (Deployment and Service above; its identity here).
- apiGroups: [inference.networking.k8s.io]
  resources: [inferencepools]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [get, list, create, patch, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, create, patch, delete]
# The pickers' Role grants them read access to these; the API server lets the operator
# create that Role only while it holds the same access itself.
- apiGroups: [inference.networking.x-k8s.io]
  resources: [inferenceobjectives, inferencemodelrewrites]
  verbs: [get, list, watch]
# Serving, pre-cache and probe pods are read (cold starts, cache readiness, the front
# door's endpoints, the probe's result; get and watch are the endpoint pickers',
# delegated, see above); with
# scaling.podDeletionCost the autoscaler also marks the pods to remove first.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch{{ if .Values.scaling.podDeletionCost }}, patch{{ end }}]
# Events about plans, scaling decisions and handler progress.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end }}

{{- define "inferfleet.leaderElectionRules" -}}
# Leader election: the replica holding this Lease reconciles, autoscales and resyncs.
# It is named by peering.name; only creating it cannot be limited to that name.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ include "inferfleet.peeringName" . }}]
  verbs: [get, update]
{{- end }}

{{- define "inferfleet.clusterRules" -}}
# kopf notices CRDs and namespaces being added or removed (read-only); the operator reads
# a namespace's uid, which names the namespace's tree of the node cache.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch{{ if eq (include "inferfleet.cacheVolumes" .) "operator" }}, get{{ end }}]
{{- if eq (include "inferfleet.cacheVolumes" .) "operator" }}
# The node cache: one hostPath PersistentVolume per namespace, pointing at that
# namespace's own tree and bound to its claim only. Created, read, and deleted only when
# an earlier namespace of the same name left one behind; never patched.
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, create, delete]
{{- end }}
{{- if .Values.webhook.enabled }}
# Each replica registers its certificate in the validating webhook's configuration: it
# creates it when missing (a create cannot be limited by name) and otherwise reads and
# replaces only that one object (conditional on its resourceVersion).
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  verbs: [create]
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [validate.inferfleet.dev]
  verbs: [get, update]
{{- end }}
{{- end }}

{{/* Node-selector expressions no GPU node the operator can recognise matches (the same
     as the operator's catalog.placement.off_gpu_expressions, kept equal by a test): the
     GPU stacks' labels must be absent, and a catalog key CPU nodes carry too (the
     instance type) must not have a GPU value. Unlabelled nodes all match. */}}
{{- define "inferfleet.offGpuNodeExpressions" -}}
{{- $present := list "nvidia.com/gpu.present" "nvidia.com/gpu.product" "cloud.google.com/gke-accelerator" "karpenter.k8s.aws/instance-gpu-name" "eks.amazonaws.com/instance-gpu-name" "kubernetes.azure.com/accelerator" "amd.com/gpu.product-name" "amd.com/gpu.device-id" }}
{{- $values := dict "node.kubernetes.io/instance-type" (list "p4d.24xlarge" "p4de.24xlarge") }}
{{- range .Values.catalog.gpus }}
{{- range $key, $listed := (.nodeLabels | default dict) }}
{{- if not (has $key $present) }}
{{- $more := kindIs "string" $listed | ternary (list $listed) $listed }}
{{- $_ := set $values $key (concat (get $values $key | default list) $more | uniq | sortAlpha) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $present }}
- key: {{ . }}
  operator: DoesNotExist
{{- end }}
{{- range $key := keys $values | sortAlpha }}
- key: {{ $key }}
  operator: NotIn
  values: {{ get $values $key | toJson }}
{{- end }}
{{- end }}
