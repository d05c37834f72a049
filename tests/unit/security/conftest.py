"""The autoscaler tests' fixtures (in-memory cluster, scripted reader, settings), shared here."""

from tests.unit.autoscaler.conftest import autoscaler, cluster, reader, settings

__all__ = ["autoscaler", "cluster", "reader", "settings"]
