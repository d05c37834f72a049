"""Reading a model's config.json in the tenant's own namespace: the probe Job and its
result. Pure.

A model the catalog lacks, with no inline `spec.model.config`, is planned from the
config.json and safetensors headers at its source. The operator never reads them itself:
it would do so with its own identity (its cloud credentials, its network position) and
would need every tenant's Secrets. It renders a short-lived Job in the InferenceService's
namespace instead, running `inferfleet cache probe` with the spec's Secret mounted as
files exactly as the pre-cache fetcher gets it (caching.precache.workloads), as a non-root user
with nothing else (Pod Security `restricted`, no API token), under a total deadline and
caps on bytes, listing pages and files. The probe writes one compact JSON result to its
termination message, which the kubelet caps at 4,096 bytes; the operator reads it back
from the pod's status (`decode_result`, which treats it as hostile) and keeps the
verdict in the InferenceService's status (reconcile.modelprobe).

The result holds only the config.json keys the planner reads (catalog.hf_config.
planner_config); when even those do not fit they travel zlib-compressed in base64
(`configZ`), and when that does not fit either the probe fails with ConfigTooLarge,
telling the user to give the architecture inline.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import math
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from inferfleet.api import InferenceService, labels
from inferfleet.caching.precache import workloads
from inferfleet.caching.precache.layout import DEFAULT_REF, parse_source
from inferfleet.catalog import Catalogs
from inferfleet.catalog.hf_config import planner_config
from inferfleet.config import OperatorSettings

COMPONENT_PROBE: Final = "model-probe"
CONTAINER: Final = "probe"
# The kubelet keeps at most this much of a container's termination message.
TERMINATION_MESSAGE_BYTES: Final = 4096
RESULT_VERSION: Final = 1
# The probe's bounds (cli `cache probe` defaults; the Job passes the deadline). A
# response: config.json is at most 4 MiB, the largest published index files ~10 MB
# (DeepSeek-V3, Kimi K2); in all: one header read (256 KiB) for each of up to 1,024
# shards plus the index.
MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
MAX_TOTAL_BYTES: Final = 320 * 1024 * 1024
MAX_LISTING_PAGES: Final = 100
MAX_LISTING_FILES: Final = 20_000
# Time the Job gets beyond the probe's own deadline: scheduling, image pull, start.
START_MARGIN_S: Final = 120
PROBE_UID: Final = workloads.FETCHER_UID
RESOURCES: Final = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}
# What a decoded result may hold: a forged pod status is as hostile as any input.
MAX_RESULT_CHARS: Final = 16 * 1024
MAX_CONFIG_JSON_BYTES: Final = 256 * 1024
MAX_MESSAGE_CHARS: Final = 1024
MAX_PARAMETERS_BILLION: Final = 100_000.0
_REASON = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}$")
# A revision id as the fetcher names revision directories (a commit, `<label>-<digest>`).
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def needs_fetch(service: InferenceService, catalogs: Catalogs) -> bool:
    """Only a model with no inline config and no catalog entry needs its config.json read."""
    model = service.spec.model
    return model.config is None and catalogs.model(model.name) is None


def source_uri(service: InferenceService) -> str:
    model = service.spec.model
    return model.source or f"hf://{model.name}"


@dataclass(frozen=True)
class ProbeKey:
    """What a verdict holds for: a change to any of these means a new probe."""

    source: str
    revision: str
    secret_name: str | None
    secret_key: str | None
    need_parameters: bool

    def digest(self) -> str:
        text = json.dumps(
            [self.source, self.revision, self.secret_name, self.secret_key, self.need_parameters],
            separators=(",", ":"),
        )
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "revision": self.revision, "key": self.digest()}
        if self.secret_name is not None:
            out["secretName"] = self.secret_name
            out["secretKey"] = self.secret_key
        return out

    def matches(self, verdict: Mapping[str, Any]) -> bool:
        """Whether a verdict in status holds for this key: a probe under way or a failure
        for exactly this key; a success for the same source, revision and Secret (one
        that counted the parameters also serves a spec that no longer needs them)."""
        if verdict.get("state") != "Resolved":
            return verdict.get("key") == self.digest()
        return (
            verdict.get("source") == self.source
            and verdict.get("revision") == self.revision
            and verdict.get("secretName") == self.secret_name
            and (self.secret_name is None or verdict.get("secretKey") == self.secret_key)
            and (not self.need_parameters or _positive(verdict))
        )


def _positive(verdict: Mapping[str, Any]) -> bool:
    value = verdict.get("parametersBillion")
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def probe_key(service: InferenceService) -> ProbeKey:
    model = service.spec.model
    ref = model.credentials_secret_ref
    return ProbeKey(
        source=source_uri(service),
        revision=model.revision or DEFAULT_REF,
        secret_name=ref.name if ref is not None else None,
        secret_key=ref.key if ref is not None else None,
        need_parameters=model.parameters_billion is None,
    )


def unprobeable(service: InferenceService) -> str | None:
    """Why no probe can read this source (it is only mounted in serving pods), or None."""
    scheme = parse_source(source_uri(service)).scheme
    if scheme in ("pvc", "file"):
        return (
            f"{scheme}:// sources are mounted only in the pods that use them, so no probe reads their "
            "config.json"
        )
    return None


def job_name(service: InferenceService, settings: OperatorSettings, key: ProbeKey, attempt: int) -> str:
    """`<service>-probe-<hash>-<attempt>`, the hash of the key and of what the operator puts
    in the Job (its image, the deadline): a new key, a retry or a new operator is a new
    Job, never an edit of one (a Job's pod template cannot change)."""
    what = f"{key.digest()}|{settings.operator_image}|{settings.model_probe_deadline_s}"
    suffix = f"-probe-{hashlib.sha256(what.encode()).hexdigest()[:10]}-{attempt}"
    return f"{service.name[: 63 - len(suffix)].rstrip('-.')}{suffix}"


def probe_labels_of(service_name: str) -> dict[str, str]:
    """The probe Job's and pod's labels (the parent's re-run and the pod listing select them)."""
    return {
        labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.LABEL_NAME: "inferfleet-probe",
        labels.LABEL_INSTANCE: service_name,
        labels.LABEL_SERVICE: service_name,
        labels.LABEL_COMPONENT: COMPONENT_PROBE,
    }


def probe_labels(service: InferenceService) -> dict[str, str]:
    return probe_labels_of(service.name)


def _security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": PROBE_UID,
        "runAsGroup": PROBE_UID,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def job(service: InferenceService, settings: OperatorSettings, key: ProbeKey, attempt: int) -> dict[str, Any]:
    """The probe Job for attempt `attempt` of `key` (the InferenceService owns it)."""
    model = workloads.CachedModel("model", parse_source(key.source), key.revision)
    # The pre-cache fetcher's own credential wiring: Secret as files, never env values.
    env, credential_args, volumes = workloads._credentials(service, model)
    args = ["--source", key.source, "--revision", key.revision]
    args += ["--deadline-s", str(settings.model_probe_deadline_s)]
    args += credential_args
    if not key.need_parameters:
        args.append("--no-parameters")
    mounts: list[dict[str, Any]] = [{"name": workloads.TMP_VOLUME, "mountPath": "/tmp"}]
    if volumes:
        mounts.append(
            {"name": workloads.CREDENTIALS_VOLUME, "mountPath": workloads.CREDENTIALS_MOUNT, "readOnly": True}
        )
    container = {
        "name": CONTAINER,
        "image": settings.operator_image,
        "command": ["inferfleet", "cache", "probe"],
        "args": args,
        "env": env,
        "volumeMounts": mounts,
        "resources": copy.deepcopy(RESOURCES),
        "securityContext": _security(),
        "terminationMessagePath": "/dev/termination-log",
        # The result is the message: never the log's tail instead.
        "terminationMessagePolicy": "File",
    }
    metadata: dict[str, Any] = {
        "name": job_name(service, settings, key, attempt),
        "namespace": service.namespace,
        "labels": probe_labels(service),
        "annotations": {f"{labels.GROUP}/probe-source": f"{key.source}@{key.revision}"},
    }
    if service.metadata.uid:
        metadata["ownerReferences"] = workloads._owner(service)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.model_probe_deadline_s + START_MARGIN_S,
            "template": {
                "metadata": {"labels": probe_labels(service)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": PROBE_UID,
                        "runAsGroup": PROBE_UID,
                        "fsGroup": PROBE_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": workloads.TMP_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}},
                        *volumes,
                    ],
                },
            },
        },
    }


# --- the result: written by the probe, read back by the operator ------------------------


@dataclass(frozen=True)
class ProbeResult:
    """A probe's verdict: the planner's config keys and the parameter count, or why not."""

    ok: bool
    reason: str
    message: str = ""
    config: Mapping[str, Any] | None = None
    parameters_billion: float | None = None
    revision: str | None = None


def failure(reason: str, message: str) -> ProbeResult:
    return ProbeResult(ok=False, reason=reason, message=clean(message))


def clean(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """One line of printable text: control, bidi and zero-width characters become '?'."""
    flat = _UNPRINTABLE.sub("?", text.replace("\n", " ").replace("\r", " "))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _compact(document: Mapping[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=True, allow_nan=False)


def encode_result(result: ProbeResult) -> str:
    """The termination message: at most TERMINATION_MESSAGE_BYTES of ASCII JSON."""
    if not result.ok:
        base = {"v": RESULT_VERSION, "ok": False, "reason": result.reason}
        message = clean(result.message, MAX_MESSAGE_CHARS)
        text = _compact({**base, "message": message})
        while len(text) > TERMINATION_MESSAGE_BYTES:
            # Escapes (\uXXXX) make the JSON longer than the text: shorten until it fits.
            message = message[: len(message) * 3 // 4]
            text = _compact({**base, "message": message})
        return text
    found: dict[str, Any] = {"v": RESULT_VERSION, "ok": True}
    if result.revision is not None:
        found["revision"] = result.revision
    if result.parameters_billion is not None:
        found["parametersBillion"] = result.parameters_billion
    config = planner_config(result.config or {})
    try:
        plain = _compact({**found, "config": config})
    except ValueError:
        return encode_result(failure("ConfigUnavailable", "config.json holds NaN or Infinity"))
    if len(plain) <= TERMINATION_MESSAGE_BYTES:
        return plain
    packed = base64.b64encode(zlib.compress(_compact(config).encode(), 9)).decode()
    text = _compact({**found, "configZ": packed})
    if len(text) <= TERMINATION_MESSAGE_BYTES:
        return text
    return encode_result(
        failure(
            "ConfigTooLarge",
            f"the planner's keys of config.json take {len(packed)} bytes even compressed, more than a "
            f"termination message holds ({TERMINATION_MESSAGE_BYTES} bytes); give the architecture inline "
            "as spec.model.config (the keys of its config.json) plus parametersBillion",
        )
    )


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str | bytes) -> Any:
    """JSON without NaN/Infinity (json's own extension): raises ValueError or RecursionError."""
    return json.loads(text, parse_constant=_no_constants)


def _invalid(why: str) -> ProbeResult:
    return failure("ProbeResultInvalid", f"the probe's termination message is not a result: {why}")


def _config_of(document: Mapping[str, Any]) -> Mapping[str, Any] | ProbeResult:
    if "configZ" in document:
        packed = document["configZ"]
        if not isinstance(packed, str):
            return _invalid("configZ is not a string")
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(base64.b64decode(packed, validate=True), MAX_CONFIG_JSON_BYTES)
        except (binascii.Error, zlib.error, ValueError) as error:
            return _invalid(f"configZ does not decompress ({type(error).__name__})")
        if inflater.unconsumed_tail or not inflater.eof:
            return _invalid(f"configZ holds more than {MAX_CONFIG_JSON_BYTES} bytes")
        try:
            config = _loads(raw)
        except (ValueError, RecursionError):
            return _invalid("configZ is not JSON")
    else:
        config = document.get("config")
    if not isinstance(config, dict):
        return _invalid("no config object")
    return planner_config(config)


def _parameters(value: Any) -> float | ProbeResult | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return _invalid("parametersBillion is not a finite number")
    if not 0 < value <= MAX_PARAMETERS_BILLION:
        return _invalid(f"parametersBillion {value!r} is outside (0, {MAX_PARAMETERS_BILLION:g}]")
    return float(value)


def decode_result(text: str) -> ProbeResult:
    """A termination message as a result; anything else (garbled, oversized, forged with
    odd types) is a ProbeResultInvalid failure, never an exception."""
    if len(text) > MAX_RESULT_CHARS:
        return _invalid(f"{len(text)} characters, more than {MAX_RESULT_CHARS}")
    try:
        document = _loads(text)
    except (ValueError, RecursionError):
        return _invalid(f"not JSON: {clean(text, 120)!r}")
    if not isinstance(document, dict) or document.get("v") != RESULT_VERSION:
        return _invalid(f"not a version {RESULT_VERSION} result")
    ok = document.get("ok")
    if ok is False:
        reason = document.get("reason")
        message = document.get("message")
        return failure(
            reason if isinstance(reason, str) and _REASON.match(reason) else "ProbeFailed",
            message if isinstance(message, str) else "",
        )
    if ok is not True:
        return _invalid("ok is neither true nor false")
    config = _config_of(document)
    if isinstance(config, ProbeResult):
        return config
    if len(_compact(config)) > MAX_CONFIG_JSON_BYTES:
        return _invalid(f"the config holds more than {MAX_CONFIG_JSON_BYTES} bytes")
    parameters = _parameters(document.get("parametersBillion"))
    if isinstance(parameters, ProbeResult):
        return parameters
    revision = document.get("revision")
    if revision is not None and not (
        isinstance(revision, str) and _REVISION.match(revision) and ".." not in revision
    ):
        return _invalid("revision is not a revision id")
    return ProbeResult(
        ok=True, reason="Resolved", config=config, parameters_billion=parameters, revision=revision
    )
