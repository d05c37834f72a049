"""Desired vs observed -> the actions that make the cluster match.

Rules, each one a promise the handlers' tests check:
- an object that does not exist among the owned ones is created as rendered (the warm
  minimum replicas) with POST, never applied: an object of that name that someone else
  made stays theirs (the executor reports the conflict);
- every write to an owned object carries its observed uid, so one deleted and made
  again by someone else since is neither updated nor pruned;
- before the first apply to an object we created, its fields are claimed for our
  applies (`Claim`), so a field they stop sending goes, as it would had it been applied;
- an existing workload keeps the replicas it has: the autoscaler owns that number, so
  the applied body carries the observed value back (see `carry_replicas`);
- an object already holding everything we declare is left alone, so a spec change
  that does not alter a pod template causes no write, and no pod restarts;
- an object that drifted (a human edited a field we declare) is applied again;
- an owned object no longer declared is deleted, except those of tiers in
  `keep_tiers` (tiers still in the spec whose plan failed: their running workloads
  stay untouched until the spec is fixed) and those in `keep` (a tier's old workload
  serving until its replacement of another kind is Ready: reconcile.kindswitch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.api import labels
from inferfleet.kubedata import ObjectRef, claimed_managed_fields, ref_of, replicas_of
from inferfleet.reconcile.actions import Action, Apply, Claim, Delete


def contains(observed: Any, desired: Any) -> bool:
    """True when `observed` holds every field of `desired` with the same value.

    Fields the API server adds (defaults, status, clusterIP...) are ignored; lists
    must match element by element, as server-side apply replaces atomic lists. A
    desired empty list, or an empty map of a map-typed field, matches an absent field:
    Kubernetes' Go types drop them (`omitempty`; `annotations: {}` never comes back), so
    a key-by-key comparison would see drift on every pass and write again. An empty
    struct such as `emptyDir: {}` is kept by the server and still compared.
    """
    # Plain dict/list checks: objects here are decoded JSON, and ABC checks are slow.
    # Equal values contain each other; `==` (C code, and for dicts of different sizes
    # a length check) settles most of an unchanged object without walking it.
    if observed == desired:
        return True
    if isinstance(desired, dict):
        return isinstance(observed, dict) and all(
            contains(observed[key], value) if key in observed else _dropped_when_empty(key, value)
            for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(observed, list)
            and len(observed) == len(desired)
            and all(contains(o, d) for o, d in zip(observed, desired, strict=True))
        )
    return False  # unequal scalars


# Fields of type map[string]string (or map of quantities) in the kinds we render.
_MAP_FIELDS = frozenset(
    {"labels", "annotations", "nodeSelector", "matchLabels", "limits", "requests", "data", "stringData"}
)


def _dropped_when_empty(key: str, value: Any) -> bool:
    if isinstance(value, list):
        return not value
    return isinstance(value, dict) and not value and key in _MAP_FIELDS


def carry_replicas(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """The desired workload with the observed replicas and resourceVersion.

    Sending the autoscaler's current value keeps `spec.replicas` in our applied
    configuration: had we left it out, server-side apply would remove the field
    whenever we were its only manager, resetting the workload to one replica. The
    resourceVersion makes the write conditional, so if the autoscaler scales between
    our read and our write we get a 409 and retry, never overwrite its decision.
    """
    # Copies of the two levels changed; the rest is shared with `desired`, which the
    # caller rendered for this pass alone.
    body = {**desired, "metadata": dict(desired["metadata"]), "spec": dict(desired["spec"])}
    current = replicas_of(observed)
    if current is not None:
        body["spec"]["replicas"] = current
    resource_version = (observed.get("metadata") or {}).get("resourceVersion")
    if resource_version is not None:
        body["metadata"]["resourceVersion"] = resource_version
    return body


def diff(
    desired: Sequence[Mapping[str, Any]],
    observed: Sequence[Mapping[str, Any]],
    *,
    keep_tiers: frozenset[str] = frozenset(),
    keep: frozenset[ObjectRef] = frozenset(),
) -> list[Action]:
    """Applies in the order given (render's apply order), then deletes, sorted."""
    existing = {ref_of(obj): obj for obj in observed}
    wanted = set()
    actions: list[Action] = []
    for obj in desired:
        ref = ref_of(obj)
        wanted.add(ref)
        current = existing.get(ref)
        if current is None:
            actions.append(Apply(dict(obj), "create"))
            continue
        uid = _uid(current)
        body = carry_replicas(obj, current) if ref.is_workload else {**obj, "metadata": dict(obj["metadata"])}
        if uid is not None:
            body["metadata"]["uid"] = uid
        # The carried uid and resourceVersion are the observed ones: never drift.
        if contains(current, body):
            continue
        if uid is not None and _created_unclaimed(current):
            actions.append(Claim(ref, uid, observed=current))
        actions.append(Apply(body, "update"))
    for ref in sorted(set(existing) - wanted - keep):
        tier = ((existing[ref].get("metadata") or {}).get("labels") or {}).get(labels.LABEL_TIER)
        if tier is not None and tier in keep_tiers:
            continue
        actions.append(Delete(ref, uid=_uid(existing[ref])))
    return actions


def _uid(obj: Mapping[str, Any]) -> str | None:
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid is not None else None


def _created_unclaimed(obj: Mapping[str, Any]) -> bool:
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return claimed_managed_fields(entries, labels.FIELD_MANAGER) is not None
