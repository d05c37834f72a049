"""What the operator's log calls an error.

kopf logs every handler that raises at ERROR ("Webhook 'plan' failed permanently: ..."),
and a validating webhook denies an object by raising `kopf.AdmissionError`. A typo in a
user's spec is the webhook doing its job, not the operator failing: it is logged at
INFO as a denial. A handler that fails with any other exception is logged by kopf with
its traceback (`exc_info`) and stays an error.
"""

from __future__ import annotations

import logging

# kopf's per-object logger, which its admission server logs handler outcomes to.
KOPF_OBJECTS_LOGGER = "kopf.objects"


class AdmissionDenials(logging.Filter):
    """Turns kopf's ERROR record of a webhook's denial into an INFO `denied: ...`."""

    def __init__(self, webhook_ids: tuple[str, ...]) -> None:
        super().__init__()
        # kopf's own words: f"{handler} failed permanently: {error}", str(handler) being
        # "Webhook '<id>'" (kopf._core.actions.execution, kopf._core.intents.handlers).
        self.prefixes = tuple(f"Webhook {webhook_id!r} failed permanently: " for webhook_id in webhook_ids)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.ERROR or record.exc_info:
            return True
        message = record.getMessage()
        for prefix in self.prefixes:
            if message.startswith(prefix):
                record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
                record.msg, record.args = f"admission denied: {message.removeprefix(prefix)}", ()
        return True


def log_admission_denials_as_info(webhook_ids: tuple[str, ...]) -> None:
    """Install the filter once on kopf's per-object logger."""
    target = logging.getLogger(KOPF_OBJECTS_LOGGER)
    if not any(isinstance(existing, AdmissionDenials) for existing in target.filters):
        target.addFilter(AdmissionDenials(webhook_ids))
