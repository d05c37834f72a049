from __future__ import annotations

from inferfleet.autoscaling.promql.backoff import Backoff


def test_doubles_until_cap_and_resets() -> None:
    backoff = Backoff(base_s=5, max_s=30)
    assert backoff.ready(0.0)
    delays = []
    for _ in range(5):
        backoff.failed(100.0)
        delays.append(backoff.next_attempt_s - 100.0)
    assert delays == [5, 10, 20, 30, 30]
    assert not backoff.ready(129.0)
    assert backoff.ready(130.0)
    backoff.succeeded()
    assert backoff.ready(0.0) and backoff.failures == 0
