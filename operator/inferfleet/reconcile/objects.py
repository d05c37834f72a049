"""Moved to `inferfleet.kubedata`; shim kept until phase 2 (issue 19), for the
autoscaler's imports, which this phase leaves untouched. New code imports kubedata."""

from inferfleet.kubedata import (
    DEPLOYMENT,
    LEADER_WORKER_SET,
    WORKLOAD_KINDS,
    ObjectRef,
    labels_of,
    matches,
    owner_uids,
    ready_replicas_of,
    ref_of,
    replicas_of,
)

__all__ = [
    "DEPLOYMENT",
    "LEADER_WORKER_SET",
    "WORKLOAD_KINDS",
    "ObjectRef",
    "labels_of",
    "matches",
    "owner_uids",
    "ready_replicas_of",
    "ref_of",
    "replicas_of",
]
