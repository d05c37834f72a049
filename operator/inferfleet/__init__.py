"""inferfleet: a Kubernetes operator for right-sized, autoscaled vLLM fleets."""

__version__ = "0.1.0"
