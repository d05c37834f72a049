"""A PNG of one simulation: demand and forecast, replicas per tier, TTFT p99 vs the SLO."""

from __future__ import annotations

import math
from pathlib import Path

from inferfleet.autoscaling.simulate.engine import SimResult


def plot(result: SimResult, path: Path, title: str | None = None) -> None:
    """Write the plot; needs a timeline (SimConfig.timeline=True)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    timeline = result.timeline
    if timeline is None:
        raise ValueError("this simulation kept no timeline to plot")
    hours = [t / 3600.0 for t in timeline.time_s]
    figure, (demand_ax, replica_ax, ttft_ax) = plt.subplots(3, 1, figsize=(12, 9), sharex=True)
    demand_ax.plot(hours, timeline.demand_rps, label="arrivals (last minute)", linewidth=0.8)
    if any(not math.isnan(v) for v in timeline.forecast_rps):
        demand_ax.plot(hours, timeline.forecast_rps, label="forecast at lead time", linewidth=0.8)
    demand_ax.set_ylabel("req/s")
    demand_ax.legend(loc="upper left")
    for name, desired in timeline.desired.items():
        line = replica_ax.step(hours, desired, where="post", label=f"{name} desired", linewidth=0.9)
        replica_ax.step(
            hours, timeline.ready[name], where="post", label=f"{name} ready",
            linestyle="--", color=line[0].get_color(), linewidth=0.8,
        )  # fmt: skip
    replica_ax.set_ylabel("replicas")
    replica_ax.legend(loc="upper left")
    for name, values in timeline.ttft_p99_ms.items():
        ttft_ax.plot(hours, [v / 1000.0 for v in values], label=f"{name} TTFT p99", linewidth=0.8)
    ttft_ax.axhline(result.ttft_slo_ms / 1000.0, color="red", linestyle=":", label="SLO")
    ttft_ax.set_yscale("log")
    ttft_ax.set_ylabel("seconds")
    ttft_ax.set_xlabel("hours")
    ttft_ax.legend(loc="upper left")
    figure.suptitle(title or f"{result.trace}: {result.policy}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
