"""Trace-replay simulator driving the same decide() as the live loop."""
