"""Text the operator writes where people read it (status, Events, kopf's notices): escaped
and bounded. Pure.

A tenant controls much of what ends up there: names and inline GPU names from its spec,
the error text of an endpoint it named, the messages API servers and Gateway controllers
answer about its objects. Written as they are, a newline or a bidi override forges lines
and reorders words in `kubectl describe`, and one error body of a megabyte makes the
status write fail (etcd refuses a request over 1.5 MiB by default, the API server a body
over 3 MiB), after which nothing explains anything. So every string goes through here:

- control characters (C0, DEL, C1), Unicode format characters (category Cf: the bidi
  embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E,
  U+200F and U+061C, zero-width characters, the BOM, tags...), line and paragraph
  separators, surrogates, private-use and unassigned code points, and the few letters
  that render as nothing (Hangul fillers) are written visibly as `\\n`, `\\t`, `\\r`,
  `\\uXXXX` or `\\UXXXXXXXX`; a reader can still tell what was there. A backslash is left
  as it is, so escaping is idempotent: text read back from status and written again does
  not change (and grow) on every pass;
- every string is cut to the cap of its field, ending in a note of how much was cut;
- a whole status is kept under `STATUS_MAX_BYTES` by cutting its free text further.

The escaping is the same for the CLI's human output (`escape`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

# Categories written as escapes: Cc control, Cf format (bidi and invisible), Cs lone
# surrogates, Co private use, Cn unassigned (a later Unicode may make them format
# characters), Zl/Zp line and paragraph separators (line breaks in some terminals).
_ESCAPED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Letters and marks that render as nothing: the Hangul fillers and the combining
# grapheme joiner.
_INVISIBLE: Final = frozenset({"\u034f", "\u115f", "\u1160", "\u3164", "\uffa0"})
_ANY_INVISIBLE: Final = re.compile("[" + "".join(sorted(_INVISIBLE)) + "]")
_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# Caps, in characters after escaping. Each is large enough for what the operator writes
# there when nothing is wrong, so only hostile or runaway text is ever cut.
# A condition message: the Degraded message lists one line per object that failed or
# conflicts (each line at most FAILURE_LINE_MAX_CHARS); a quarter of metav1.Condition's
# own limit (32,768), so the CRD's schema never refuses it.
CONDITION_MESSAGE_MAX_CHARS: Final = 8192
# metav1.Condition's reason is at most 1,024 characters; ours are CamelCase words.
CONDITION_REASON_MAX_CHARS: Final = 1024
# One line about one object (an API server's refusal, a conflict): room for the object's
# name, the server's message (a field path and value) and what to do.
FAILURE_LINE_MAX_CHARS: Final = 1024
# One line of the plan's reasons or warnings: the planner's own lines are under 300
# characters; a line quoting a source's error text is the one that runs away.
PLAN_LINE_MAX_CHARS: Final = 1024
# Lines per plan reasons/warnings list (the planner writes some 10-30).
LIST_MAX_ITEMS: Final = 100
# A Gateway controller's route message, the autoscaler's decision reason: one sentence.
MESSAGE_MAX_CHARS: Final = 1024
# Any other string (names, GPU names, revisions): names are at most 253 characters in
# the spec, up to six times that once escaped.
DEFAULT_MAX_CHARS: Final = 1024
# An Event's message: the API server refuses a note over 1,024 bytes (NoteLengthLimit,
# pkg/apis/core/validation/events.go, on the UTF-8 length), and kopf cuts its own there.
EVENT_MESSAGE_MAX_CHARS: Final = 1024
EVENT_MESSAGE_MAX_BYTES: Final = 1024
# An Event's reason (events.k8s.io/v1 allows 128 characters).
EVENT_REASON_MAX_CHARS: Final = 128
# The whole status as JSON: a sixth of etcd's default request limit (1.5 MiB), which the
# spec, metadata and managedFields share. A normal status is a few KiB.
STATUS_MAX_BYTES: Final = 256 * 1024
# Caps tried in turn when a status is over STATUS_MAX_BYTES.
_SQUEEZE_CAPS: Final = (512, 256, 128, 64)

# Fields (paths of keys, list positions skipped) with a cap of their own.
_FIELD_CAPS: Final[Mapping[tuple[str, ...], int]] = {
    ("conditions", "message"): CONDITION_MESSAGE_MAX_CHARS,
    ("conditions", "reason"): CONDITION_REASON_MAX_CHARS,
    ("plan", "reasons"): PLAN_LINE_MAX_CHARS,
    ("plan", "warnings"): PLAN_LINE_MAX_CHARS,
    ("frontDoor", "routeMessage"): MESSAGE_MAX_CHARS,
    ("lastScalingDecision", "reason"): MESSAGE_MAX_CHARS,
}
# The autoscaler's policy state: numbers it reads back, opaque to everyone else.
_OPAQUE: Final = frozenset({"autoscalerState"})

_CUT_NOTE: Final = re.compile(r"…\[(\d+) more characters cut\]$")


def _escaped(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    if unicodedata.category(char) in _ESCAPED_CATEGORIES or char in _INVISIBLE:
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def escape(text: str) -> str:
    """`text` with every control, format and invisible character written as an escape."""
    # str.isprintable is False for every category escaped here (and for spaces other
    # than U+0020): the common case, clean text, costs one scan in C.
    if text.isprintable() and _ANY_INVISIBLE.search(text) is None:
        return text
    return "".join(_escaped(char) for char in text)


def _note(cut: int) -> str:
    return f"…[{cut} more characters cut]"


def bounded(text: str, max_chars: int) -> str:
    """`text` escaped and at most `max_chars` long; cut text ends in a note saying how
    many characters (of the original) are missing. Idempotent."""
    if len(text) <= max_chars:
        shown = escape(text)
        if len(shown) <= max_chars:
            return shown
    earlier = 0
    found = _CUT_NOTE.search(text)
    if found is not None:  # cut before: count what that cut too, and cut once
        earlier = int(found.group(1))
        text = text[: found.start()]
    # Escaping never shortens, so nothing past max_chars of the original can show.
    budget = max(0, max_chars - len(_note(len(text) + earlier)))
    pieces: list[str] = []
    used = kept = 0
    for char in text[:max_chars]:
        piece = _escaped(char)
        if used + len(piece) > budget:
            break
        pieces.append(piece)
        used += len(piece)
        kept += 1
    return "".join(pieces) + _note(len(text) - kept + earlier)


def condition_message(text: str) -> str:
    return bounded(text, CONDITION_MESSAGE_MAX_CHARS)


def failure_line(text: str) -> str:
    return bounded(text, FAILURE_LINE_MAX_CHARS)


def event_message(text: str) -> str:
    """Bounded in characters and, as the API server counts, in UTF-8 bytes."""
    cap = EVENT_MESSAGE_MAX_CHARS
    shown = bounded(text, cap)
    while (size := len(shown.encode("utf-8", "replace"))) > EVENT_MESSAGE_MAX_BYTES:
        cap = max(64, cap * EVENT_MESSAGE_MAX_BYTES // size - 1)  # at most 4 bytes a character
        shown = bounded(text, cap)
    return shown


def event_reason(text: str) -> str:
    return bounded(text, EVENT_REASON_MAX_CHARS)


def _bounded_list(items: list[Any], path: tuple[str, ...], cap: int, max_items: int) -> list[Any]:
    if not all(isinstance(item, str) for item in items):
        return [_walk(item, path, cap, max_items) for item in items]
    field_cap = min(_FIELD_CAPS.get(path, DEFAULT_MAX_CHARS), cap)
    if len(items) <= max_items:
        return [bounded(item, field_cap) for item in items]
    kept = [bounded(item, field_cap) for item in items[: max_items - 1]]
    return [*kept, f"…[{len(items) - len(kept)} more lines cut]"]


def _walk(value: Any, path: tuple[str, ...], cap: int, max_items: int) -> Any:
    if isinstance(value, str):
        return bounded(value, min(_FIELD_CAPS.get(path, DEFAULT_MAX_CHARS), cap))
    if isinstance(value, Mapping):
        return {
            key: item if (not path and key in _OPAQUE) else _walk(item, (*path, str(key)), cap, max_items)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return _bounded_list(list(value), path, cap, max_items)
    return value


def json_bytes(value: Any) -> int:
    """Bytes of `value` as the API server stores it (compact JSON, UTF-8)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))


def bounded_status(status: Mapping[str, Any], max_bytes: int = STATUS_MAX_BYTES) -> dict[str, Any]:
    """A status (or a merge patch of one) with every string escaped and capped, and the
    whole at most `max_bytes` where cutting free text can get it there. Idempotent."""
    out: dict[str, Any] = _walk(status, (), DEFAULT_MAX_CHARS * 64, LIST_MAX_ITEMS)
    for cap in _SQUEEZE_CAPS:
        if json_bytes(out) <= max_bytes:
            break
        out = _walk(out, (), cap, max(4, cap // 8))
    return out
