"""Autoscaling policy: forecaster, policies, decide() (pure)."""
