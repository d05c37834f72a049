"""Designs for tests: the operator's design of a service, or a design on a given plan.

`designed(service)` is what the operator designs (design.design under the settings);
`on_plan(service, plan)` designs on a plan the test made (what the autoscaler does with
the plan status shows deployed), so render and the front door can be tested on any
plan; `render(service, plan, settings)` renders such a design.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferfleet import render as render_module
from inferfleet.api import InferenceService, Plan
from inferfleet.config import OperatorSettings
from inferfleet.design import Design, ModelReading, Observations, design
from inferfleet.planner import FetchedModel, MeasuredColdStart

DEFAULT_SETTINGS = OperatorSettings()


def designed(
    service: InferenceService,
    settings: OperatorSettings = DEFAULT_SETTINGS,
    *,
    fetched: FetchedModel | None = None,
) -> Design:
    return design(service, settings, Observations(model=ModelReading(fetched)))


def on_plan(
    service: InferenceService,
    plan: Plan,
    settings: OperatorSettings = DEFAULT_SETTINGS,
    measured_cold_start_s: Mapping[str, float] | None = None,
) -> Design:
    measured = measured_cold_start_s or {}
    cold_starts = {tier: MeasuredColdStart(seconds, 1) for tier, seconds in measured.items()}
    return design(service, settings, Observations(deployed_plan=plan, cold_starts=cold_starts))


def render(
    service: InferenceService,
    plan: Plan,
    settings: OperatorSettings = DEFAULT_SETTINGS,
    measured_cold_start_s: Mapping[str, float] | None = None,
    workload_revisions: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The objects of `service` designed on `plan`."""
    return render_module.render(on_plan(service, plan, settings, measured_cold_start_s), workload_revisions)
