"""The narrow port to the Kubernetes API server: real and in-memory adapters."""
