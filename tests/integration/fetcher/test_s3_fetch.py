"""The fetcher against an S3-compatible server (moto's ThreadedMotoServer on loopback)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from inferfleet.caching.fetcher import store
from inferfleet.caching.fetcher.fetch import fetch
from inferfleet.caching.precache.fetch_errors import BadCredentials, SourceNotFound, SourceUnreachable
from tests.integration.fetcher.conftest import fast_options, free_port
from tests.integration.fetcher.hub_server import safetensors_bytes, tiny_model_files

pytestmark = pytest.mark.integration


def _upload(client: Any, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    client.create_bucket(Bucket=bucket)
    for name, data in files.items():
        client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)


def test_fresh_download_verifies_md5_etags_and_second_run_is_a_no_op(s3: Any, tmp_path: Path) -> None:
    files = tiny_model_files(seed=2)
    _upload(s3, "weights-a", "llama/v1", files)
    dest = tmp_path / "model"

    result = fetch("s3://weights-a/llama/v1", dest, fast_options())
    names = {e.path for e in result.manifest.files}
    assert "README.md" not in names and "pytorch_model.bin" not in names
    shard = next(e for e in result.manifest.files if e.path.endswith("00001-of-00002.safetensors"))
    assert shard.md5 == hashlib.md5(files[shard.path]).hexdigest() and shard.verified == ["size", "md5"]
    assert result.manifest.hf_config is not None and result.manifest.hf_config["seed"] == 2
    assert result.manifest.revision_id.startswith("main-")
    for name in names:
        assert (result.revision_dir / name).read_bytes() == files[name]

    again = fetch("s3://weights-a/llama/v1", dest, fast_options())
    assert again.reused and again.manifest.revision_id == result.manifest.revision_id


def test_new_content_under_the_same_prefix_is_a_new_revision(s3: Any, tmp_path: Path) -> None:
    files = tiny_model_files(seed=3)
    _upload(s3, "weights-b", "m", files)
    dest = tmp_path / "model"
    first = fetch("s3://weights-b/m", dest, fast_options()).manifest.revision_id
    s3.put_object(
        Bucket="weights-b", Key="m/model-00002-of-00002.safetensors", Body=safetensors_bytes(1024, 9)
    )
    second = fetch("s3://weights-b/m", dest, fast_options()).manifest.revision_id
    assert first != second
    assert sorted(p.name for p in (dest / "revisions").iterdir()) == sorted([first, second])


def test_multipart_object_is_checked_by_size(s3: Any, tmp_path: Path) -> None:
    s3.create_bucket(Bucket="weights-c")
    data = safetensors_bytes(6 * 1024 * 1024, seed=4)
    s3.put_object(Bucket="weights-c", Key="m/config.json", Body=b"{}")
    upload = s3.create_multipart_upload(
        Bucket="weights-c", Key="m/model.safetensors", ChecksumAlgorithm="SHA256"
    )
    parts = []
    for number, start in enumerate(range(0, len(data), 5 * 1024 * 1024), start=1):
        part = s3.upload_part(
            Bucket="weights-c",
            Key="m/model.safetensors",
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=data[start : start + 5 * 1024 * 1024],
        )
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    s3.complete_multipart_upload(
        Bucket="weights-c",
        Key="m/model.safetensors",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": parts},
    )
    result = fetch("s3://weights-c/m", tmp_path / "model", fast_options())
    entry = next(e for e in result.manifest.files if e.path == "model.safetensors")
    # A multipart ETag is not an MD5 and a composite checksum cannot be checked against the
    # bytes: only the size is verified (plus the safetensors structure at verify time), and
    # the bytes' own SHA-256 is recorded so verify --deep agrees with what was sealed.
    assert entry.md5 is None and entry.sha256 == hashlib.sha256(data).hexdigest()
    assert entry.verified == ["size"]
    assert (result.revision_dir / "model.safetensors").read_bytes() == data
    store.verify_revision(tmp_path / "model", result.manifest.revision_id, deep=True)


def test_resume_from_a_partial_file(s3: Any, tmp_path: Path) -> None:
    data = safetensors_bytes(3 * 1024 * 1024, seed=5)
    _upload(s3, "weights-d", "m", {"config.json": b"{}", "model.safetensors": data})
    dest = tmp_path / "model"
    # What a killed fetcher leaves: a .part holding the first third, under .partial/<revision>.
    probe = fetch("s3://weights-d/m", tmp_path / "probe", fast_options())
    revision_id = probe.manifest.revision_id
    part = dest / ".partial" / revision_id / "model.safetensors.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(data[: len(data) // 3])

    result = fetch("s3://weights-d/m", dest, fast_options())
    assert result.manifest.revision_id == revision_id
    assert result.bytes_transferred == len(data) - len(data) // 3 + 2
    assert (result.revision_dir / "model.safetensors").read_bytes() == data
    assert store.verify_revision(dest, revision_id, deep=True)


def test_credentials_from_a_mounted_secret_directory(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_endpoint: str
) -> None:
    _upload(s3, "weights-e", "m", tiny_model_files(seed=6))
    secret = tmp_path / "secret"
    secret.mkdir()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ENDPOINT_URL_S3": moto_endpoint,
    }.items():
        (secret / name).write_text(value + "\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name)
    result = fetch("s3://weights-e/m", tmp_path / "model", fast_options(credentials_dir=secret))
    assert result.manifest.hf_config is not None and result.manifest.hf_config["seed"] == 6


def test_missing_bucket_and_unreachable_endpoint(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SourceNotFound):
        fetch("s3://no-such-bucket/m", tmp_path / "a", fast_options())
    s3.create_bucket(Bucket="weights-empty")
    with pytest.raises(SourceNotFound, match="no objects"):
        fetch("s3://weights-empty/m", tmp_path / "b", fast_options())
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(SourceUnreachable):
        fetch("s3://weights-a/m", tmp_path / "c", fast_options())


@contextmanager
def iam_enforcement(moto_endpoint: str) -> Iterator[None]:
    """moto checks signatures and IAM policies inside (it accepts any key by default)."""
    import requests

    reset = f"{moto_endpoint}/moto-api/reset-auth"
    previous = requests.post(reset, data=b"0", timeout=10).json()["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"]
    try:
        yield
    finally:
        requests.post(reset, data=str(previous).encode(), timeout=10)


def _assert_nothing_looks_complete(dest: Path) -> None:
    for name in ("revisions", "refs"):
        assert not (dest / name).exists() or not list((dest / name).iterdir())
    assert not dest.exists() or not list(dest.rglob("manifest.json"))
    assert store.resolve_ref(dest, "main") is None


def test_unknown_access_key_is_bad_credentials(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_endpoint: str
) -> None:
    _upload(s3, "weights-g", "m", tiny_model_files(seed=8))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIANOTAREALKEY00000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    dest = tmp_path / "model"
    with (
        iam_enforcement(moto_endpoint),
        pytest.raises(BadCredentials, match="InvalidAccessKeyId: the credentials were refused") as raised,
    ):
        fetch("s3://weights-g/m", dest, fast_options())
    assert raised.value.termination_message().startswith("BadCredentials: s3://weights-g/m")
    assert not raised.value.retryable
    _assert_nothing_looks_complete(dest)


def test_credentials_that_can_list_but_not_read_fail_without_a_complete_cache(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_endpoint: str
) -> None:
    """A key whose policy allows ListBucket but not GetObject: the listing works, every
    download is refused; the fetch fails as BadCredentials and no revision appears."""
    import boto3

    files = tiny_model_files(seed=7)
    _upload(s3, "weights-f", "m", files)
    iam = boto3.client("iam", endpoint_url=moto_endpoint, region_name="us-east-1")
    iam.create_user(UserName="lister")
    iam.put_user_policy(
        UserName="lister",
        PolicyName="list-only",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}],
            }
        ),
    )
    key = iam.create_access_key(UserName="lister")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    dest = tmp_path / "model"

    with iam_enforcement(moto_endpoint), pytest.raises(BadCredentials, match="AccessDenied") as raised:
        fetch("s3://weights-f/m", dest, fast_options())
    # Refused at a file's download (the listing worked), and not retried: a key does not heal.
    assert re.fullmatch(
        r"s3://weights-f/m: [\w.-]+\.(json|safetensors): AccessDenied: the credentials were refused",
        raised.value.message,
    )
    _assert_nothing_looks_complete(dest)

    # Readable again (auth back off): the same directory completes normally.
    result = fetch("s3://weights-f/m", dest, fast_options())
    assert (result.revision_dir / "config.json").read_bytes() == files["config.json"]
