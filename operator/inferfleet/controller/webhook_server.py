"""The admission webhook's HTTP front: kopf's server, answering only what is ours. I/O.

kopf's `WebhookServer` routes `POST /<anything>` to its handlers, and a path naming no
handler runs none, which kopf answers with `allowed: true`; it reads any content type,
caps bodies at aiohttp's default of 1 MiB (an UPDATE review carries the object twice,
so objects of ~512 KiB were refused with 413), and turns a body nested too deeply for
`json.loads` into an HTTP 500. This subclass serves the same handlers but:

- answers 404 for a path that is not one of our handler ids (never "allowed");
- answers 415 unless the body is `application/json` (what the API server sends);
- accepts bodies up to `MAX_BODY_BYTES`, room for two objects of the API server's own
  3 MiB request limit, and answers 413 beyond it before reading it all;
- answers 400 for a body that is not a JSON AdmissionReview, instead of a 500.

What the handler decides is `controller.admission`'s business; its denials carry
field paths. Nothing here decides about InferenceServices.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from typing import Any, Final

import aiohttp.web
import kopf

logger = logging.getLogger(__name__)

# The API server refuses requests over 3 MiB; an UPDATE review holds old and new object.
MAX_BODY_BYTES: Final = 2 * 3 * 1024 * 1024 + 256 * 1024
_READ_BYTES: Final = 64 * 1024


class AdmissionServer(kopf.WebhookServer):
    """kopf's webhook server, restricted to our handler paths, JSON, and a size bound."""

    def __init__(self, *, handler_ids: Collection[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handler_ids = frozenset(handler_ids)

    async def _serve(self, fn: Any, request: aiohttp.web.Request) -> aiohttp.web.Response:  # type: ignore[override]
        webhook = request.match_info.get("id", "")
        if webhook not in self.handler_ids:
            raise aiohttp.web.HTTPNotFound(reason="no such admission webhook")
        if request.content_type != "application/json":
            raise aiohttp.web.HTTPUnsupportedMediaType(reason="an AdmissionReview is application/json")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise aiohttp.web.HTTPRequestEntityTooLarge(
                max_size=MAX_BODY_BYTES, actual_size=request.content_length
            )
        body = bytearray()
        while chunk := await request.content.read(_READ_BYTES):
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise aiohttp.web.HTTPRequestEntityTooLarge(max_size=MAX_BODY_BYTES, actual_size=len(body))
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as error:
            raise aiohttp.web.HTTPBadRequest(reason=f"not a JSON document: {type(error).__name__}") from None
        if not isinstance(data, dict) or not isinstance(data.get("request"), dict):
            raise aiohttp.web.HTTPBadRequest(reason="not an AdmissionReview")
        headers = dict(request.headers)
        sslpeer = request.transport.get_extra_info("peercert") if request.transport else None
        try:
            response = await fn(data, webhook=webhook, sslpeer=sslpeer, headers=headers)
        except aiohttp.web.HTTPException:
            raise
        except Exception as error:
            if _is_review_error(error):
                # kopf could not read the review: a field missing, of the wrong type, or
                # naming a resource we do not serve.
                reason = f"malformed AdmissionReview: {type(error).__name__}"
                raise aiohttp.web.HTTPBadRequest(reason=reason) from None
            logger.exception("admission webhook failed")
            raise aiohttp.web.HTTPInternalServerError(reason="admission webhook failed") from None
        return aiohttp.web.json_response(response)


def _is_review_error(error: Exception) -> bool:
    # kopf's WebhookError family lives in a private module; matched by name, not import.
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"WebhookError", "KeyError", "TypeError", "AttributeError"})
