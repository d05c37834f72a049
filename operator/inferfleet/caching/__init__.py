"""Weight caching, in one place: what the node cache holds and how it is filled.

- `caching/precache/`: the node cache's layout, names, manifests and GC plan, the pre-cache
  DaemonSets/Jobs and their readiness, measured cold starts, the config.json probe Job
  (pure);
- `caching/fetcher/`: the pod-side fetcher that fills and verifies the cache, and the probe's
  bounded reader (I/O).
"""
