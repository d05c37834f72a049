"""Moved to inferfleet.promql.history; shim kept until phase 2b of issue 19 (autoscaler/ and
its tests still import the old path)."""

from inferfleet.promql.history import *  # noqa: F403
