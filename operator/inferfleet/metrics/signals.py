"""Moved to inferfleet.promql.signals; shim kept until phase 2b of issue 19 (autoscaler/ and
its tests still import the old path)."""

from inferfleet.promql.signals import *  # noqa: F403
