"""Object names and labels: deterministic, within Kubernetes' length limits.

Names are functions of the InferenceService and tier names only, so a restarted
operator (or a second replica) computes the same names and server-side apply updates
the existing objects instead of creating duplicates.
"""

from __future__ import annotations

import hashlib

from inferfleet.api import labels
from inferfleet.api.resource import WORKLOAD_NAME_MAX_CHARS

# DNS-1035 label limit for Service names; also what a pod hostname may hold.
DNS_LABEL_MAX = 63
# Workload names leave room for the suffixes controllers add to pod names
# (Deployment: -<hash>-<rand>; LeaderWorkerSet: -<group>-<index>). The API refuses
# names that would not fit, so the hash truncation below is only a safety net.
WORKLOAD_NAME_MAX = WORKLOAD_NAME_MAX_CHARS

COMPONENT_SERVER = "vllm"
COMPONENT_WORKER = "vllm-worker"
APP_NAME = "vllm"


def bounded(name: str, limit: int = DNS_LABEL_MAX) -> str:
    """`name` if it fits, else a truncated prefix plus a hash of the full name."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def workload_name(service: str, tier: str) -> str:
    """The Deployment or LeaderWorkerSet serving one tier (the autoscaler scales it)."""
    return bounded(f"{service}-{tier}", WORKLOAD_NAME_MAX)


def tier_service_name(service: str, tier: str) -> str:
    # Not `<service>-<tier>`: a LeaderWorkerSet creates a headless Service with its own
    # name, so the tier's client-facing Service needs a different one.
    return bounded(f"{service}-{tier}-api")


def service_labels(service: str) -> dict[str, str]:
    """Labels on every object of one InferenceService; the prune step selects by them."""
    return {
        labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.LABEL_NAME: APP_NAME,
        labels.LABEL_INSTANCE: service,
        labels.LABEL_SERVICE: service,
    }


def tier_labels(service: str, tier: str) -> dict[str, str]:
    return {**service_labels(service), labels.LABEL_TIER: tier}


def tier_selector(service: str, tier: str) -> dict[str, str]:
    """A workload's selector: immutable after creation, so only the two stable keys."""
    return {labels.LABEL_SERVICE: service, labels.LABEL_TIER: tier}
