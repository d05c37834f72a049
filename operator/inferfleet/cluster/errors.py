"""What can go wrong when talking to the API server, sorted by what to do about it.

Two kinds matter to callers: transient errors (conflicts, throttling, an API server
that is briefly away) are retried with backoff; permanent ones (the request itself is
refused) become a status condition and are not retried in a hot loop.
"""

from __future__ import annotations


class ApiError(Exception):
    """A failed API call; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TransientApiError(ApiError):
    """Worth retrying unchanged after a delay: 409, 429, 5xx, connection errors."""


class Conflict(TransientApiError):
    """409: the object changed since it was read (resourceVersion) or a field conflict."""


class AlreadyExists(Conflict):
    """409 on a create: an object of that name exists (whoever made it)."""


class Replaced(Conflict):
    """The object at that name is not the one the write was for: its uid differs from the
    uid the write carried (it was deleted and created again, by someone else).

    The API server answers 422 (metadata.uid is immutable) to an apply and 409 to a delete;
    both mean the same to a caller, who must look before doing anything to the newcomer.
    """


class PermanentApiError(ApiError):
    """Retrying the same request gives the same answer: 400, 403, 422."""


class KindNotServed(PermanentApiError):
    """The API server does not serve this kind, e.g. the LeaderWorkerSet CRD is missing."""


class NotFound(ApiError):
    """404 on one object."""


class NotPermitted(RuntimeError):
    """The code asked for an operation `access.PERMISSIONS` does not declare.

    A programming error, not an API answer: every call must be declared so that the
    RBAC rules derived from `API_CALLS` stay complete.
    """


def from_status(status: int | None, message: str) -> ApiError:
    """Map an HTTP status to the error class that says what to do about it."""
    if status == 404:
        return NotFound(message, status)
    if status == 409:
        return Conflict(message, status)
    if status is None or status == 429 or status >= 500:
        return TransientApiError(message, status)
    return PermanentApiError(message, status)
