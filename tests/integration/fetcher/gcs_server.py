"""A loopback HTTP server speaking the part of the Cloud Storage JSON API that GcsSource uses.

google-cloud-storage sends every call to `STORAGE_EMULATOR_HOST` (anonymous credentials)
when that variable is set, so this is the real client against a fake bucket:

- `GET /storage/v1/b/<bucket>/o?prefix=&pageToken=`: the object listing, paged, with
  `size`, `generation`, and base64 `md5Hash` / big-endian `crc32c` as GCS publishes them
  (composite objects carry no md5Hash);
- `GET /download/storage/v1/b/<bucket>/o/<name>?alt=media[&generation=]` with Range;
- errors as GCS shapes them (`{"error": {"code", "message"}}`).

Deliberate corruption (served bytes differ from the listed checksums) and a per-request
log let the tests check checksum failures and resumes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


def _crc32c_b64(data: bytes) -> str:
    import google_crc32c

    value: Any = google_crc32c.value(data)
    return base64.b64encode(int(value).to_bytes(4, "big")).decode()


@dataclass
class GcsObject:
    data: bytes
    generation: int
    composite: bool = False  # composed objects publish crc32c only

    def resource(self, bucket: str, name: str) -> dict[str, Any]:
        item: dict[str, Any] = {
            "kind": "storage#object",
            "id": f"{bucket}/{name}/{self.generation}",
            "name": name,
            "bucket": bucket,
            "generation": str(self.generation),
            "metageneration": "1",
            "size": str(len(self.data)),
            "crc32c": _crc32c_b64(self.data),
            "contentType": "application/octet-stream",
        }
        if not self.composite:
            item["md5Hash"] = base64.b64encode(hashlib.md5(self.data).digest()).decode()
        return item


@dataclass
class GcsState:
    buckets: dict[str, dict[str, GcsObject]] = field(default_factory=dict)
    # name → bytes served instead of the stored object (checksum mismatch tests)
    corrupt: dict[str, bytes] = field(default_factory=dict)
    page_size: int = 3  # small, so listing exercises nextPageToken
    # (path, first byte requested or None, generation asked for or None)
    downloads: list[tuple[str, int | None, str | None]] = field(default_factory=list)
    # Calls this fake does not serve (e.g. a bucket metadata GET), as "METHOD path".
    unserved: list[str] = field(default_factory=list)
    # Private buckets: bucket → the service account (client_email) that may read it. A
    # key's JWT is exchanged at POST /token for "token-for-<client_email>" (OAuth's
    # service-account flow, signature unchecked); a request without that bearer is 401,
    # with another account's is 403.
    readers: dict[str, str] = field(default_factory=dict)
    # The Authorization header of every storage call ("" when none).
    authorizations: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _generation: int = 1_700_000_000_000_000

    def put(self, bucket: str, name: str, data: bytes, *, composite: bool = False) -> GcsObject:
        with self.lock:
            self._generation += 1
            obj = GcsObject(data, self._generation, composite)
            self.buckets.setdefault(bucket, {})[name] = obj
            return obj


class _Handler(BaseHTTPRequestHandler):
    server: _GcsServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _json(self, status: int, value: dict[str, Any]) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"code": status, "message": message, "errors": [{"message": message}]}})

    def do_POST(self) -> None:
        """The OAuth token endpoint a service-account key's `token_uri` names."""
        length = int(self.headers.get("Content-Length", "0"))
        form = parse_qs(self.rfile.read(length).decode())
        assertion = (form.get("assertion") or [""])[0]
        try:
            payload = assertion.split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError):
            self._json(400, {"error": "invalid_grant"})
            return
        self._json(
            200, {"access_token": f"token-for-{claims['iss']}", "expires_in": 3600, "token_type": "Bearer"}
        )

    def _authorized(self, bucket: str) -> bool:
        state = self.server.state
        header = self.headers.get("Authorization", "")
        with state.lock:
            state.authorizations.append(header)
            reader = state.readers.get(bucket)
        if reader is None:
            return True
        if not header:
            self._error(401, "Anonymous caller does not have storage.objects.list access.")
            return False
        if header != f"Bearer token-for-{reader}":
            self._error(403, f"{header.removeprefix('Bearer token-for-')} does not have access to {bucket}.")
            return False
        return True

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        bucket = unquote(path.split("/b/", 1)[1].split("/", 1)[0]) if "/b/" in path else ""
        if bucket and not self._authorized(bucket):
            return
        if path.startswith("/storage/v1/b/") and path.endswith("/o"):
            self._list(unquote(path[len("/storage/v1/b/") : -len("/o")]), query)
            return
        if path.startswith("/download/storage/v1/b/") and query.get("alt") == "media":
            bucket, _, name = path[len("/download/storage/v1/b/") :].partition("/o/")
            self._download(unquote(bucket), unquote(name), query)
            return
        with self.server.state.lock:
            self.server.state.unserved.append(f"GET {path}")
        self._error(404, f"no such API call: {path}")

    def _list(self, bucket: str, query: dict[str, str]) -> None:
        state = self.server.state
        with state.lock:
            objects = state.buckets.get(bucket)
            if objects is None:
                self._error(404, "The specified bucket does not exist.")
                return
            prefix = query.get("prefix", "")
            names = sorted(n for n in objects if n.startswith(prefix))
            start = int(query.get("pageToken", "0"))
            page = names[start : start + state.page_size]
            result: dict[str, Any] = {
                "kind": "storage#objects",
                "items": [objects[n].resource(bucket, n) for n in page],
            }
            if start + state.page_size < len(names):
                result["nextPageToken"] = str(start + state.page_size)
        self._json(200, result)

    def _download(self, bucket: str, name: str, query: dict[str, str]) -> None:
        state = self.server.state
        match = _RANGE.match(self.headers.get("Range", ""))
        start = int(match.group(1)) if match else None
        with state.lock:
            state.downloads.append((name, start, query.get("generation")))
            obj = state.buckets.get(bucket, {}).get(name)
            data = state.corrupt.get(name)
        if obj is None or (query.get("generation") and query["generation"] != str(obj.generation)):
            self._error(404, f"No such object: {bucket}/{name}")
            return
        body = data if data is not None else obj.data
        offset = start or 0
        if offset > len(body):
            self._error(416, "The requested range cannot be satisfied.")
            return
        self.send_response(206 if start is not None else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body) - offset))
        self.send_header("X-Goog-Generation", str(obj.generation))
        self.send_header("X-Goog-Stored-Content-Length", str(len(obj.data)))
        resource = obj.resource(bucket, name)
        hashes = [f"crc32c={resource['crc32c']}"]
        if "md5Hash" in resource:
            hashes.append(f"md5={resource['md5Hash']}")
        self.send_header("X-Goog-Hash", ",".join(hashes))
        if start is not None:
            self.send_header("Content-Range", f"bytes {offset}-{len(body) - 1}/{len(body)}")
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body[offset:])


class _GcsServer(ThreadingHTTPServer):
    daemon_threads = True
    state: GcsState


class GcsServer:
    """`with GcsServer() as gcs:`; `gcs.endpoint` goes into STORAGE_EMULATOR_HOST."""

    def __init__(self, state: GcsState | None = None) -> None:
        self.state = state or GcsState()
        self._server = _GcsServer(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> GcsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
