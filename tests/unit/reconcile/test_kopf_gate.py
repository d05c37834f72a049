"""The leader gate reaches into kopf: the real `kopf.spawn_tasks` must hand our wrapper
its pause toggles, and the gate must follow the elector both ways. A kopf upgrade that
moves the orchestrator fails here, not in a cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from inferfleet.controller import kopf_gate


def test_kopf_hands_the_gate_its_pause_toggles_and_the_gate_follows_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kopf._core.reactor import orchestration

    monkeypatch.setattr(orchestration, "orchestrator", orchestration.orchestrator)
    leading = [False]
    seen: list[Any] = []
    real_follow = kopf_gate.follow

    async def spy(toggle: Any, is_leader: Any, poll_s: float = kopf_gate.POLL_S) -> None:
        seen.append(toggle)
        await real_follow(toggle, is_leader, 0.01)

    monkeypatch.setattr(kopf_gate, "follow", spy)
    kopf_gate.install(lambda: leading[0])

    async def scenario() -> list[bool]:
        stop = asyncio.Event()
        registry = kopf.OperatorRegistry()

        # No API server here: kopf's calls wait for credentials that never come.
        @kopf.on.login(registry=registry)
        async def never(**_: Any) -> None:
            await asyncio.Event().wait()

        tasks = await kopf.spawn_tasks(
            registry=registry,
            settings=kopf.OperatorSettings(),
            clusterwide=True,
            standalone=True,
            stop_flag=stop,
        )
        states = []
        try:
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.01)
            assert seen, "kopf never started the gated orchestrator"
            (toggle,) = seen
            assert toggle.name == kopf_gate.PAUSE_REASON
            states.append(toggle.is_on())
            leading[0] = True
            await asyncio.sleep(0.1)
            states.append(toggle.is_on())
            leading[0] = False
            await asyncio.sleep(0.1)
            states.append(toggle.is_on())
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return states

    # Paused as a standby, running as the leader, paused again once the Lease is lost.
    assert asyncio.run(scenario()) == [True, False, True]


def test_a_failing_question_pauses() -> None:
    from kopf._cogs.aiokits import aiotoggles

    def broken() -> bool:
        raise RuntimeError("no elector")

    async def scenario() -> bool:
        toggles = aiotoggles.ToggleSet(any)
        toggle = await toggles.make_toggle(False, name="x")
        task = asyncio.create_task(kopf_gate.follow(toggle, broken, 0.01))
        await asyncio.sleep(0.05)
        task.cancel()
        return toggles.is_on()

    assert asyncio.run(scenario()) is True


def test_installing_twice_wraps_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from kopf._core.reactor import orchestration

    original = orchestration.orchestrator
    monkeypatch.setattr(orchestration, "orchestrator", original)
    kopf_gate.install(lambda: True)
    kopf_gate.install(lambda: True)
    assert orchestration.orchestrator.__wrapped_orchestrator__ is original  # type: ignore[attr-defined]
