"""`inferfleet cache probe` against loopback sources a hostile tenant would name.

The real command, as its pod runs it, against a loopback hub, S3 and GCS, and against
servers that trickle (1 byte every 5 s), answer with 300 MB (an error body or not) or
list forever: each ends within its deadline with a reason of its own, in a result that
fits a termination message, with the probe's memory bounded. Credentials are only the
ones given: the environment's own (HF_TOKEN, AWS_* keys and session token) never reach
a tenant's server, and a gs:// source is read with the key the Secret holds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inferfleet.caching.precache import probe
from tests.integration.fetcher.conftest import _cli
from tests.integration.fetcher.gcs_server import GcsServer
from tests.integration.fetcher.hub_server import FakeRepo, HubServer
from tests.toolkit.model_sources import (
    UNCATALOGUED_MODEL,
    UNCATALOGUED_PARAMETERS,
    HostileServer,
    HostileState,
    uncatalogued_model_files,
)

pytestmark = pytest.mark.integration

# What the probe may take: a Python process with the three clients imported is ~100 MiB.
PROBE_RSS_LIMIT_MIB = 200
# The probe's own account of its run ("(4.0 s, result 171 bytes, peak RSS 98.1 MiB)"):
# its time without the interpreter's start, its peak RSS since exec (VmHWM).
_SECONDS = re.compile(r"\(([\d.]+) s, result (\d+) bytes, peak RSS ([\d.]+) MiB\)")


@dataclass
class Probe:
    code: int
    result: dict[str, Any]
    termination_log: str
    stderr: str
    seconds: float  # the probe's own time, from its log
    wall_s: float
    peak_rss_mib: float


def run_probe(*args: str, env: dict[str, str] | None = None, timeout_s: float = 60) -> Probe:
    """The probe as a child process, with its own account of its time and memory."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "termination-log"
        out, err = Path(scratch) / "out", Path(scratch) / "err"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HF_", "GOOGLE_"))}
        base.update({"HF_HOME": scratch, "HF_HUB_DISABLE_TELEMETRY": "1"})
        started = time.monotonic()
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                [_cli(), "cache", "probe", "--termination-log", str(log), *args],
                stdout=stdout,
                stderr=stderr,
                env={**base, **(env or {})},
            )
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        wall_s = time.monotonic() - started
        text = err.read_text()
        found = _SECONDS.search(text)
        assert found is not None, text
        printed = out.read_text().strip()
        written = log.read_text()
        assert printed == written and len(written.encode()) <= probe.TERMINATION_MESSAGE_BYTES
        return Probe(
            code=process.returncode,
            result=json.loads(written),
            termination_log=written,
            stderr=text,
            seconds=float(found.group(1)),
            wall_s=wall_s,
            peak_rss_mib=float(found.group(3)),
        )


@pytest.fixture
def private_hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(FakeRepo(UNCATALOGUED_MODEL, token="hf_tenant")).add_commit(
            uncatalogued_model_files()
        )
        yield server


def test_a_private_hub_model_is_read_with_the_token_file_only(private_hub: HubServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("hf_tenant\n")
    env = {"HF_ENDPOINT": private_hub.endpoint, "HF_TOKEN": "hf_operator"}
    done = run_probe("--source", f"hf://{UNCATALOGUED_MODEL}", "--token-file", str(token), env=env)
    assert done.code == 0, done.stderr
    result = done.result
    assert result["ok"] is True and result["config"]["num_experts"] == 128
    assert result["parametersBillion"] == pytest.approx(UNCATALOGUED_PARAMETERS / 1e9, rel=1e-5)
    assert re.fullmatch(r"[0-9a-f]{40}", result["revision"])
    assert "architectures" not in result["config"]  # only what the planner reads
    # Without the Secret's token file the environment's own token is not used either.
    private_hub.state.seen.clear()
    refused = run_probe("--source", f"hf://{UNCATALOGUED_MODEL}", env=env)
    assert refused.code == 1 and refused.result["reason"] in ("BadCredentials", "SourceNotFound")
    assert all("hf_operator" not in str(headers) for _, _, headers in private_hub.state.seen)


@pytest.mark.parametrize("scheme", ["hf", "s3", "gs"])
def test_a_slow_source_ends_at_the_deadline_with_a_clean_reason(scheme: str, tmp_path: Path) -> None:
    with HostileServer(HostileState("slow", interval_s=5.0)) as server:
        args, env = _aimed_at(scheme, server.endpoint, tmp_path)
        done = run_probe(*args, "--deadline-s", "4", env=env, timeout_s=30)
    assert done.code == 1
    assert done.result["reason"] == "DeadlineExceeded", done.result
    assert "deadline of 4 s" in done.result["message"]
    # The probe's own time: the deadline, plus the moment its worker takes to stop.
    assert 4.0 <= done.seconds <= 5.0, done.stderr
    assert server.state.requests >= 1


@pytest.mark.parametrize(("scheme", "status"), [("hf", 500), ("hf", 200), ("s3", 500), ("gs", 500)])
def test_a_300_mb_answer_is_refused_with_the_probes_memory_bounded(
    scheme: str, status: int, tmp_path: Path
) -> None:
    state = HostileState("huge", size_bytes=300 * 1024 * 1024, status=status)
    with HostileServer(state) as server:
        args, env = _aimed_at(scheme, server.endpoint, tmp_path)
        done = run_probe(*args, env=env, timeout_s=60)
    assert done.code == 1
    assert done.result["reason"] == "ResponseTooLarge", done.result
    assert done.peak_rss_mib < PROBE_RSS_LIMIT_MIB, done.peak_rss_mib
    # It stopped reading: far less than the body crossed the socket.
    assert state.bytes_sent < 100 * 1024 * 1024


def test_an_endless_s3_listing_is_capped(tmp_path: Path) -> None:
    state = HostileState("endless-s3", page_keys=1000)
    with HostileServer(state) as server:
        args, env = _aimed_at("s3", server.endpoint, tmp_path)
        done = run_probe(*args, "--max-pages", "20", env=env)
    assert done.code == 1
    assert done.result["reason"] == "ListingTooLong", done.result
    assert state.pages <= 21
    assert done.peak_rss_mib < PROBE_RSS_LIMIT_MIB


def test_a_listing_past_the_file_cap_is_refused_before_the_page_cap(tmp_path: Path) -> None:
    # The probe's own caps: 1,000 keys a page cross 20,000 files on page 21, long before
    # the 100-page cap, so only the file cap can stop it there.
    assert probe.MAX_LISTING_FILES == 20_000 and probe.MAX_LISTING_PAGES == 100
    state = HostileState("endless-s3", page_keys=1000)
    with HostileServer(state) as server:
        args, env = _aimed_at("s3", server.endpoint, tmp_path)
        done = run_probe(*args, env=env)
    assert done.code == 1
    assert done.result["reason"] == "ListingTooLong", done.result
    message = done.result["message"]
    assert "more than 20000 files" in message and "pages" not in message, message
    assert len(message) < 200, message
    assert state.pages == 21
    assert done.peak_rss_mib < PROBE_RSS_LIMIT_MIB


def test_s3_with_only_an_endpoint_in_the_secret_never_signs_with_the_environments_keys(
    tmp_path: Path,
) -> None:
    state = HostileState("endless-s3", page_keys=10)
    with HostileServer(state) as server:
        args, env = _aimed_at("s3", server.endpoint, tmp_path, keys=False)
        env |= {
            "AWS_ACCESS_KEY_ID": "AKIAOPERATOR",
            "AWS_SECRET_ACCESS_KEY": "operator-secret",
            "AWS_SESSION_TOKEN": "operator-session",
        }
        run_probe(*args, "--max-pages", "2", env=env)
        assert state.requests >= 1
        seen = json.dumps(state.headers)
        assert "AKIAOPERATOR" not in seen and "operator-session" not in seen
        assert all(not header for header in state.authorizations)  # anonymous
        # With the tenant's keys in the Secret, its requests are signed with those.
        state.headers.clear()
        state.authorizations.clear()
        args, tenant_env = _aimed_at("s3", server.endpoint, tmp_path / "keys", keys=True)
        run_probe(*args, "--max-pages", "2", env={**env, **tenant_env})
    assert state.authorizations and all("AKIATENANT/" in header for header in state.authorizations)


def test_gs_is_read_with_the_key_it_is_given_and_nothing_else(tmp_path: Path) -> None:
    with GcsServer() as gcs:
        for name, data in uncatalogued_model_files().items():
            gcs.state.put("team-a-weights", f"moe/{name}", data)
        gcs.state.readers["team-a-weights"] = "reader@team-a.iam.gserviceaccount.com"
        env = {"STORAGE_EMULATOR_HOST": gcs.endpoint}
        source = ("--source", "gs://team-a-weights/moe")
        own = _service_account_key(tmp_path / "a.json", "reader@team-a.iam.gserviceaccount.com", gcs.endpoint)
        done = run_probe(*source, env={**env, "GOOGLE_APPLICATION_CREDENTIALS": str(own)})
        assert done.code == 0, done.result
        assert done.result["config"]["num_experts"] == 128
        assert set(gcs.state.authorizations) == {"Bearer token-for-reader@team-a.iam.gserviceaccount.com"}
        other = _service_account_key(
            tmp_path / "b.json", "reader@team-b.iam.gserviceaccount.com", gcs.endpoint
        )
        refused = run_probe(*source, env={**env, "GOOGLE_APPLICATION_CREDENTIALS": str(other)})
        assert (refused.code, refused.result["reason"]) == (1, "BadCredentials")
        gcs.state.authorizations.clear()
        anonymous = run_probe(*source, env=env)
        assert (anonymous.code, anonymous.result["reason"]) == (1, "BadCredentials")
        assert gcs.state.authorizations and set(gcs.state.authorizations) == {""}


# --- helpers ---------------------------------------------------------------------------


def _aimed_at(
    scheme: str, endpoint: str, scratch: Path, *, keys: bool = True
) -> tuple[list[str], dict[str, str]]:
    """Probe arguments and environment that send a `scheme` source to `endpoint`, with
    credentials as the probe pod gets them from a Secret."""
    if scheme == "hf":
        return ["--source", "hf://acme/victim"], {"HF_ENDPOINT": endpoint}
    if scheme == "gs":
        return ["--source", "gs://weights/m"], {"STORAGE_EMULATOR_HOST": endpoint}
    secret = scratch / "s3-secret"
    secret.mkdir(parents=True, exist_ok=True)
    (secret / "AWS_ENDPOINT_URL_S3").write_text(endpoint)
    (secret / "AWS_REGION").write_text("us-east-1")
    if keys:
        (secret / "AWS_ACCESS_KEY_ID").write_text("AKIATENANT")
        (secret / "AWS_SECRET_ACCESS_KEY").write_text("tenant-secret")
    return ["--source", "s3://weights/m", "--credentials-dir", str(secret)], {}


def _service_account_key(path: Path, email: str, endpoint: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "team",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": email,
                "client_id": "1",
                "token_uri": f"{endpoint}/token",
            }
        )
    )
    return path
