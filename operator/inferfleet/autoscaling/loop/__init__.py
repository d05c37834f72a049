"""The live autoscaler: Prometheus signals in, replica counts out (step: pure; runner: I/O)."""
