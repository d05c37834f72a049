"""Autoscaling, in one place: the pure policy and the I/O that feeds and applies it.

- `policy/`: `decide()` and its parts (forecast, placement, learned capacity, drift), the
  baselines, the checked readings it takes (pure);
- `autoscaling/promql/`: what to ask Prometheus and what the answers mean (pure);
- `step/`: one autoscaler step for one service, from its design and readings (pure);
- `autoscaling/simulate/`: the trace replay through the same `decide()` (pure);
- `prometheus/`: the Prometheus client and the test-side emulators (I/O);
- `autoscaling/tracefiles/`: the simulator's trace files and plots (I/O);
- `loop/`: the live loop: read, step, write scales and status (I/O).
"""
