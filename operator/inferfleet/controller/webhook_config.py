"""The ValidatingWebhookConfiguration: one webhook, every replica's certificate trusted.

Every replica serves the admission webhook (the chart's Service spreads the API server's
calls over them), each with the certificate it made at start (or cert-manager's, mounted
in every replica). The API server trusts a webhook's server by the webhook's
`caBundle`, which may hold several certificates, so no replica needs another's key and
the operator needs no Secret (it reads and writes none): each replica adds its own
certificate to the bundle, checks every `CHECK_INTERVAL_S` that it is still there (a
Helm upgrade, a pruning by another replica, an edit), and takes it out on a clean
shutdown (the last one out removes the webhook, so that nothing is called that no
longer answers). Every write is a PUT conditional on the resourceVersion read: of two
replicas starting together one gets 409 and merges again.

The bundle keeps unexpired certificates only, at most `MAX_CERTIFICATES`, the newest
first; a live replica whose certificate was pushed out by many restarts of the others
adds it back at its next check.

The webhook itself (`webhook`, pure): failurePolicy Ignore and a 5 s timeout. The
reconciler refuses every spec the webhook refuses (render.checks.refusals), so a call no
replica answers costs the early news, never safety, while Fail would make every create
and update of an InferenceService wait on a live operator (after a `kill -9` of the
only replica, each failed with "connection refused" until it was back).
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from inferfleet.api import labels
from inferfleet.cluster import ApiError, Cluster, Conflict, access
from inferfleet.controller.periodic import PeriodicThread
from inferfleet.kubedata import ObjectRef

logger = logging.getLogger(__name__)

CONFIGURATION: Final = access.WEBHOOK_CONFIGURATION
MAX_CERTIFICATES: Final = 16
CHECK_INTERVAL_S: Final = 30.0
TIMEOUT_S: Final = 5
FAILURE_POLICY: Final = "Ignore"
_ATTEMPTS: Final = 5
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s.*?-----END CERTIFICATE-----", re.DOTALL)
# <service>.<namespace>.svc[.cluster.local]: the chart's host, reached through its Service.
_SERVICE_HOST = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?$"
)

Clock = Callable[[], float]


# --- pure ------------------------------------------------------------------------------


def certificates(bundle: bytes) -> list[bytes]:
    """The PEM certificates in a bundle, each as its own block."""
    return [match.group(0).strip() + b"\n" for match in _PEM.finditer(bundle)]


def _validity(pem: bytes) -> tuple[float, float] | None:
    from cryptography import x509

    try:
        loaded = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None
    return loaded.not_valid_before_utc.timestamp(), loaded.not_valid_after_utc.timestamp()


def merged(
    current: Sequence[bytes], own: Sequence[bytes], now_s: float, *, withdraw: bool = False
) -> list[bytes]:
    """The bundle with `own` added (or taken out): unexpired and readable certificates
    only, no duplicates, at most MAX_CERTIFICATES, the newest first and `own` always kept."""
    mine = {pem.strip() for pem in own}
    others: dict[bytes, float] = {}
    for pem in current:
        validity = _validity(pem)
        if validity is None or validity[1] <= now_s or pem.strip() in mine:
            continue
        others.setdefault(pem.strip(), validity[0])
    newest = sorted(others, key=lambda pem: -others[pem])
    kept = [] if withdraw else [pem.strip() for pem in own]
    kept += newest[: max(0, MAX_CERTIFICATES - len(kept))]
    return [pem + b"\n" for pem in kept]


def client_config(host: str, port: int, path: str) -> dict[str, Any]:
    """Where the API server calls: the Service itself for a `<name>.<namespace>.svc` host
    (the API server resolves Services on its own, not through cluster DNS), else a URL."""
    found = _SERVICE_HOST.match(host)
    if found is not None:
        service = {"name": found.group(1), "namespace": found.group(3), "port": port, "path": path}
        return {"service": service}
    return {"url": f"https://{host}:{port}{path}"}


def webhook(name: str, config: Mapping[str, Any], bundle: Sequence[bytes]) -> dict[str, Any]:
    """The webhook entry: InferenceService creates and updates, failure policy Ignore."""
    return {
        "name": name,
        "clientConfig": {**config, "caBundle": base64.b64encode(b"".join(bundle)).decode("ascii")},
        "rules": [
            {
                "apiGroups": [labels.GROUP],
                "apiVersions": [labels.VERSION],
                "resources": [labels.PLURAL],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": FAILURE_POLICY,
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_S,
        "admissionReviewVersions": ["v1"],
    }


def bundle_of(configuration: Mapping[str, Any] | None, name: str) -> list[bytes]:
    for hook in (configuration or {}).get("webhooks") or []:
        if hook.get("name") == name:
            encoded = (hook.get("clientConfig") or {}).get("caBundle") or ""
            try:
                return certificates(base64.b64decode(encoded))
            except ValueError:
                return []
    return []


# --- I/O ---------------------------------------------------------------------------------


class Registration:
    """This replica's place in the webhook configuration (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        hook_name: str,
        config: Mapping[str, Any],
        cafile: Path,
        name: str = CONFIGURATION,
        interval_s: float = CHECK_INTERVAL_S,
        clock: Clock = time.time,
    ) -> None:
        self.cluster = cluster
        self.hook_name = hook_name
        self.config = dict(config)
        self.cafile = cafile
        self.ref = ObjectRef("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", None, name)
        self.clock = clock
        self._thread = PeriodicThread("inferfleet-webhook-config", interval_s, self._check, run_first=True)

    def own(self) -> list[bytes]:
        # Read each time: cert-manager renews the mounted file in place.
        return certificates(self.cafile.read_bytes())

    def register(self) -> bool:
        """One round: add this replica's certificate where missing. True once it is there."""
        return self._write(withdraw=False)

    def withdraw(self) -> bool:
        return self._write(withdraw=True)

    def _write(self, *, withdraw: bool) -> bool:
        own = self.own()
        for _ in range(_ATTEMPTS):
            current = self.cluster.get(self.ref)
            present = bundle_of(current, self.hook_name)
            ours = {pem.strip() for pem in own}
            there = ours <= {pem.strip() for pem in present}
            # Written only when this replica's certificate is missing (or, withdrawing,
            # still there) or the webhook says something else: never to reorder or prune
            # alone, so that replicas never take turns rewriting the bundle.
            if current is not None and there != withdraw and _same(current, self.hook_name, self.config):
                return True
            if current is None and withdraw:
                return True
            bundle = merged(present, own, self.clock(), withdraw=withdraw)
            hooks = [] if withdraw and not bundle else [webhook(self.hook_name, self.config, bundle)]
            metadata = (current or {}).get("metadata") or {}
            kept = {
                key: metadata[key] for key in ("resourceVersion", "labels", "annotations") if key in metadata
            }
            body = {
                "apiVersion": self.ref.api_version,
                "kind": self.ref.kind,
                "metadata": {**kept, "name": self.ref.name},
                "webhooks": hooks,
            }
            try:
                if current is None:
                    self.cluster.create(body)
                else:
                    self.cluster.replace(body)
            except Conflict:
                continue  # another replica wrote in between: merge with what it wrote
            logger.info(
                "webhook %s: %s this replica's certificate (%d trusted)",
                self.ref.name,
                "withdrew" if withdraw else "registered",
                len(bundle),
            )
            return True
        return False

    def _check(self) -> None:
        try:
            if not self.register():
                logger.warning("webhook %s: could not register (conflicts); retrying", self.ref.name)
        except (ApiError, OSError) as error:
            logger.warning("webhook %s: %s", self.ref.name, error)

    @property
    def running(self) -> bool:
        return self._thread.running

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._thread.stop(timeout_s)
        try:
            self.withdraw()
        except (ApiError, OSError) as error:
            logger.warning("webhook %s: could not withdraw: %s", self.ref.name, error)


def _same(current: Mapping[str, Any], name: str, config: Mapping[str, Any]) -> bool:
    """Whether the configuration holds our webhook as we would write it, its bundle aside
    (the API server fills in defaults, e.g. selectors, so only our keys are compared)."""
    hooks = current.get("webhooks") or []
    if len(hooks) != 1:
        return False
    have = hooks[0]
    want = webhook(name, config, [])
    for key, value in want.items():
        if key == "clientConfig":
            given = have.get(key) or {}
            if {k: given.get(k) for k in config} != dict(config):
                return False
        elif have.get(key) != value:
            return False
    return True


def expiry(pem: bytes) -> dt.datetime | None:
    validity = _validity(pem)
    return None if validity is None else dt.datetime.fromtimestamp(validity[1], tz=dt.UTC)
