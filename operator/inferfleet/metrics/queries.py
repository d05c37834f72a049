"""Moved to inferfleet.promql.queries; shim kept until phase 2b of issue 19 (autoscaler/ and
its tests still import the old path)."""

from inferfleet.promql.queries import *  # noqa: F403
