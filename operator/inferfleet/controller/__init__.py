"""The imperative shell around the pure reconcile core: execute actions, run a pass."""
