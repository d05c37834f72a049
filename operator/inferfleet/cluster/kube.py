"""The real adapter: REST calls through the `kubernetes` client's ApiClient.

Generic over kinds (the paths come from `access.PERMISSIONS`), so a LeaderWorkerSet or
a PodMonitor needs no generated client; bodies and answers are plain JSON dicts.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from typing import Any

from inferfleet.api import labels, safe_text
from inferfleet.cluster import access
from inferfleet.cluster.access import Operation, Resource
from inferfleet.cluster.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    KindNotServed,
    NotFound,
    Replaced,
    TransientApiError,
    from_status,
)
from inferfleet.cluster.port import SCALE_FIELD_MANAGER, EventType
from inferfleet.kubedata import KUBE_TIME_FORMAT, ObjectRef, claimed_managed_fields, ref_of

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"

# Seconds a single API call may take before it counts as a transient failure.
REQUEST_TIMEOUT_S = 30.0
# Reads and retries of a claim whose object moved on in between (the Deployment
# controller writes status right after a create).
CLAIM_ATTEMPTS = 5


def _path(resource: Resource, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    root = "/api/v1" if resource.group == "" else f"/apis/{resource.api_version}"
    scope = f"/namespaces/{namespace}" if resource.namespaced and namespace else ""
    tail = f"/{name}" if name else ""
    return f"{root}{scope}/{resource.plural}{tail}{sub}"


class KubernetesCluster:
    """The port on a live API server."""

    def __init__(self, api_client: Any) -> None:
        self._client = api_client

    @classmethod
    def from_environment(cls) -> KubernetesCluster:
        """In-cluster service account if present, else the local kubeconfig."""
        from kubernetes import client, config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        return cls(client.ApiClient())

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        kind: str = "",
    ) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        params = self._client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": JSON},
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._client.call_api(*params, _request_timeout=REQUEST_TIMEOUT_S)
            response.read()
            status, data = response.status, response.data
        except ApiException as error:
            status, data = error.status, (error.body or "").encode()
        except (HTTPError, OSError) as error:
            raise TransientApiError(f"{method} {path}: {error}") from error
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        if 200 <= status < 300:
            return json.loads(text) if text else {}
        raise self._error(status, text, method, path, kind)

    @staticmethod
    def _error(status: int, text: str, method: str, path: str, kind: str) -> ApiError:
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {}
        message = f"{method} {path}: {answer.get('message') or text or status}"
        details = answer.get("details") or {}
        # A 404 without details naming an object means the kind itself is not served.
        if status == 404 and not details.get("name"):
            return KindNotServed(f"{kind or path} is not served by the API server: {message}", status)
        if status == 409 and answer.get("reason") == "AlreadyExists":
            return AlreadyExists(message, status)
        # An apply carrying another object's uid: "metadata.uid: ... field is immutable".
        if status == 422 and any(c.get("field") == "metadata.uid" for c in details.get("causes") or []):
            return Replaced(message, status)
        return from_status(status, message)

    # --- the port ----------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        ref = ref_of(obj)
        resource = access.check(ref.api_version, ref.kind, Operation.APPLY)
        query = {"fieldManager": labels.FIELD_MANAGER, "force": "true" if force else "false"}
        path = _path(resource, ref.namespace, ref.name)
        return self._call("PATCH", path, query=query, body=dict(obj), content_type=APPLY_PATCH, kind=ref.kind)

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        resource = access.check(ref.api_version, ref.kind, Operation.GET)
        try:
            return self._call("GET", _path(resource, ref.namespace, ref.name), kind=ref.kind)
        except NotFound:
            return None

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        ref = ref_of(obj)
        resource = access.check(ref.api_version, ref.kind, Operation.CREATE)
        query = {"fieldManager": labels.FIELD_MANAGER}
        return self._call("POST", _path(resource, ref.namespace), query=query, body=dict(obj), kind=ref.kind)

    def claim_fields(
        self, ref: ObjectRef, *, uid: str, current: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        resource = access.check(ref.api_version, ref.kind, Operation.APPLY)
        path = _path(resource, ref.namespace, ref.name)
        read: Mapping[str, Any] | None = current  # the create's answer saves the first read
        for _ in range(CLAIM_ATTEMPTS):
            current = read if read is not None else self.get(ref)
            read = None
            if current is None:
                raise NotFound(f"{ref} is gone", 404)
            metadata = current["metadata"]
            if metadata.get("uid") != uid:
                raise Replaced(f"{ref} is another object now (uid {metadata.get('uid')}, not {uid})", 409)
            claimed = claimed_managed_fields(metadata.get("managedFields") or [], labels.FIELD_MANAGER)
            if claimed is None:
                return dict(current)
            # managedFields set in a patch are taken as given (only this manager's entries
            # change); the resourceVersion keeps a concurrent writer's entry from being lost.
            body = {"metadata": {"resourceVersion": metadata["resourceVersion"], "managedFields": claimed}}
            try:
                return self._call(
                    "PATCH",
                    path,
                    query={"fieldManager": labels.FIELD_MANAGER},
                    body=body,
                    content_type=MERGE_PATCH,
                    kind=ref.kind,
                )
            except Conflict:
                continue  # moved on since the read: read again
        raise Conflict(f"{ref}: its managedFields kept changing; claiming them again next pass", 409)

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        ref = ref_of(obj)
        resource = access.check(ref.api_version, ref.kind, Operation.UPDATE)
        query = {"fieldManager": labels.FIELD_MANAGER}
        path = _path(resource, ref.namespace, ref.name)
        return self._call("PUT", path, query=query, body=dict(obj), kind=ref.kind)

    def list(
        self, api_version: str, kind: str, namespace: str | None, selector: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        resource = access.check(api_version, kind, Operation.LIST)
        query = {"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))}
        answer = self._call("GET", _path(resource, namespace), query=query, kind=kind)
        items: list[dict[str, Any]] = answer.get("items") or []
        for item in items:  # list items come without apiVersion/kind
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def delete(self, ref: ObjectRef, *, uid: str | None = None) -> bool:
        resource = access.check(ref.api_version, ref.kind, Operation.DELETE)
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        body["propagationPolicy"] = "Background"
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        try:
            self._call("DELETE", _path(resource, ref.namespace, ref.name), body=body, kind=ref.kind)
        except NotFound:
            return False
        except Conflict as error:
            if uid is None:
                raise
            # A delete's only 409 is a failed precondition: the object is another one.
            raise Replaced(str(error), 409) from error
        return True

    def scale(self, ref: ObjectRef, replicas: int) -> None:
        resource = access.check(ref.api_version, ref.kind, Operation.SCALE)
        self._call(
            "PATCH",
            _path(resource, ref.namespace, ref.name, "/scale"),
            query={"fieldManager": SCALE_FIELD_MANAGER},
            body={"spec": {"replicas": replicas}},
            content_type=MERGE_PATCH,
            kind=ref.kind,
        )

    def patch_status(
        self, ref: ObjectRef, status: Mapping[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        resource = access.check(ref.api_version, ref.kind, Operation.PATCH_STATUS)
        # The boundary every status write crosses: text escaped and capped, the whole
        # bounded (the reconciler and the autoscaler do the same first, so this changes
        # nothing they compared against).
        body: dict[str, Any] = {"status": safe_text.bounded_status(status)}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        return self._call(
            "PATCH",
            _path(resource, ref.namespace, ref.name, "/status"),
            query={"fieldManager": labels.FIELD_MANAGER},
            body=body,
            content_type=MERGE_PATCH,
            kind=ref.kind,
        )

    def annotate(self, ref: ObjectRef, annotations: Mapping[str, str | None]) -> dict[str, Any]:
        resource = access.check(ref.api_version, ref.kind, Operation.ANNOTATE)
        return self._call(
            "PATCH",
            _path(resource, ref.namespace, ref.name),
            query={"fieldManager": labels.FIELD_MANAGER},
            body={"metadata": {"annotations": dict(annotations)}},
            content_type=MERGE_PATCH,
            kind=ref.kind,
        )

    def create_event(
        self, regarding: Mapping[str, Any], *, type_: EventType, reason: str, message: str
    ) -> None:
        target = ref_of(regarding)
        resource = access.check("v1", "Event", Operation.CREATE)
        now = dt.datetime.now(dt.UTC).strftime(KUBE_TIME_FORMAT)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{target.name}.{uuid.uuid4().hex[:16]}", "namespace": target.namespace},
            "involvedObject": {
                "apiVersion": target.api_version,
                "kind": target.kind,
                "name": target.name,
                "namespace": target.namespace,
                "uid": regarding["metadata"].get("uid"),
            },
            "type": type_,
            "reason": safe_text.event_reason(reason),
            "message": safe_text.event_message(message),
            "source": {"component": labels.FIELD_MANAGER},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._call("POST", _path(resource, target.namespace), body=event, kind="Event")
