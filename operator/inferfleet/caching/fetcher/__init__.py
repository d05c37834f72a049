"""Weight pre-caching, the pod side (I/O): reading sources over the network (`remote`,
`modelconfig`), writing and locking the node cache (`store`, `safefs`, `partfile`) and
the fetch loop (`fetch`). Every decision it acts on is in `inferfleet.caching.precache`."""
