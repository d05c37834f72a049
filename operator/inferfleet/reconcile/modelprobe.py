"""The verdict on a model's config.json, read by a probe Job (pure).

For a model the catalog lacks and the spec does not describe inline, the reconciler
reads no source itself: a probe Job in the service's namespace does (caching.precache.probe),
and this module turns what the pass observed (the verdict kept in
`status.modelSource`, the probe Jobs the service owns, their pods) into

- the verdict to keep: Probing (attempt n, its Job), Resolved (the planner's config
  keys, the parameter count, the revision id read) or Failed (the source's own reason,
  bounded and cleaned);
- the Job to keep or create (none once a verdict is in status: the diff prunes it);
- what the planner gets: the model read, or the words that make its tiers infeasible;
- the ModelConfigRead condition.

A success is kept until the source, revision or Secret name/key change; a failure is
retried with a new Job after a backoff (30 s, doubling, at most 10 minutes) counted from
the verdict's time, so an operator restart neither loses nor repeats a verdict. Since
nothing here does I/O, one service's slow or hostile source costs other services
nothing: the slowness is its probe pod's.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from inferfleet.api import InferenceService, labels
from inferfleet.caching.precache import probe
from inferfleet.caching.precache.probe import ProbeKey, ProbeResult
from inferfleet.catalog import Catalogs
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import KUBE_TIME_FORMAT, labels_of, parse_kube_time
from inferfleet.planner import FetchedModel

STATE_PROBING: Final = "Probing"
STATE_RESOLVED: Final = "Resolved"
STATE_FAILED: Final = "Failed"
RETRY_BASE_S: Final = 30.0
RETRY_MAX_S: Final = 600.0
# A probe that has not reported this long after its Job's own deadline never will (no
# Job controller, a Job the API server refused): failed, and retried like any failure.
REPORT_GRACE_S: Final = 60.0


@dataclass(frozen=True)
class ModelProbe:
    """What the pass does about the model's config.json (see the module docstring)."""

    verdict: dict[str, Any] | None = None  # status.modelSource; None: not needed
    job: dict[str, Any] | None = None  # the probe Job wanted now
    fetched: FetchedModel | None = None
    problem: str | None = None  # for the planner's infeasible reason
    condition: tuple[str, str, str] | None = None  # (status, reason, message)

    @property
    def applies(self) -> bool:
        return self.verdict is not None or self.problem is not None


NOT_NEEDED: Final = ModelProbe()


def retry_delay_s(attempt: int) -> float:
    return float(min(RETRY_MAX_S, RETRY_BASE_S * 2 ** max(0, attempt - 1)))


def _at(now: str, seconds: float) -> str:
    moment = parse_kube_time(now) or 0.0
    return dt.datetime.fromtimestamp(moment + seconds, tz=dt.UTC).strftime(KUBE_TIME_FORMAT)


def _age_s(since: Any, now: str) -> float:
    start, end = parse_kube_time(since), parse_kube_time(now)
    if start is None or end is None:
        return math.inf  # an unreadable time: as old as can be (retried, never stuck)
    return end - start


def wanted(service: InferenceService, settings: OperatorSettings, catalogs: Catalogs) -> bool:
    """Whether the service's model needs its config.json read at all (then the pass lists
    its probe pods)."""
    return settings.fetch_model_config and probe.needs_fetch(service, catalogs)


def _verdict(
    key: ProbeKey, state: str, reason: str, message: str, *, now: str, job: str | None, attempt: int
) -> dict[str, Any]:
    out = {
        **key.to_wire(),
        "state": state,
        "reason": reason,
        "message": probe.clean(message),
        "time": now,
        "attempt": attempt,
    }
    if job is not None:
        out["job"] = job
    return out


def _owned_by(pod: Mapping[str, Any], job_name: str, job_uid: str | None) -> bool:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("name") == job_name:
            return job_uid is None or ref.get("uid") == job_uid
    return False


def pod_result(pod: Mapping[str, Any]) -> ProbeResult | None:
    """The probe's result from its pod's status; None while it has not ended."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        if container.get("name") != probe.CONTAINER:
            continue
        terminated = (container.get("state") or {}).get("terminated")
        if not isinstance(terminated, Mapping):
            break
        message = terminated.get("message")
        if isinstance(message, str) and message.strip():
            return probe.decode_result(message.strip())
        reason = probe.clean(str(terminated.get("reason") or "unknown"), 64)
        if reason == "OOMKilled":
            limit = probe.RESOURCES["limits"]["memory"]
            return probe.failure("OOMKilled", f"the probe ran out of memory ({limit}) before its result")
        code = terminated.get("exitCode")
        return probe.failure(
            "ProbeResultMissing", f"the probe container ended ({reason}, exit {code}) without a result"
        )
    if status.get("phase") == "Failed":
        why = probe.clean(f"{status.get('reason') or 'Failed'}: {status.get('message') or ''}", 256)
        return probe.failure("ProbeFailed", f"the probe pod failed ({why})")
    return None


def _job_failure(job: Mapping[str, Any], settings: OperatorSettings) -> ProbeResult | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            reason = probe.clean(str(condition.get("reason") or "Failed"), 64)
            limit_s = settings.model_probe_deadline_s + probe.START_MARGIN_S
            if reason == "DeadlineExceeded":
                return probe.failure(
                    "DeadlineExceeded",
                    f"the probe Job did not report within {limit_s} s (a pod that never started: a "
                    "missing Secret or key, no node, an image pull)",
                )
            return probe.failure("ProbeFailed", f"the probe Job failed ({reason}) without a result")
    return None


def _observed_result(
    name: str,
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    settings: OperatorSettings,
) -> ProbeResult | None:
    job = next((j for j in jobs if (j.get("metadata") or {}).get("name") == name), None)
    uid = (job.get("metadata") or {}).get("uid") if job is not None else None
    results = [pod_result(pod) for pod in pods if _owned_by(pod, name, uid)]
    ended = [result for result in results if result is not None]
    if ended:
        # Several pods (a node lost mid-run): a success wins, else the first failure.
        return next((r for r in ended if r.ok), ended[0])
    return _job_failure(job, settings) if job is not None else None


def _resolved(key: ProbeKey, result: ProbeResult, now: str, job: str, attempt: int) -> dict[str, Any]:
    verdict = _verdict(key, STATE_RESOLVED, STATE_RESOLVED, "", now=now, job=job, attempt=attempt)
    verdict["config"] = dict(result.config or {})
    if result.parameters_billion is not None:
        verdict["parametersBillion"] = result.parameters_billion
    if result.revision is not None:
        verdict["resolvedRevision"] = result.revision
    verdict["message"] = f"config.json of {key.source}@{result.revision or key.revision} read by Job {job}"
    return verdict


def _fetched(service: InferenceService, verdict: Mapping[str, Any]) -> FetchedModel | None:
    """The model a Resolved verdict holds; None when the stored verdict is not usable."""
    config = verdict.get("config")
    parameters = verdict.get("parametersBillion")
    if not isinstance(config, Mapping):
        return None
    given = service.spec.model.parameters_billion
    counted = (
        float(parameters)
        if isinstance(parameters, int | float)
        and not isinstance(parameters, bool)
        and math.isfinite(parameters)
        else 0.0
    )
    if given is None and counted <= 0:
        return None
    revision = verdict.get("resolvedRevision")
    shown = f"{verdict.get('source')}@{str(revision or verdict.get('revision'))[:12]}"
    return FetchedModel(
        config=dict(config),
        parameters_billion=given if given is not None else counted,
        source=shown,
        revision=str(revision) if revision else None,
    )


def _probing(
    service: InferenceService, settings: OperatorSettings, key: ProbeKey, verdict: dict[str, Any]
) -> ModelProbe:
    name = str(verdict["job"])
    where = f"{key.source}@{key.revision}"
    words = f"reading config.json from {where} in Job {service.namespace}/{name}"
    return ModelProbe(
        verdict=verdict,
        job=probe.job(service, settings, key, int(verdict["attempt"])),
        problem=f"{words} (kubectl -n {service.namespace} logs job/{name})",
        condition=("Unknown", labels.REASON_PROBING, f"{words} (attempt {verdict['attempt']})"),
    )


def _start(
    service: InferenceService, settings: OperatorSettings, key: ProbeKey, attempt: int, now: str
) -> ModelProbe:
    name = probe.job_name(service, settings, key, attempt)
    verdict = _verdict(key, STATE_PROBING, STATE_PROBING, "", now=now, job=name, attempt=attempt)
    verdict["message"] = f"reading config.json from {key.source}@{key.revision}"
    return _probing(service, settings, key, verdict)


def _failed(key: ProbeKey, verdict: dict[str, Any], now: str) -> ModelProbe:
    attempt = int(verdict.get("attempt") or 1)
    retry_at = _at(str(verdict.get("time") or now), retry_delay_s(attempt))
    job = f" (Job {verdict['job']})" if verdict.get("job") else ""
    words = f"{verdict.get('reason')}: {verdict.get('message')}"
    return ModelProbe(
        verdict=verdict,
        problem=f"its config.json could not be read from {key.source}@{key.revision}{job}: {words}; "
        f"read again after {retry_at}",
        condition=(
            "False",
            labels.REASON_PROBE_FAILED,
            f"{words}; read again after {retry_at} (attempt {attempt})",
        ),
    )


def _settled(
    service: InferenceService,
    *,
    settings: OperatorSettings,
    key: ProbeKey,
    result: ProbeResult,
    previous: Mapping[str, Any],
    now: str,
) -> ModelProbe:
    """A probe reported: its verdict. Its Job stays for this pass, so a status write that
    fails does not lose the result with it; the next pass prunes it."""
    job = str(previous.get("job") or "")
    attempt = int(previous.get("attempt") or 1)
    if not result.ok:
        verdict = _verdict(
            key, STATE_FAILED, result.reason, result.message, now=now, job=job, attempt=attempt
        )
        decided = _failed(key, verdict, now)
    else:
        decided = _kept(service, key, _resolved(key, result, now, job, attempt))
    return replace(decided, job=probe.job(service, settings, key, attempt))


def _kept(service: InferenceService, key: ProbeKey, verdict: dict[str, Any]) -> ModelProbe:
    fetched = _fetched(service, verdict)
    assert fetched is not None  # checked by the caller, or just built from a valid result
    parameters = verdict.get("parametersBillion")
    counted = f", {parameters:g}B parameters" if isinstance(parameters, int | float) else ""
    return ModelProbe(
        verdict=verdict,
        fetched=fetched,
        condition=("True", labels.REASON_CONFIG_READ, f"{verdict.get('message')}{counted}"),
    )


def decide(
    service: InferenceService,
    *,
    settings: OperatorSettings,
    catalogs: Catalogs,
    previous: Mapping[str, Any] | None,
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    now: str,
) -> ModelProbe:
    """This pass's verdict, Job, planner input and condition (see the module docstring)."""
    if not probe.needs_fetch(service, catalogs):
        return NOT_NEEDED
    if not settings.fetch_model_config:
        return ModelProbe(problem="the operator reads no model sources (INFERFLEET_FETCH_MODEL_CONFIG=false)")
    refused = probe.unprobeable(service)
    if refused is not None:
        return ModelProbe(
            problem=f"{refused}; give the architecture inline",
            condition=("False", labels.REASON_PROBE_FAILED, refused),
        )
    key = probe.probe_key(service)
    last = previous if isinstance(previous, Mapping) and key.matches(previous) else None
    if last is None:
        return _start(service, settings, key, 1, now)
    state = last.get("state")
    attempt = last.get("attempt")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        attempt = 1
    if state == STATE_RESOLVED and _fetched(service, last) is not None:
        return _kept(service, key, dict(last))
    if state == STATE_FAILED:
        if _age_s(last.get("time"), now) >= retry_delay_s(attempt):
            return _start(service, settings, key, attempt + 1, now)
        return _failed(key, dict(last), now)
    if state == STATE_PROBING and last.get("job") == probe.job_name(service, settings, key, attempt):
        result = _observed_result(str(last["job"]), jobs, pods, settings)
        limit_s = settings.model_probe_deadline_s + probe.START_MARGIN_S + REPORT_GRACE_S
        if result is None and _age_s(last.get("time"), now) > limit_s:
            result = probe.failure("DeadlineExceeded", f"the probe Job reported nothing within {limit_s:g} s")
        if result is not None:
            return _settled(service, settings=settings, key=key, result=result, previous=last, now=now)
        return _probing(service, settings, key, {**last, "attempt": attempt})
    # A verdict this operator cannot use (edited, or from another version): read again.
    return _start(service, settings, key, attempt + 1, now)


def fetched_of(service: InferenceService, verdict: Any) -> FetchedModel | None:
    """The model a Resolved verdict in status holds for this spec (the autoscaler re-plans
    with it), else None. Reads nothing but the verdict."""
    if not isinstance(verdict, Mapping) or verdict.get("state") != STATE_RESOLVED:
        return None
    if not probe.probe_key(service).matches(verdict):
        return None
    return _fetched(service, verdict)


def probe_pod_selector(service: InferenceService) -> dict[str, str]:
    return {labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: probe.COMPONENT_PROBE}


def probe_jobs(observed: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The probe Jobs among the objects a service owns."""
    return [
        obj
        for obj in observed
        if obj.get("kind") == "Job" and labels_of(obj).get(labels.LABEL_COMPONENT) == probe.COMPONENT_PROBE
    ]
