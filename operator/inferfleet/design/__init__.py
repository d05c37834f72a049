"""Every decision derived from an InferenceService spec, in one place (pure)."""
