"""What each reading can be (pure): a value outside its range is no measurement.

Every reading the autoscaler takes from Prometheus is a count, a rate, a duration, a
share or a token length, so a NaN, an infinity or a negative number is never one, nor is
a KV-cache usage above 1 or a queue of 10^13 requests. Such a value is missing data for
the tier (or pod, or pool) it belongs to, never demand and never zero; the rest of the
tick goes on.

This module is the one table of those ranges. Each reading is checked once, where it
enters: gauges series by series inside the query (`queries.checked`, so one bad pod
spoils its own tier's sum instead of hiding in it), every per-tier value when it becomes
a `readings.TierReadings` (from Prometheus or a replay; decide() reads that object), the
front door's pools in `autoscaling.promql.signals.assemble`, and the pod loads, the rate history and
the KV capacity in their parsers (`autoscaling.promql.parse`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from inferfleet.api.model_config_bounds import MAX_POSITIONS


@dataclass(frozen=True)
class Bounds:
    """The closed range `[low, high]` a reading must lie in to be a measurement."""

    low: float
    high: float

    def __call__(self, value: float | None) -> float | None:
        """`value` when it is a measurement, otherwise None ("no data")."""
        if value is None or not math.isfinite(value) or not self.low <= value <= self.high:
            return None
        return value


# No count, rate or duration the policy reads comes near this; a reading that does is
# garbage, and arithmetic on it (1e308 x 2) would overflow to infinity.
MAX_READING = 1e12

# Requests waiting, running or held at the front door: per pod or summed over a tier.
COUNT = Bounds(0.0, MAX_READING)
# vllm:kv_cache_usage_perc is the used share of the KV blocks ("1 means 100 percent").
FRACTION = Bounds(0.0, 1.0)
# Requests, tokens or 4xx answers per second, from rate() over counters.
RATE = Bounds(0.0, MAX_READING)
# A TTFT quantile in seconds (histogram_quantile answers +Inf only above the last bucket).
DURATION_S = Bounds(0.0, MAX_READING)
# A request's prompt or output length: never more than a model's context can hold.
TOKENS = Bounds(0.0, float(MAX_POSITIONS))
# Ready replicas of one tier.
REPLICAS = Bounds(0.0, 1e6)
# vllm:cache_config_info's num_gpu_blocks and block_size: positive integers, bounded so
# their product (the tokens the status reports) stays exact as a JSON number (< 2^53).
KV_BLOCKS_MAX = 2**31 - 1
KV_BLOCK_SIZE_MAX = 2**20

# rate() can dip a hair below zero after an extrapolated counter reset: noise around zero.
_RATE_NOISE = 1e-6


def rate(value: float | None) -> float | None:
    """A per-second rate, with the extrapolation noise just below zero read as zero."""
    if value is not None and math.isfinite(value) and -_RATE_NOISE <= value < 0:
        return 0.0
    return RATE(value)


_WHOLE_NUMBER = re.compile(r"[1-9][0-9]{0,17}")


def positive_int(raw: object, maximum: int) -> int | None:
    """A label value spelled as a whole number in `[1, maximum]` (plain ASCII digits:
    no sign, space, `_` or other digits int() would take), else None."""
    if not isinstance(raw, str) or _WHOLE_NUMBER.fullmatch(raw) is None:
        return None
    number = int(raw)
    return number if number <= maximum else None
