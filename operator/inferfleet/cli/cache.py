"""`inferfleet cache fetch | verify | gc | hold | probe`: the weight pre-cache, by hand or in pods.

The pre-cache DaemonSet runs `fetch --hold`, serving pods run `verify --wait-s` as an
init container and `hold` as a sidecar; all of them are ordinary commands a person can
run on a node to see what the operator sees. Failures print `Reason: detail` on stderr,
write the same line to the container's termination log (the operator turns it into the
CacheReady condition) and exit 1; usage mistakes exit 2.

`probe` is the operator's probe pod (caching.precache.probe): it reads what the planner needs
from a source within a deadline and caps, and writes one JSON result (not `Reason:
detail`) to the termination log and stdout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn

import typer

from inferfleet.caching.fetcher import compile_store, store
from inferfleet.caching.fetcher.fetch import FetchOptions, FetchResult, RetryPolicy, fetch
from inferfleet.caching.precache import compile_cache
from inferfleet.caching.precache import probe as probe_result
from inferfleet.caching.precache.fetch_errors import CacheError, CacheMissing, SourceInvalid, WriteFailed
from inferfleet.caching.precache.layout import DEFAULT_REF
from inferfleet.caching.precache.manifest import DEFAULT_ALLOW_PATTERNS, Manifest
from inferfleet.cli.app import EXIT_USAGE, OutputFormat, app, fail

EXIT_FAILED = 1
GIB = 1024**3
TERMINATION_LOG_ENV = "INFERFLEET_TERMINATION_LOG"
DEFAULT_TERMINATION_LOG = "/dev/termination-log"

cache_app = typer.Typer(
    help="Pre-cache model weights on node-local storage and check them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(cache_app, name="cache")


def _log(line: str) -> None:
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {line}\n")
    sys.stderr.flush()


def _termination_log(line: str) -> None:
    path = os.environ.get(TERMINATION_LOG_ENV, DEFAULT_TERMINATION_LOG)
    # Only inside a container (the file exists there); never create it on a laptop.
    if os.path.exists(path):
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(line[:4000])
        except OSError:
            pass


def _failed(error: CacheError) -> NoReturn:
    if isinstance(error, SourceInvalid):
        fail(error.message)
    line = error.termination_message()
    _termination_log(line)
    sys.stderr.write(f"error: {line}\n")
    raise typer.Exit(EXIT_FAILED)


def _write_result(text: str, path: Path | None) -> None:
    """The probe's result: stdout, and the termination log (the given path, created; else
    the container's, only where it exists)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if path is None:
        default = os.environ.get(TERMINATION_LOG_ENV, DEFAULT_TERMINATION_LOG)
        if not os.path.exists(default):
            return
        path = Path(default)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        _log(f"cannot write the result to {path}: {error}")


def _peak_rss_mib() -> float | None:
    """This process's own peak RSS (VmHWM: since exec, unlike getrusage's, which keeps the
    parent's from before it)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _summary(manifest: Manifest, revision_dir: Path) -> dict[str, Any]:
    config = manifest.hf_config or {}
    return {
        "source": manifest.source,
        "ref": manifest.ref,
        "revisionId": manifest.revision_id,
        "commit": manifest.commit,
        "path": str(revision_dir),
        "files": len(manifest.files),
        "totalBytes": manifest.total_bytes,
        "weightBytes": manifest.weight_bytes,
        "modelType": config.get("model_type"),
        "architectures": config.get("architectures"),
        "fetchedAt": manifest.fetched_at,
        "fetchBytesPerSecond": manifest.fetch_bytes_per_s,
    }


class _Stop:
    """SIGTERM/SIGINT → a threading.Event, so hold loops end cleanly (pod deletion)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()


def _hold(
    pins: list[tuple[Path, str]],
    budget_bytes: int | None,
    gc_interval_s: float,
    publisher: CompilePublisher | None = None,
) -> None:
    """Keep the shared locks of revisions until asked to stop; collect garbage meanwhile.
    `publisher`: a serving pod's compile cache, published once after a first start."""
    stop = _Stop()
    fds = [store.pin_revision(dest, revision_id) for dest, revision_id in pins]
    names = ", ".join(f"{dest.name}@{revision_id}" for dest, revision_id in pins)
    _log(f"holding {names} (in use: the garbage collector will not remove it)")
    protect = frozenset((dest.name, revision_id) for dest, revision_id in pins)
    try:
        if publisher is not None and pins:
            compiled = publisher.run(pins[0][1], stop.event)
            if compiled is not None:
                fds.append(compiled)
        while not stop.event.wait(gc_interval_s if budget_bytes is not None else 3600.0):
            for dest, revision_id in pins:
                store.touch(dest, revision_id)
            if publisher is not None and pins:
                publisher.touch(pins[0][1])
            if budget_bytes is not None:
                store.collect_garbage(pins[0][0].parent, budget_bytes, _log, protect=protect)
    finally:
        for fd in fds:
            os.close(fd)
    _log("released")


class CompilePublisher:
    """The hold sidecar's part in the compile cache (caching/precache/compile_cache.py):
    after a first start, once the engine answers, publish what it compiled; say ready
    (a file the sidecar's readiness probe looks for) only then."""

    def __init__(
        self, store_dir: Path, source: Path, dirs: list[str], engine_url: str, state_dir: Path
    ) -> None:
        self.store_dir, self.source, self.dirs = store_dir, source, dirs
        self.engine_url, self.state_dir = engine_url, state_dir

    def _ready(self) -> None:
        (self.state_dir / compile_cache.READY_FILE).touch()

    def _engine_up(self, stop: threading.Event) -> bool:
        """Wait for the engine's /health to answer 200; False when asked to stop first."""
        import urllib.error
        import urllib.request

        while not stop.is_set():
            try:
                with urllib.request.urlopen(self.engine_url, timeout=2.0) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError, ValueError):
                pass
            stop.wait(2.0)
        return False

    def run(self, revision_id: str, stop: threading.Event) -> int | None:
        """Publish (a first start) or find (a warm one) the entry; its pin fd, if any."""
        attempted = self.state_dir / "attempted"
        if compile_store.entry_state(self.store_dir, revision_id) != "intact" and not attempted.exists():
            if not self._engine_up(stop):
                return None
            attempted.touch()
            try:
                result = compile_store.publish(self.store_dir, revision_id, self.source, self.dirs, _log)
            except Exception as error:
                line = f"CompilePublishFailed: {type(error).__name__}: {error}"
                _termination_log(line)
                _log(f"{line}; the next start on this node compiles again")
                raise typer.Exit(EXIT_FAILED) from None
            _log(f"compile cache {revision_id}: {'published' if result.published else 'kept'} ({result.why})")
        elif attempted.exists():
            _log("compile cache: an earlier publish failed (see the last termination message); not retried")
        self._ready()
        self.touch(revision_id)
        return compile_store.pin(self.store_dir, revision_id)

    def touch(self, revision_id: str) -> None:
        with suppress(OSError):
            os.utime(self.store_dir / revision_id / compile_cache.COMPILE_MARKER, follow_symlinks=False)


@cache_app.command("fetch")
def fetch_command(
    *,
    source: Annotated[
        str,
        typer.Option(
            "--source", help="hf://ORG/REPO, s3://BUCKET/PREFIX, gs://…, pvc://CLAIM/PATH, file:///…"
        ),
    ],
    dest: Annotated[Path, typer.Option("--dest", help="The model's cache directory (created if missing).")],
    revision: Annotated[
        str, typer.Option("--revision", help="Branch, tag or commit (hf); a label elsewhere.")
    ] = DEFAULT_REF,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="File holding the hub token (default: $HF_TOKEN).")
    ] = None,
    credentials_dir: Annotated[
        Path | None,
        typer.Option("--credentials-dir", help="Mounted Secret with AWS_* files (s3:// sources)."),
    ] = None,
    allow_pattern: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-pattern",
            help="Glob of files to fetch (repeatable); default: safetensors, "
            "JSON configs and tokenizer files.",
        ),
    ] = None,
    parallel: Annotated[int, typer.Option("--parallel", min=1, max=64, help="Files downloaded at once.")] = 4,
    budget_gib: Annotated[
        float | None,
        typer.Option(
            "--budget-gib", min=0.0, help="Per-node cache budget: evict unused revisions (LRU) beyond it."
        ),
    ] = None,
    node_root: Annotated[
        Path | None,
        typer.Option("--node-root", help="Cache root holding every model (default: DEST's parent)."),
    ] = None,
    hold: Annotated[
        bool,
        typer.Option("--hold", help="Afterwards keep the revision pinned until SIGTERM (pre-cache pods)."),
    ] = False,
    gc_interval_s: Annotated[float, typer.Option("--gc-interval-s", min=1.0)] = 600.0,
    compile_key: Annotated[
        str | None,
        typer.Option(
            "--compile-key",
            help="<model-dir>/<config-key>: create that compile-cache key directory under the node root "
            "first (pre-cache pods, before serving pods mount it).",
        ),
    ] = None,
    retry_base_s: Annotated[float, typer.Option("--retry-base-s", min=0.0, hidden=True)] = 1.0,
    retries: Annotated[int, typer.Option("--retries", min=1, help="Attempts per transient failure.")] = 6,
    progress_interval_s: Annotated[float, typer.Option("--progress-interval-s", min=0.0)] = 5.0,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
) -> None:
    """Download a model revision into DEST, resuming and verifying; a no-op when already complete."""
    token = None
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip() or None
        except OSError as error:
            fail(f"{token_file}: cannot read the token: {error}")
    budget_bytes = int(budget_gib * GIB) if budget_gib is not None else None
    options = FetchOptions(
        revision=revision,
        token=token,
        credentials_dir=credentials_dir,
        allow_patterns=tuple(allow_pattern) if allow_pattern else DEFAULT_ALLOW_PATTERNS,
        parallel=parallel,
        retry=RetryPolicy(attempts=retries, base_s=retry_base_s),
        budget_bytes=budget_bytes,
        node_root=node_root,
        progress_interval_s=progress_interval_s,
    )
    if compile_key is not None:
        try:
            compile_store.ensure_key_dir(node_root or dest.absolute().parent, compile_key)
        except CacheError as error:
            _failed(error)
        except OSError as error:
            _failed(WriteFailed(f"compile-cache key {compile_key}: {error.strerror}"))
    try:
        result: FetchResult = fetch(source, dest, options, log=_log)
    except CacheError as error:
        _failed(error)
    except Exception as error:  # a bug: still one line with a reason, never a traceback
        _failed(CacheError(f"unexpected {type(error).__name__}: {error}"))
    summary = _summary(result.manifest, result.revision_dir) | {
        "reused": result.reused,
        "bytesTransferred": result.bytes_transferred,
        "seconds": round(result.seconds, 3),
        "warning": result.warning,
    }
    if output is OutputFormat.table:
        state = "already complete" if result.reused else f"fetched {result.bytes_transferred / GIB:.2f} GiB"
        typer.echo(
            f"{source}@{revision}: {state}; revision {result.manifest.revision_id}, "
            f"{len(result.manifest.files)} files, {result.manifest.total_bytes / GIB:.2f} GiB "
            f"in {result.revision_dir}"
        )
    else:
        typer.echo(json.dumps(summary, indent=2))
    if hold:
        try:
            _hold([(dest.absolute(), result.manifest.revision_id)], budget_bytes, gc_interval_s)
        except CacheError as error:
            _failed(error)


def _verify_once(dest: Path, revision: str | None, deep: bool) -> list[tuple[Manifest, Path]]:
    layout = store.layout_for(dest)
    if revision is not None:
        revision_id = store.resolve_ref(dest, revision)
        if revision_id is None:
            raise CacheMissing(f"{dest}: revision {revision!r} is not cached on this node")
        return [(store.verify_revision(dest, revision_id, deep), Path(str(layout.revision(revision_id))))]
    revisions = Path(str(layout.revisions))
    found = sorted(p.name for p in revisions.iterdir() if p.is_dir()) if revisions.is_dir() else []
    if not found:
        raise CacheMissing(f"{dest}: no cached revision")
    return [(store.verify_revision(dest, rid, deep), Path(str(layout.revision(rid)))) for rid in found]


@cache_app.command("verify")
def verify_command(
    *,
    dest: Annotated[Path, typer.Option("--dest", help="The model's cache directory.")],
    revision: Annotated[
        str | None,
        typer.Option("--revision", help="Ref or revision to check; default: every cached revision."),
    ] = None,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also re-hash every file against its checksum.")
    ] = False,
    wait_s: Annotated[
        float,
        typer.Option("--wait-s", min=0.0, help="Wait up to this long for a missing revision to appear."),
    ] = 0.0,
    poll_s: Annotated[float, typer.Option("--poll-s", min=0.1)] = 5.0,
    hint: Annotated[
        str | None, typer.Option("--hint", help="Extra text for the waiting message (who fetches it).")
    ] = None,
    pin: Annotated[
        Path | None,
        typer.Option(
            "--pin",
            help="Afterwards make this link point at the verified revision (serving pods load and "
            "hold the link, so a ref that moves later changes nothing they use). Needs --revision.",
        ),
    ] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
) -> None:
    """Check a cache against its marker (files, sizes, safetensors headers; --deep: checksums)."""
    if pin is not None and revision is None:
        fail("--pin needs --revision: a pin names exactly one revision")
    deadline = time.monotonic() + wait_s
    told = 0.0
    while True:
        try:
            results = _verify_once(dest, revision, deep)
            break
        except CacheMissing as error:
            now = time.monotonic()
            if now >= deadline:
                if hint:
                    error.message += f" ({hint})"
                _failed(error)
            if now - told >= 60.0 or told == 0.0:
                _log(f"waiting for the weights: {error.message}" + (f" ({hint})" if hint else ""))
                told = now
            time.sleep(min(poll_s, max(deadline - now, 0.0)))
        except CacheError as error:
            _failed(error)
        except Exception as error:  # a bug: still one line with a reason, never a traceback
            _failed(CacheError(f"unexpected {type(error).__name__}: {error}"))
    if pin is not None:
        ((manifest, _path),) = results
        try:
            store.write_pin(pin, dest, manifest.revision_id)
        except OSError as error:
            _failed(CacheError(f"{pin}: cannot write the pin: {error.strerror}"))
    if output is OutputFormat.table:
        for manifest, path in results:
            typer.echo(
                f"{path}: ok ({manifest.ref} → {manifest.revision_id}, {len(manifest.files)} files, "
                f"{manifest.total_bytes / GIB:.2f} GiB{', checksums re-verified' if deep else ''})"
            )
    else:
        typer.echo(json.dumps([_summary(m, p) for m, p in results], indent=2))


@cache_app.command("gc")
def gc_command(
    root: Annotated[Path, typer.Option("--root", help="The node's cache root (every model).")],
    budget_gib: Annotated[float, typer.Option("--budget-gib", min=0.0, help="Size budget for the root.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print what would be evicted.")] = False,
) -> None:
    """Evict least-recently-used revisions nobody holds until ROOT fits the budget."""
    budget_bytes = int(budget_gib * GIB)
    if dry_run:
        from inferfleet.caching.precache.gc import plan_gc

        plan = plan_gc(store.scan_all(root), budget_bytes)
        for victim in plan.evict:
            typer.echo(
                f"would evict {victim.model_key}@{victim.revision_id} ({victim.size_bytes / GIB:.2f} GiB)"
            )
        typer.echo(plan.summary())
        return
    plan = store.collect_garbage(root, budget_bytes, _log)
    typer.echo(plan.summary())


def _probe(
    source: str, revision: str, access: Any, need_parameters: bool, limits: Any
) -> probe_result.ProbeResult:
    from inferfleet.caching.fetcher.modelconfig import bounded_read

    try:
        model = bounded_read(source, revision, access, need_parameters=need_parameters, limits=limits)
    except CacheError as error:
        return probe_result.failure(error.reason, error.message)
    return probe_result.ProbeResult(
        ok=True,
        reason="Resolved",
        config=model.config,
        # Six significant digits: the planner's arithmetic needs no more, the message is short.
        parameters_billion=float(f"{model.parameters_billion:.6g}") if need_parameters else None,
        revision=model.revision,
    )


@cache_app.command("probe")
def probe_command(
    *,
    source: Annotated[str, typer.Option("--source", help="hf://ORG/REPO, s3://BUCKET/PREFIX or gs://…")],
    revision: Annotated[
        str, typer.Option("--revision", help="Branch, tag or commit (hf); a label elsewhere.")
    ] = DEFAULT_REF,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="File holding the hub token.")
    ] = None,
    credentials_dir: Annotated[
        Path | None,
        typer.Option("--credentials-dir", help="Mounted Secret with AWS_* files (s3:// sources)."),
    ] = None,
    deadline_s: Annotated[
        float, typer.Option("--deadline-s", min=1.0, max=3600.0, help="Total deadline for the whole read.")
    ] = 60.0,
    no_parameters: Annotated[
        bool, typer.Option("--no-parameters", help="Skip the parameter count (spec gives parametersBillion).")
    ] = False,
    max_response_mib: Annotated[
        float,
        typer.Option("--max-response-mib", min=0.01, help="Most bytes of one response, errors included."),
    ] = probe_result.MAX_RESPONSE_BYTES / 2**20,
    max_total_mib: Annotated[
        float, typer.Option("--max-total-mib", min=0.01, help="Most bytes received in all.")
    ] = probe_result.MAX_TOTAL_BYTES / 2**20,
    max_pages: Annotated[int, typer.Option("--max-pages", min=1, help="Most listing pages.")] = (
        probe_result.MAX_LISTING_PAGES
    ),
    max_files: Annotated[int, typer.Option("--max-files", min=1, help="Most files listed.")] = (
        probe_result.MAX_LISTING_FILES
    ),
    ambient: Annotated[
        bool,
        typer.Option(
            "--ambient",
            help="Also use this machine's own credentials (HF_TOKEN, the AWS and Google default chains); "
            "a probe pod never does.",
        ),
    ] = False,
    termination_log: Annotated[
        Path | None,
        typer.Option(
            "--termination-log",
            help=f"Where the result goes besides stdout (default {DEFAULT_TERMINATION_LOG} if it exists).",
        ),
    ] = None,
) -> None:
    """Read what the planner needs (config.json, the parameter count from safetensors headers)
    within a deadline and caps; print one JSON result that fits a termination message."""
    from inferfleet.caching.fetcher.modelconfig import Access, ReadLimits

    started = time.monotonic()
    result: probe_result.ProbeResult | None = None
    token = None
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip() or None
        except OSError as error:
            result = probe_result.failure(
                "BadCredentials", f"{token_file}: cannot read the token (is the key in the Secret?): {error}"
            )
    key = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") if source.startswith("gs://") else None
    access = Access(
        token=token,
        credentials_dir=credentials_dir,
        key_file=Path(key) if key else None,
        ambient=ambient,
    )
    limits = ReadLimits(
        deadline_s=deadline_s,
        max_response_bytes=int(max_response_mib * 2**20),
        max_total_bytes=int(max_total_mib * 2**20),
        max_pages=max_pages,
        max_files=max_files,
    )
    if result is None:
        _log(f"reading config.json from {source}@{revision} (deadline {deadline_s:g} s)")
        try:
            result = _probe(source, revision, access, not no_parameters, limits)
        except Exception as error:  # a bug: still one result with a reason, never a traceback
            result = probe_result.failure("CacheError", f"unexpected {type(error).__name__}: {error}")
    text = probe_result.encode_result(result)
    _write_result(text, termination_log)
    verdict = "read" if result.ok else f"{result.reason}: {result.message}"
    peak = _peak_rss_mib()
    memory = f", peak RSS {peak:.1f} MiB" if peak is not None else ""
    _log(f"{verdict} ({time.monotonic() - started:.1f} s, result {len(text)} bytes{memory})")
    code = 0 if result.ok else EXIT_FAILED
    if threading.active_count() > 1:
        # A read left behind at the deadline may sit in a blocking call: do not wait for it.
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


@cache_app.command("hold")
def hold_command(
    *,
    dest: Annotated[
        list[Path] | None,
        typer.Option("--dest", help="A model's cache directory (repeatable; may be read-only)."),
    ] = None,
    revision: Annotated[
        list[str] | None,
        typer.Option("--revision", help="Ref served, one per --dest (default main)."),
    ] = None,
    pinned: Annotated[
        list[Path] | None,
        typer.Option(
            "--pinned",
            help="A link `verify --pin` made (repeatable): hold exactly the revision it names, "
            "wherever the ref points now (serving pods).",
        ),
    ] = None,
    compile_store_dir: Annotated[
        Path | None,
        typer.Option(
            "--compile-store",
            help="The tier's compile-cache key directory: after a first start, publish the engine's "
            "caches there for the first --pinned revision.",
        ),
    ] = None,
    compile_from: Annotated[
        Path | None, typer.Option("--compile-from", help="The engine's cache home (what it compiled into).")
    ] = None,
    compile_dir: Annotated[
        list[str] | None,
        typer.Option("--compile-dir", help="A directory of --compile-from to keep (repeatable)."),
    ] = None,
    engine_url: Annotated[
        str, typer.Option("--engine-url", help="Publish once this answers 200 (the engine's /health).")
    ] = "http://127.0.0.1:8000/health",
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir", help="Pod-local directory: the readiness file, and whether a publish ran."
        ),
    ] = None,
) -> None:
    """Pin cached revisions while this process runs (sidecar of serving pods); with
    --compile-store, publish a first start's compile caches before saying ready."""
    dests = list(dest or [])
    revisions = list(revision or [])
    if revisions and len(revisions) != len(dests):
        fail("give one --revision per --dest (or none, meaning main for all)")
    if not dests and not pinned:
        fail("give --pinned links or --dest directories to hold")
    pins: list[tuple[Path, str]] = []
    for link in pinned or []:
        try:
            pins.append(store.read_pin(link))
        except CacheError as error:
            _failed(error)
    for index, path in enumerate(dests):
        ref = revisions[index] if revisions else DEFAULT_REF
        revision_id = store.resolve_ref(path, ref)
        if revision_id is None:
            _failed(CacheMissing(f"{path}: revision {ref!r} is not cached on this node"))
        pins.append((path.absolute(), revision_id))
    publisher = None
    if compile_store_dir is not None:
        if compile_from is None or state_dir is None or not pins:
            fail("--compile-store needs --compile-from, --state-dir and a --pinned revision")
        publisher = CompilePublisher(
            compile_store_dir, compile_from, list(compile_dir or []), engine_url, state_dir
        )
    try:
        _hold(pins, None, 3600.0, publisher)
    except CacheError as error:
        _failed(error)


@cache_app.command("compile-restore")
def compile_restore_command(
    *,
    pinned: Annotated[
        Path, typer.Option("--pinned", help="The model's pin link (what `verify --pin` made).")
    ],
    store_dir: Annotated[Path, typer.Option("--store", help="The tier's compile-cache key directory.")],
    key: Annotated[str, typer.Option("--key", help="<model-dir>/<config-key>, reported back.")],
    into: Annotated[Path, typer.Option("--into", help="The engine's cache home (pod-local).")],
    dirs: Annotated[list[str], typer.Option("--dir", help="A directory of the entry to copy (repeatable).")],
) -> None:
    """Copy the node's compile cache for the pinned revision into the engine's cache home;
    print (and write as the termination message) whether it was warm or a first start."""
    try:
        _model_dir, revision_id = store.read_pin(pinned)
    except CacheError as error:
        _failed(error)
    restored = compile_store.restore(store_dir, revision_id, into, dirs)
    line = compile_cache.encode_restore(
        compile_cache.Restore(restored.warm, key, revision_id, restored.size_bytes)
    )
    _log(f"compile cache {key}@{revision_id}: {'warm' if restored.warm else 'first start'} ({restored.why})")
    _termination_log(line)
    typer.echo(line)


@cache_app.command("volumes")
def volumes_command(
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The namespace (owner) to serve.")],
    node_path: Annotated[
        str | None,
        typer.Option("--node-path", help="Node cache root (default: the operator's cache.nodePath setting)."),
    ] = None,
    namespace_uid: Annotated[
        str | None,
        typer.Option(
            "--namespace-uid",
            help="The namespace's uid (kubectl get ns NAME -o jsonpath='{.metadata.uid}'): a re-created "
            "namespace of the same name then gets a new tree. Without it, the namespace alone names it.",
        ),
    ] = None,
) -> None:
    """Print the PersistentVolume and claim that give NAMESPACE its own tree of the node cache
    (what the operator creates itself unless its settings say cache_volumes=preProvisioned)."""
    import yaml

    from inferfleet.api.host_paths import unsafe_reason
    from inferfleet.caching.precache.volumes import NodeCacheVolume
    from inferfleet.config import OperatorSettings, SettingsInvalid

    if re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace) is None:
        fail(f"--namespace {namespace!r} is not a namespace name (a DNS label)")
    try:
        settings = OperatorSettings.from_env()
    except SettingsInvalid as error:
        fail(str(error))
    root = node_path or settings.cache_node_path
    reason = unsafe_reason(root)
    if reason is not None:
        fail(f"--node-path {root!r}: {reason}")
    wanted = NodeCacheVolume(
        namespace=namespace,
        namespace_uid=namespace_uid,
        node_path=root,
        default_node_path=settings.cache_node_path,
        capacity_gib=settings.cache_budget_gib,
    )
    typer.echo(yaml.safe_dump_all(wanted.objects(), sort_keys=False), nl=False)


__all__ = ["EXIT_FAILED", "EXIT_USAGE", "cache_app"]
