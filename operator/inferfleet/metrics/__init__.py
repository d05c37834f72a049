"""The metrics port (I/O): the Prometheus HTTP client that reads the autoscaler's
signals, the operator's own /metrics exporter, and the test-side Prometheus and vLLM
emulators. The pure query text, parsing and signal derivation live in promql/."""
