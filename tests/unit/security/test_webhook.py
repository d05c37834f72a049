"""The admission webhook: only its own path and content type, bounded bodies, field paths always."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from inferfleet import handlers, planner
from inferfleet.config import OperatorSettings
from inferfleet.controller import admission
from inferfleet.controller.webhook_server import MAX_BODY_BYTES, AdmissionServer
from tests.unit.api.samples import base_spec, document

REVIEW_UID = "0d1b2c3d"


def review_of(obj: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": REVIEW_UID, "operation": "CREATE", "object": obj, "userInfo": {}},
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Call = Callable[[aiohttp.ClientSession, str], Awaitable[tuple[int, Any]]]


def serve_and(calls: list[Call], fn: Callable[..., Awaitable[Any]]) -> list[tuple[int, Any]]:
    """Start the server over plain HTTP on loopback, run the calls, stop it."""

    async def main() -> list[tuple[int, Any]]:
        server = AdmissionServer(
            handler_ids=handlers.WEBHOOK_IDS, addr="127.0.0.1", port=free_port(), insecure=True
        )
        configs = server(fn)
        config = await configs.__anext__()
        url = str(config["url"]).rstrip("/")
        try:
            async with aiohttp.ClientSession() as session:
                return [await call(session, url) for call in calls]
        finally:
            await configs.aclose()

    return asyncio.run(main())


def post(path: str, body: bytes, content_type: str = "application/json") -> Call:
    async def call(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
        headers = {"Content-Type": content_type}
        async with session.post(url + path, data=io.BytesIO(body), headers=headers) as response:
            text = await response.text()
            return response.status, text

    return call


async def echo(data: Any, **_: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": data["request"]["uid"], "allowed": True},
    }


async def kopf_like(data: Any, **_: Any) -> dict[str, Any]:
    # kopf reads this first, and raises KeyError when it is absent.
    data["request"]["resource"]["group"]
    return await echo(data)


def test_only_our_path_and_json_are_answered() -> None:
    good = json.dumps(review_of(document(base_spec()))).encode()
    results = serve_and(
        [post("/plan", good), post("/other", good), post("/", good), post("/plan", good, "text/plain")], echo
    )
    assert [status for status, _ in results] == [200, 404, 404, 415]
    assert json.loads(results[0][1])["response"]["uid"] == REVIEW_UID


def test_large_objects_are_reviewed_and_huge_bodies_refused_before_reading() -> None:
    spec = base_spec()
    spec["tiers"][0]["affinity"] = {"note": "x" * (1400 * 1024)}  # an UPDATE carries two of these
    large = review_of(document(spec))
    large["request"]["oldObject"] = document(spec)
    large_body = json.dumps(large).encode()
    assert 2.5 * 1024 * 1024 < len(large_body) < MAX_BODY_BYTES
    huge = b'{"pad": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    results = serve_and([post("/plan", large_body), post("/plan", huge)], echo)
    assert [status for status, _ in results] == [200, 413]


def test_malformed_bodies_are_400_not_500() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    results = serve_and(
        [
            post("/plan", b"not json"),
            post("/plan", deep),
            post("/plan", b"[1, 2]"),
            post("/plan", json.dumps(review_of({})).encode()),  # no request.resource: kopf raises
        ],
        kopf_like,
    )
    assert [status for status, _ in results] == [400, 400, 400, 400]


HOSTILE_BODIES: list[Any] = [
    [],
    "a string",
    {"metadata": "x"},
    {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "a"},
        "spec": 5,
    },
    document({**base_spec(), "tiers": "not a list"}),
    document(
        {**base_spec(), "model": {"name": "x", "config": {"hidden_size": 1e308}, "parametersBillion": 8}}
    ),
    document({**base_spec(), "model": {"name": "x", "source": "pvc://claim/../../etc"}}),
]


@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=range(len(HOSTILE_BODIES)))
def test_every_denial_names_a_field_and_nothing_raises(body: Any) -> None:
    verdict = admission.review(body, OperatorSettings())
    assert verdict.rejection is not None
    first = verdict.rejection.split(";")[0]
    assert first.startswith(("(object):", "spec", "kind", "apiVersion", "metadata")), verdict.rejection
    assert "Traceback" not in verdict.rejection


def test_a_planner_crash_is_a_denial_with_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise OverflowError("math range error")

    monkeypatch.setattr(planner, "plan_tier", broken)
    verdict = admission.review(document(base_spec()), OperatorSettings())
    assert verdict.rejection is not None and verdict.rejection.startswith("spec: the planner failed")
    assert "OverflowError" in verdict.rejection


def test_a_refusal_for_infeasible_tiers_names_each_by_path() -> None:
    spec = base_spec()
    for tier in spec["tiers"]:
        tier["gpu"] = {"name": "tiny", "memoryGiB": 2}
        tier["gpusPerNode"] = 1
    verdict = admission.review(document(spec), OperatorSettings())
    assert verdict.rejection is not None
    assert "spec.tiers[0] (l4): " in verdict.rejection and "spec.tiers[1] (a100): " in verdict.rejection
