"""Fixtures: a loopback hub, a moto S3 server, fast retry settings, a CLI runner."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferfleet.caching.fetcher.fetch import FetchOptions, RetryPolicy
from tests.integration.fetcher.hub_server import FakeRepo, HubServer, tiny_model_files

REPO_ID = "acme/tiny-llama"
FAST_RETRY = RetryPolicy(attempts=3, base_s=0.01, max_s=0.05)


def fast_options(**overrides: object) -> FetchOptions:
    values: dict[str, object] = {"retry": FAST_RETRY, "progress_interval_s": 0.0, "lock_timeout_s": 30.0}
    values.update(overrides)
    return FetchOptions(**values)  # type: ignore[arg-type]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(FakeRepo(REPO_ID)).add_commit(tiny_model_files())
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
        yield server


def revisions(dest: Path) -> list[str]:
    """Complete revision directories of a model cache, sorted."""
    root = dest / "revisions"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    # s3:// needs the cache extra; without moto the S3 tests skip instead of erroring.
    pytest.importorskip("boto3", reason="s3:// needs inferfleet[cache]")
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is a test extra")

    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> object:
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    return boto3.client("s3", endpoint_url=moto_endpoint)


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_cli(), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


def _cli() -> str:
    """The installed console script next to this interpreter (the venv's)."""
    return str(Path(sys.executable).parent / "inferfleet")
