"""The real adapter's requests and its reading of answers, over a scripted transport.

The answers are those a v1.34 API server gave (the e2e tier runs the same requests on a
real one, tests/e2e/test_tenancy_objects.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from inferfleet.api import labels
from inferfleet.cluster import AlreadyExists, Conflict, KubernetesCluster, Replaced
from inferfleet.kubedata import ObjectRef

ROLE = ObjectRef("rbac.authorization.k8s.io/v1", "Role", "team", "chat-epp")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class _Response:
    status: int
    data: bytes

    def read(self) -> None:
        return None


@dataclass
class ScriptedClient:
    """Answers each request with the next scripted (status, body)."""

    answers: list[tuple[int, dict[str, Any]]]
    requests: list[Request] = field(default_factory=list)

    def param_serialize(self, **kwargs: Any) -> tuple[Any, ...]:
        return (kwargs["method"], kwargs["resource_path"], dict(kwargs["query_params"]), kwargs["body"])

    def call_api(self, method: str, path: str, query: dict[str, str], body: Any, **_: Any) -> _Response:
        self.requests.append(Request(method, path, query, json.loads(json.dumps(body))))
        status, answer = self.answers.pop(0)
        if status >= 300:
            error = ApiException(status=status, reason="scripted")
            error.body = json.dumps(answer)
            raise error
        return _Response(status, json.dumps(answer).encode())


def cluster_answering(*answers: tuple[int, dict[str, Any]]) -> tuple[KubernetesCluster, ScriptedClient]:
    client = ScriptedClient(list(answers))
    return KubernetesCluster(client), client


def role(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": ROLE.api_version,
        "kind": "Role",
        "metadata": {"name": ROLE.name, "namespace": ROLE.namespace, **metadata},
        "rules": [],
    }


def test_a_create_that_finds_an_object_is_already_exists() -> None:
    cluster, client = cluster_answering(
        (
            409,
            {
                "reason": "AlreadyExists",
                "message": 'roles "chat-epp" already exists',
                "details": {"name": "x"},
            },
        )
    )
    with pytest.raises(AlreadyExists):
        cluster.create(role())
    (request,) = client.requests
    assert (request.method, request.path) == (
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
    )


def test_an_apply_with_another_object_s_uid_is_replaced() -> None:
    cause = {"reason": "FieldValueInvalid", "field": "metadata.uid", "message": "field is immutable"}
    cluster, _ = cluster_answering(
        (422, {"reason": "Invalid", "message": "x", "details": {"causes": [cause]}})
    )
    with pytest.raises(Replaced):
        cluster.apply(role(uid="old"))


def test_a_delete_with_a_uid_sends_the_precondition_and_reads_409_as_replaced() -> None:
    cluster, client = cluster_answering(
        (409, {"reason": "Conflict", "message": "the UID in the precondition"})
    )
    with pytest.raises(Replaced):
        cluster.delete(ROLE, uid="old")
    assert client.requests[0].body["preconditions"] == {"uid": "old"}


def test_claiming_moves_the_update_entry_to_apply_and_rereads_on_a_conflict() -> None:
    ours = {"manager": labels.FIELD_MANAGER, "operation": "Update", "apiVersion": "v1", "time": "t"}
    theirs = {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1"}
    entries = [
        ours | {"fieldsType": "FieldsV1", "fieldsV1": {"f:rules": {}}},
        theirs | {"subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
    ]
    stored = role(uid="u1", resourceVersion="5", managedFields=entries)
    moved = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "6"}}
    cluster, client = cluster_answering(
        (200, stored), (409, {"reason": "Conflict", "message": "modified"}), (200, moved), (200, moved)
    )
    cluster.claim_fields(ROLE, uid="u1")
    patches = [r for r in client.requests if r.method == "PATCH"]
    assert [p.body["metadata"]["resourceVersion"] for p in patches] == ["5", "6"]
    claimed = patches[-1].body["metadata"]["managedFields"]
    assert claimed[0]["manager"] == "kube-controller-manager"  # others' entries as they were
    assert claimed[1] | {"fieldsV1": None} == {
        "manager": labels.FIELD_MANAGER,
        "operation": "Apply",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": None,
    }
    assert claimed[1]["fieldsV1"] == {"f:rules": {}}


def test_a_claim_of_a_replaced_object_writes_nothing() -> None:
    cluster, client = cluster_answering((200, role(uid="theirs", resourceVersion="1")))
    with pytest.raises(Conflict):
        cluster.claim_fields(ROLE, uid="ours")
    assert [r.method for r in client.requests] == ["GET"]


def test_status_and_events_leave_the_adapter_escaped_and_bounded() -> None:
    cluster, client = cluster_answering((200, {}), (201, {}))
    ref = ObjectRef(labels.API_VERSION, labels.KIND, "team", "chat")
    cluster.patch_status(ref, {"conditions": [{"type": "Degraded", "message": "a\u202eb\n" + "x" * 100_000}]})
    cluster.create_event(
        {
            "apiVersion": labels.API_VERSION,
            "kind": labels.KIND,
            "metadata": {"name": "chat", "namespace": "team"},
        },
        type_="Warning",
        reason="Bad\nReason",
        message="\u2066evil\u2069\n" * 1000,
    )
    message = client.requests[0].body["status"]["conditions"][0]["message"]
    assert message.startswith("a\\u202eb\\nx") and len(message) <= 8192
    event = client.requests[1].body
    assert event["reason"] == "Bad\\nReason"
    assert event["message"].startswith("\\u2066evil\\u2069\\n") and len(event["message"]) <= 1024


def test_a_claim_after_a_create_reads_the_create_s_answer_not_the_server() -> None:
    entry = {"manager": labels.FIELD_MANAGER, "operation": "Update", "fieldsV1": {"f:rules": {}}}
    created = role(uid="u1", resourceVersion="3", managedFields=[entry])
    cluster, client = cluster_answering((200, created))
    cluster.claim_fields(ROLE, uid="u1", current=created)
    assert [(r.method, r.body["metadata"]["resourceVersion"]) for r in client.requests] == [("PATCH", "3")]
