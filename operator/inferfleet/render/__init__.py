"""Renderer: InferenceService + Plan -> Kubernetes objects (pure)."""
