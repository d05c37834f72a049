"""Moved to inferfleet.promql.parse; shim kept until phase 2b of issue 19 (autoscaler/ and
its tests still import the old path)."""

from inferfleet.promql.parse import *  # noqa: F403
