"""Prometheus signal reads and the operator's own metrics (I/O)."""
