"""Admission webhook plumbing: the self-signed certificate, kopf's server settings, and
the configuration every replica registers its certificate in."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import kopf
import pytest
from cryptography import x509

from inferfleet import handlers
from inferfleet.cluster import Conflict, InMemoryCluster
from inferfleet.controller import certificates, webhook_config
from inferfleet.kubedata import ObjectRef


def test_self_signed_certificate_names_the_service_host(tmp_path: Path) -> None:
    cert, key = certificates.self_signed(tmp_path, ["inferfleet.inferfleet-system.svc"])
    loaded = x509.load_pem_x509_certificate(cert.read_bytes())
    names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["inferfleet.inferfleet-system.svc"]
    assert key.stat().st_mode & 0o077 == 0


def test_webhook_is_configured_only_with_a_host(tmp_path: Path) -> None:
    settings = kopf.OperatorSettings()
    handlers._configure_webhook(settings, kopf.Memo(), 9443)
    assert settings.admission.server is None
    handlers._configure_webhook(settings, kopf.Memo(webhook_host="op.ns.svc"), 9443)
    assert isinstance(settings.admission.server, kopf.WebhookServer)
    # The operator registers the webhook itself (every replica's certificate), not kopf.
    assert settings.admission.managed is None


HOOK = "plan.validate.inferfleet.dev"
REF = ObjectRef(
    "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", None, "validate.inferfleet.dev"
)
CONFIG = webhook_config.client_config("inferfleet-webhook.inferfleet-system.svc", 9443, "/plan")


def replica(cluster: Any, tmp_path: Path, name: str) -> webhook_config.Registration:
    cert, _ = certificates.self_signed(tmp_path / name, ["inferfleet-webhook.inferfleet-system.svc"])
    return webhook_config.Registration(cluster, hook_name=HOOK, config=CONFIG, cafile=cert)


def trusted(cluster: InMemoryCluster) -> list[bytes]:
    return webhook_config.bundle_of(cluster.get(REF), HOOK)


def test_every_replica_is_trusted_and_the_webhook_ignores_failures(tmp_path: Path) -> None:
    cluster = InMemoryCluster()
    a, b = replica(cluster, tmp_path, "a"), replica(cluster, tmp_path, "b")
    assert a.register() and b.register()
    assert sorted(trusted(cluster)) == sorted([*a.own(), *b.own()])
    (hook,) = cluster.get(REF)["webhooks"]  # type: ignore[index]
    assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] == 5
    assert hook["clientConfig"]["service"] == {
        "name": "inferfleet-webhook",
        "namespace": "inferfleet-system",
        "port": 9443,
        "path": "/plan",
    }
    # Settled: a check writes nothing (replicas never take turns rewriting the bundle).
    version = cluster.get(REF)["metadata"]["resourceVersion"]  # type: ignore[index]
    assert a.register() and b.register()
    assert cluster.get(REF)["metadata"]["resourceVersion"] == version  # type: ignore[index]
    # One shuts down: the other stays trusted; the last one out removes the webhook.
    a.withdraw()
    assert trusted(cluster) == b.own()
    b.withdraw()
    assert cluster.get(REF)["webhooks"] == []  # type: ignore[index]


def test_a_replica_racing_another_merges_instead_of_overwriting(tmp_path: Path) -> None:
    cluster = InMemoryCluster()
    a, b = replica(cluster, tmp_path, "a"), replica(cluster, tmp_path, "b")
    assert a.register()
    real_replace = cluster.replace
    raced = []

    def replace_after_b(obj: Any) -> Any:
        if not raced:  # b writes between a's read and a's write
            raced.append(True)
            assert b.register()
        return real_replace(obj)

    a_again = replica(cluster, tmp_path, "a2")
    cluster.replace = replace_after_b  # type: ignore[method-assign]
    assert a_again.register()
    assert sorted(trusted(cluster)) == sorted([*a.own(), *b.own(), *a_again.own()])


def test_a_replica_adds_itself_back_after_an_upgrade_emptied_the_webhooks(tmp_path: Path) -> None:
    cluster = InMemoryCluster()
    a = replica(cluster, tmp_path, "a")
    assert a.register()
    current = cluster.get(REF)
    assert current is not None
    cluster.replace({**current, "webhooks": []})
    assert a.register() and trusted(cluster) == a.own()


def test_the_bundle_drops_expired_and_keeps_the_newest() -> None:
    now = 2_000_000_000.0
    pems = [_pem(now - 1000 * i, now + 3600) for i in range(webhook_config.MAX_CERTIFICATES + 4)]
    expired = _pem(now - 7200, now - 1)
    own = _pem(now - 10**6, now + 3600)  # the oldest, but ours
    bundle = webhook_config.merged([*pems, expired, b"garbage"], [own], now)
    assert len(bundle) == webhook_config.MAX_CERTIFICATES and bundle[0].strip() == own.strip()
    assert expired.strip() not in {pem.strip() for pem in bundle}
    assert {pem.strip() for pem in bundle[1:]} == {
        pem.strip() for pem in pems[: webhook_config.MAX_CERTIFICATES - 1]
    }


def test_a_url_host_is_called_by_url() -> None:
    assert webhook_config.client_config("127.0.0.1", 9443, "/plan") == {"url": "https://127.0.0.1:9443/plan"}
    encoded = base64.b64encode(b"x").decode()
    assert (
        webhook_config.bundle_of({"webhooks": [{"name": HOOK, "clientConfig": {"caBundle": encoded}}]}, HOOK)
        == []
    )


def _pem(not_before_s: float, not_after_s: float) -> bytes:
    import datetime as dt

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(dt.datetime.fromtimestamp(not_before_s, dt.UTC))
        .not_valid_after(dt.datetime.fromtimestamp(not_after_s, dt.UTC))
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


def test_conflicts_are_retried_then_given_up(tmp_path: Path) -> None:
    cluster = InMemoryCluster()
    a = replica(cluster, tmp_path, "a")
    assert a.register()

    def always_conflict(obj: Any) -> Any:
        raise Conflict("modified", 409)

    b = replica(cluster, tmp_path, "b")
    cluster.replace = always_conflict  # type: ignore[method-assign]
    assert b.register() is False


@pytest.mark.parametrize("host", ["a.b.svc", "a.b.svc.cluster.local"])
def test_a_service_host_is_called_through_its_service(host: str) -> None:
    assert webhook_config.client_config(host, 443, "/plan") == {
        "service": {"name": "a", "namespace": "b", "port": 443, "path": "/plan"}
    }
