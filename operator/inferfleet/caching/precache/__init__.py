"""Weight pre-caching, the decisions (pure): the node cache's layout and names, the
fetch manifest and its checksums, the garbage-collection plan, the operator's pre-cache
DaemonSets/Jobs and serving-pod mounts (`workloads`), their readiness and measured cold
starts. No network, no filesystem: the pod-side I/O is `inferfleet.caching.fetcher`."""
