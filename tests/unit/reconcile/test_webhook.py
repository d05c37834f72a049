"""Admission webhook plumbing: the self-signed certificate and kopf's server settings."""

from __future__ import annotations

from pathlib import Path

import kopf
from cryptography import x509

from inferfleet import handlers
from inferfleet.controller import certificates


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
    assert settings.admission.managed == "validate.inferfleet.dev"
