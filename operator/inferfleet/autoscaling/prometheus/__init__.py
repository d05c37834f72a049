"""The Prometheus port (I/O): the HTTP client and readers of the autoscaler's signals
(`reader`), and the test-side Prometheus and vLLM emulators (`testkit`). What the
queries say and what the answers mean is autoscaling.promql (pure)."""
