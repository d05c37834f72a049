"""An in-memory API server that enforces what the operator relies on.

Not a mock that records calls and returns canned answers: it keeps objects, bumps
resourceVersion and generation, answers 409 on a stale resourceVersion, selects by
label, deletes dependents through owner references, and tracks field ownership the way
server-side apply does (simplified: lists are atomic). The last point matters: with
real server-side apply, a field an applier stops sending is removed unless another
manager also owns it, and the tests must see that. So does what the operator's
no-takeover writes rest on, as a v1.34 API server answered it: a create (POST) of an
existing name is AlreadyExists, the POST's fields belong to an `Update` entry (an apply
by the same manager is another entry) until `claim_fields` merges them, an apply
carrying another object's uid is refused (422) and one carrying a uid for a missing
object creates nothing (409), and a delete with another uid is refused (409).

Like the API server's storage, objects are held serialized (compact JSON, plus the
labels and owner uids that selection and garbage collection read), and every read
decodes a fresh copy: a caller can never change a stored object by mutating what it
got, a value that is not JSON is refused as the real server would refuse it, and
thousands of objects (the reconcile benchmark holds ~10,000) take a fraction of the
memory and copy time of nested dicts. Field paths and the sets of them that managers
own are interned, as every object of one shape owns the same paths.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferfleet.api import labels, safe_text
from inferfleet.cluster import access
from inferfleet.cluster.access import Operation
from inferfleet.cluster.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    KindNotServed,
    NotFound,
    NotPermitted,
    PermanentApiError,
    Replaced,
)
from inferfleet.cluster.port import SCALE_FIELD_MANAGER, EventType
from inferfleet.kubedata import ObjectRef, matches, owner_uids, ref_of

Path = tuple[str, ...]
# (manager, "Apply" | "Update"), as managedFields entries are keyed.
ManagerKey = tuple[str, str]

# Metadata the server owns (or that identifies the object); appliers never own these.
_SERVER_SET = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "deletionTimestamp",
        "name",
        "namespace",
    }
)


def _clone(value: Any) -> Any:
    """A deep copy of JSON-shaped data, several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {key: _clone(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clone(item) for item in value]
    return value


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_decode = json.JSONDecoder().decode


def _wire(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh copy of a request body as the server would read it off the wire (JSON)."""
    body: dict[str, Any] = _decode(_encode(dict(obj)))
    return body


# Interned field paths and owned-path sets: every object of one shape shares them.
_PATHS: dict[Path, Path] = {}
_PATH_SETS: dict[frozenset[Path], frozenset[Path]] = {}


def _path_set(paths: Iterable[Path]) -> frozenset[Path]:
    owned = frozenset(paths)
    return _PATH_SETS.setdefault(owned, owned)


@dataclass(slots=True)
class _Stored:
    """One object as stored: its JSON, and what selection and garbage collection read."""

    text: str
    uid: str
    labels: dict[str, str]
    owners: frozenset[str]

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> _Stored:
        metadata = obj["metadata"]
        labels_ = {sys.intern(str(k)): sys.intern(str(v)) for k, v in (metadata.get("labels") or {}).items()}
        return cls(_encode(obj), str(metadata["uid"]), labels_, frozenset(owner_uids(obj)))

    def decode(self) -> dict[str, Any]:
        obj: dict[str, Any] = _decode(self.text)
        return obj


class StoredObjects(Mapping[ObjectRef, dict[str, Any]]):
    """Read-only view of the stored objects; each lookup decodes a fresh copy."""

    def __init__(self, stored: dict[ObjectRef, _Stored]) -> None:
        self._stored = stored

    def __getitem__(self, ref: ObjectRef) -> dict[str, Any]:
        return self._stored[ref].decode()

    def __contains__(self, ref: object) -> bool:
        return ref in self._stored

    def __iter__(self) -> Iterator[ObjectRef]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

    def __repr__(self) -> str:
        return f"StoredObjects({len(self)} objects)"


def _leaves(obj: Mapping[str, Any], prefix: Path = ()) -> dict[Path, Any]:
    """Flatten to leaf paths; dicts recurse, lists and scalars are leaves (atomic lists)."""
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        path = (*prefix, key)
        path = _PATHS.setdefault(path, path)
        if isinstance(value, Mapping) and value:
            out.update(_leaves(value, path))
        else:
            out[path] = value
    return out


def _applied_leaves(body: Mapping[str, Any]) -> dict[Path, Any]:
    leaves = _leaves({k: v for k, v in body.items() if k not in {"apiVersion", "kind", "status"}})
    return {
        path: value
        for path, value in leaves.items()
        if not (path[0] == "metadata" and len(path) > 1 and path[1] in _SERVER_SET)
    }


def _get_path(obj: Mapping[str, Any], path: Path) -> tuple[bool, Any]:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _set_path(obj: dict[str, Any], path: Path, value: Any) -> None:
    node = obj
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value  # `obj` is encoded as soon as it is built, never handed out


def _remove_path(obj: dict[str, Any], path: Path) -> None:
    """Remove a leaf and any parents it leaves empty."""
    chain: list[tuple[dict[str, Any], str]] = []
    node: Any = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return
        chain.append((node, key))
        node = node[key]
    parent, key = chain.pop()
    del parent[key]
    while chain and not parent:
        parent, key = chain.pop()
        del parent[key]


def _merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping):
            child = target.get(key)
            if not isinstance(child, dict):
                child = {}
                target[key] = child
            _merge_patch(child, value)
        else:
            target[key] = _clone(value)


@dataclass
class _Fault:
    operation: str
    error: ApiError
    kind: str | None
    remaining: int


def _namespaced(ref: ObjectRef) -> bool:
    """Whether the kind lives in namespaces (kinds the port does not know: as most do)."""
    try:
        return access.resource_for(ref.api_version, ref.kind).namespaced
    except NotPermitted:
        return True


@dataclass
class InMemoryCluster:
    """The in-memory adapter; also usable as a tiny fake control plane in tests."""

    _stored: dict[ObjectRef, _Stored] = field(default_factory=dict)
    managed: dict[ObjectRef, dict[ManagerKey, frozenset[Path]]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, ObjectRef]] = field(default_factory=list)
    # Kinds the "API server" serves; remove one to act as if its CRD were not installed.
    served: set[tuple[str, str]] = field(
        default_factory=lambda: {(r.api_version, r.kind) for r in access.PERMISSIONS}
    )
    _counter: Callable[[], int] = field(default_factory=lambda: itertools.count(1).__next__)
    _faults: list[_Fault] = field(default_factory=list)
    # Indexes that keep list and owner checks independent of the cluster's size.
    _by_kind: dict[tuple[str, str, str | None], set[ObjectRef]] = field(default_factory=dict)
    _by_uid: dict[str, ObjectRef] = field(default_factory=dict)

    @property
    def objects(self) -> StoredObjects:
        """Every stored object by reference (read-only; each lookup is a fresh copy)."""
        return StoredObjects(self._stored)

    # --- test controls ---------------------------------------------------------------

    def inject(self, operation: str, error: ApiError, *, kind: str | None = None, times: int = 1) -> None:
        """Make the next `times` calls of `operation` (on `kind`, if given) fail with `error`."""
        self._faults.append(_Fault(operation, error, kind, times))

    def _enter(self, operation: Operation, ref: ObjectRef) -> access.Resource:
        resource = access.check(ref.api_version, ref.kind, operation)
        self.calls.append((operation.value, ref))
        for fault in self._faults:
            if fault.remaining > 0 and fault.operation == operation.value and fault.kind in {None, ref.kind}:
                fault.remaining -= 1
                raise fault.error
        if (ref.api_version, ref.kind) not in self.served:
            raise KindNotServed(f"the server could not find the requested resource ({ref.kind})", 404)
        return resource

    def _next_rv(self) -> str:
        return str(self._counter())

    def user_apply(self, obj: Mapping[str, Any], manager: str = "kubectl") -> dict[str, Any]:
        """Server-side apply as someone else (a user, a GitOps tool); no permission check."""
        return self._apply(obj, manager=manager, force=False)

    def update(
        self, ref: ObjectRef, mutate: Callable[[dict[str, Any]], None], manager: str
    ) -> dict[str, Any]:
        """An Update (PUT/PATCH, not apply) by another manager, e.g. `kubectl edit`.

        As on a real server, every field the update changes moves to that manager.
        """
        stored = self._stored.get(ref)
        if stored is None:
            raise NotFound(f"{ref} not found", 404)
        current, changed = stored.decode(), stored.decode()
        before = _applied_leaves(current)
        mutate(changed)
        changed = _wire(changed)
        after = _applied_leaves(changed)
        touched = {p for p in after if before.get(p, _MISSING) != after[p]}
        self._take_ownership((manager, "Update"), ref, touched)
        return self._store(ref, changed, spec_changed=current.get("spec") != changed.get("spec"))

    def add_namespace(self, name: str) -> dict[str, Any]:
        """A namespace, as `kubectl create namespace` makes it (with its uid)."""
        return self._apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            manager="kubectl",
            force=False,
        )

    def user_delete(self, ref: ObjectRef) -> None:
        """Delete as a user would (`kubectl delete`); dependents follow."""
        self._delete_cascading(ref)

    def set_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> None:
        """What a controller (kubelet, Deployment controller) would report."""
        current = self._stored[ref].decode()
        current["status"] = _wire(status)
        current["metadata"]["resourceVersion"] = self._next_rv()
        self._stored[ref] = _Stored.of(current)

    def owners_of(self, ref: ObjectRef, path: Path) -> set[ManagerKey]:
        return {key for key, paths in self.managed.get(ref, {}).items() if path in paths}

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [stored.decode() for r, stored in sorted(self._stored.items()) if r.kind == kind]

    # --- the port ----------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        self._enter(Operation.APPLY, ref_of(obj))
        return self._apply(obj, manager=labels.FIELD_MANAGER, force=force)

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        self._enter(Operation.GET, ref)
        found = self._stored.get(ref)
        return found.decode() if found is not None else None

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        ref = ref_of(obj)
        self._enter(Operation.CREATE, ref)
        return self.user_create(obj, manager=labels.FIELD_MANAGER)

    def user_create(self, obj: Mapping[str, Any], manager: str = "kubectl-create") -> dict[str, Any]:
        """POST as `manager` (a platform admin's `kubectl create`); no permission check.

        As on a real server, the creator owns every field it sent through an Update entry.
        """
        ref = ref_of(obj)
        if _namespaced(ref) and ref.namespace is None:
            raise PermanentApiError(f"{ref}: namespaced objects need metadata.namespace", 422)
        if ref in self._stored:
            raise AlreadyExists(f'{ref.kind} "{ref.name}" already exists', 409)
        self._check_owners(ref, obj)
        body = _wire(obj)
        for key in _SERVER_SET - {"name", "namespace"}:
            body["metadata"].pop(key, None)
        if ref.is_workload:
            body.setdefault("spec", {}).setdefault("replicas", 1)  # the API server's default
        self.managed[ref] = {(manager, "Update"): _path_set(_applied_leaves(body))}
        return self._store(ref, body, spec_changed=True)

    def claim_fields(
        self, ref: ObjectRef, *, uid: str, current: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        del current  # the field sets are here (`managed`), not in the served objects
        self._enter(Operation.APPLY, ref)
        stored = self._stored.get(ref)
        if stored is None:
            raise NotFound(f"{ref} is gone", 404)
        if stored.uid != uid:
            raise Replaced(f"{ref} is another object now (uid {stored.uid}, not {uid})", 409)
        owners = self.managed.setdefault(ref, {})
        update = owners.pop((labels.FIELD_MANAGER, "Update"), frozenset())
        current = stored.decode()
        if not update:
            return current
        applied: ManagerKey = (labels.FIELD_MANAGER, "Apply")
        owners[applied] = _path_set(owners.get(applied, frozenset()) | update)
        current["metadata"]["resourceVersion"] = self._next_rv()  # managedFields are stored
        current["metadata"]["managedFields"] = self._managed_fields(ref)
        self._stored[ref] = _Stored.of(current)
        return current

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        ref = ref_of(obj)
        self._enter(Operation.UPDATE, ref)
        stored = self._stored.get(ref)
        if stored is None:
            raise NotFound(f"{ref} not found", 404)
        current = stored.decode()
        self._check_rv(ref, current, obj["metadata"].get("resourceVersion"))
        body = _wire(obj)
        # What the server owns survives a PUT whatever the client sent.
        for key in ("uid", "generation", "creationTimestamp"):
            if key in current["metadata"]:
                body["metadata"][key] = current["metadata"][key]
        return self._store(ref, body, spec_changed=current.get("spec") != body.get("spec"))

    def list(
        self, api_version: str, kind: str, namespace: str | None, selector: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        self._enter(Operation.LIST, ObjectRef(api_version, kind, namespace, "*"))
        if namespace is None:
            refs = {
                ref
                for (version, kind_, _), found in self._by_kind.items()
                if (version, kind_) == (api_version, kind)
                for ref in found
            }
        else:
            refs = self._by_kind.get((api_version, kind, namespace), set())
        stored = self._stored
        return [stored[ref].decode() for ref in sorted(refs) if matches(selector, stored[ref].labels)]

    def delete(self, ref: ObjectRef, *, uid: str | None = None) -> bool:
        self._enter(Operation.DELETE, ref)
        stored = self._stored.get(ref)
        if stored is None:
            return False
        if uid is not None and stored.uid != uid:
            raise Replaced(
                f"Operation cannot be fulfilled on {ref}: the UID in the precondition ({uid}) "
                f"does not match the UID in record ({stored.uid})",
                409,
            )
        self._delete_cascading(ref)
        return True

    def scale(self, ref: ObjectRef, replicas: int) -> None:
        self._enter(Operation.SCALE, ref)
        if ref not in self._stored:
            raise NotFound(f"{ref} not found", 404)
        self.update(ref, lambda obj: obj["spec"].__setitem__("replicas", replicas), SCALE_FIELD_MANAGER)

    def patch_status(
        self, ref: ObjectRef, status: Mapping[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self._enter(Operation.PATCH_STATUS, ref)
        stored = self._stored.get(ref)
        if stored is None:
            raise NotFound(f"{ref} not found", 404)
        current = stored.decode()
        self._check_rv(ref, current, resource_version)
        merged = current.setdefault("status", {})
        # What KubernetesCluster sends: the port bounds every status write.
        _merge_patch(merged, _wire(safe_text.bounded_status(status)))
        current["metadata"]["resourceVersion"] = self._next_rv()
        self._stored[ref] = _Stored.of(current)
        return current

    def annotate(self, ref: ObjectRef, annotations: Mapping[str, str | None]) -> dict[str, Any]:
        self._enter(Operation.ANNOTATE, ref)
        stored = self._stored.get(ref)
        if stored is None:
            raise NotFound(f"{ref} not found", 404)
        current = stored.decode()
        _merge_patch(current["metadata"].setdefault("annotations", {}), _wire(annotations))
        current["metadata"]["resourceVersion"] = self._next_rv()
        self._stored[ref] = _Stored.of(current)
        return current

    def create_event(
        self, regarding: Mapping[str, Any], *, type_: EventType, reason: str, message: str
    ) -> None:
        target = ref_of(regarding)
        self._enter(Operation.CREATE, ObjectRef("v1", "Event", target.namespace, "*"))
        self.events.append(
            {
                "regarding": target,
                "uid": regarding["metadata"].get("uid"),
                "type": type_,
                "reason": safe_text.event_reason(reason),
                "message": safe_text.event_message(message),
            }
        )

    # --- internals -----------------------------------------------------------------------

    def _check_rv(self, ref: ObjectRef, current: Mapping[str, Any] | None, expected: str | None) -> None:
        if expected is None:
            return
        if current is None:
            raise Conflict(f"{ref}: resourceVersion {expected} given but the object does not exist", 409)
        actual = current["metadata"].get("resourceVersion")
        if actual != expected:
            raise Conflict(
                f"Operation cannot be fulfilled on {ref}: the object has been modified "
                f"(resourceVersion {expected} != {actual})",
                409,
            )

    @staticmethod
    def _check_uid(ref: ObjectRef, stored: _Stored | None, uid: str | None) -> None:
        """An apply carrying a uid, as the API server answers it (seen on v1.34)."""
        if uid is None:
            return
        if stored is None:
            raise Conflict(
                f"Operation cannot be fulfilled on {ref}: uid mismatch: the provided object "
                f"specified uid {uid}, and no existing object was found",
                409,
            )
        if stored.uid != uid:
            raise Replaced(f'{ref} is invalid: metadata.uid: Invalid value: "{uid}": field is immutable', 422)

    def _take_ownership(self, key: ManagerKey, ref: ObjectRef, paths: set[Path]) -> None:
        owners = self.managed.setdefault(ref, {})
        for other in owners:
            if other != key:
                owners[other] = _path_set(owners[other] - paths)
        owners[key] = _path_set(owners.get(key, frozenset()) | paths)

    def _apply(self, obj: Mapping[str, Any], *, manager: str, force: bool) -> dict[str, Any]:
        body = obj  # only read: its leaves go into `base`, which is stored as JSON at once
        ref = ref_of(body)
        if _namespaced(ref) and ref.namespace is None:
            raise PermanentApiError(f"{ref}: namespaced objects need metadata.namespace", 422)
        stored = self._stored.get(ref)
        current = stored.decode() if stored is not None else None
        # As the API server: a stale resourceVersion (409) before a foreign uid (422).
        self._check_rv(ref, current, body["metadata"].get("resourceVersion"))
        self._check_uid(ref, stored, body["metadata"].get("uid"))
        self._check_owners(ref, body)
        applied = _applied_leaves(body)
        key: ManagerKey = (manager, "Apply")
        owners = self.managed.setdefault(ref, {})
        base = stored.decode() if stored is not None else {"metadata": {}}
        # Another manager owning a field is fine while the values agree (shared
        # ownership); a different value is a conflict, which `force` resolves for us.
        conflicting = {
            path
            for other, owned in owners.items()
            if other != key
            for path in owned & applied.keys()
            if _get_path(base, path) != (True, _decode(_encode(applied[path])))  # as stored
        }
        if conflicting and not force:
            names = ", ".join(sorted(".".join(path) for path in conflicting))
            raise Conflict(f"{ref}: apply conflicts with other managers on {names}", 409)
        if conflicting:
            for other in owners:
                if other != key:
                    owners[other] = _path_set(owners[other] - conflicting)
        # A field this manager stops sending goes away unless someone else owns it too.
        previously = owners.get(key, frozenset())
        for path in previously - applied.keys():
            if not any(path in owned for other, owned in owners.items() if other != key):
                _remove_path(base, path)
        for path, value in applied.items():
            _set_path(base, path, value)
        owners[key] = _path_set(applied.keys())
        base["apiVersion"], base["kind"] = ref.api_version, ref.kind
        base["metadata"]["name"], base["metadata"]["namespace"] = ref.name, ref.namespace
        created = current is None
        if created and ref.is_workload:
            base.setdefault("spec", {}).setdefault("replicas", 1)  # the API server's default
        self._store(ref, base, spec_changed=created or (current or {}).get("spec") != base.get("spec"))
        return self._stored[ref].decode()  # `base` shares values with the caller's `obj`

    def _check_owners(self, ref: ObjectRef, body: Mapping[str, Any]) -> None:
        # A real server accepts a dangling owner and its garbage collector then deletes
        # the object; for the operator that is always a bug, so refuse it loudly.
        for uid in owner_uids(body):
            owner = self._by_uid.get(uid)
            if owner is None or owner.namespace != ref.namespace:
                raise PermanentApiError(f"{ref}: owner uid {uid} does not exist in {ref.namespace}", 422)

    def _store(self, ref: ObjectRef, obj: dict[str, Any], *, spec_changed: bool) -> dict[str, Any]:
        """Store `obj` (a copy no caller holds) and return it, now as served."""
        metadata = obj["metadata"]
        if ref not in self._stored:
            metadata["uid"] = f"uid-{self._counter():06d}"
            metadata["generation"] = 1
        elif spec_changed:
            metadata["generation"] = int(metadata.get("generation", 1)) + 1
        metadata["resourceVersion"] = self._next_rv()
        metadata["managedFields"] = self._managed_fields(ref)
        self._stored[ref] = _Stored.of(obj)
        self._by_kind.setdefault((ref.api_version, ref.kind, ref.namespace), set()).add(ref)
        self._by_uid[metadata["uid"]] = ref
        if (ref.api_version, ref.kind) in _VOLUME_KINDS:
            self._bind_volumes()
        return obj

    def _bind_volumes(self) -> None:
        """What the PersistentVolume controller does for pre-bound volumes: a claim naming a
        volume (`volumeName`) binds it when the volume's `claimRef` names that claim (and,
        once bound, its uid); otherwise the claim stays Pending."""
        claims = [r for r in self._stored if (r.api_version, r.kind) == ("v1", "PersistentVolumeClaim")]
        for claim_ref in claims:
            claim = self._stored[claim_ref].decode()
            if (claim.get("status") or {}).get("phase") == "Bound":
                continue
            volume_name = (claim.get("spec") or {}).get("volumeName")
            volume_ref = ObjectRef("v1", "PersistentVolume", None, str(volume_name))
            if not volume_name or volume_ref not in self._stored:
                continue
            volume = self._stored[volume_ref].decode()
            wanted = (volume.get("spec") or {}).get("claimRef") or {}
            if (wanted.get("namespace"), wanted.get("name")) != (claim_ref.namespace, claim_ref.name):
                continue
            if wanted.get("uid") not in (None, claim["metadata"]["uid"]):
                continue  # bound to an earlier claim of that name: Released, never rebound
            volume["spec"]["claimRef"]["uid"] = claim["metadata"]["uid"]
            volume["status"] = {"phase": "Bound"}
            claim["status"] = {"phase": "Bound"}
            for ref, body in ((volume_ref, volume), (claim_ref, claim)):
                body["metadata"]["resourceVersion"] = self._next_rv()
                self._stored[ref] = _Stored.of(body)

    def _managed_fields(self, ref: ObjectRef) -> Any:
        return _served_managed_fields(ref, self.managed.get(ref, {}))

    def _delete_cascading(self, ref: ObjectRef) -> None:
        uid = self._stored.pop(ref).uid
        self.managed.pop(ref, None)
        self._by_kind.get((ref.api_version, ref.kind, ref.namespace), set()).discard(ref)
        self._by_uid.pop(uid, None)
        # Deleting is rare (tests, prunes); a scan keeps the index simple.
        dependents = [r for r, stored in self._stored.items() if uid in stored.owners]
        for dependent in dependents:
            if dependent in self._stored:
                self._delete_cascading(dependent)


def _served_managed_fields(
    ref: ObjectRef, owners: Mapping[ManagerKey, frozenset[Path]]
) -> list[dict[str, Any]]:
    """`metadata.managedFields` as served: who owns fields, by which operation (the field
    sets themselves are in `managed`; nothing reads them off objects)."""
    return [
        {"manager": manager, "operation": operation, "apiVersion": ref.api_version, "fieldsType": "FieldsV1"}
        for (manager, operation), paths in sorted(owners.items())
        if paths
    ]


_MISSING = object()
_VOLUME_KINDS = frozenset({("v1", "PersistentVolume"), ("v1", "PersistentVolumeClaim")})
