"""Text a tenant controls, as status and Events hold it: escaped, bounded, readable.

An attacker picks the string: any code point (controls, bidi overrides, lone surrogates,
line separators), any length. Whatever it is, what the operator writes must hold no
character that reorders or hides text, must stay within its field's cap (the whole
status within its budget), must say that something was cut, and must still let a
reader see what was there.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfleet.api import safe_text

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# What must never reach a terminal raw: controls, format (bidi) characters, surrogates,
# line/paragraph separators.
FORBIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ESCAPE = re.compile(r"\\(n|r|t|u[0-9a-f]{4}|U[0-9a-f]{8})")


def readable(text: str) -> str:
    """What a reader recovers from the escapes."""
    short = {"n": "\n", "r": "\r", "t": "\t"}
    return ESCAPE.sub(lambda m: short.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), text)


def raw_characters(value: Any) -> set[str]:
    """Every forbidden character anywhere in a JSON-shaped value."""
    if isinstance(value, str):
        return {c for c in value if unicodedata.category(c) in FORBIDDEN}
    if isinstance(value, dict):
        return set().union(*(raw_characters(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(raw_characters(v) for v in value)) if value else set()
    return set()


hostile_text = st.text(
    alphabet=st.one_of(st.characters(), st.sampled_from(list(BIDI + "\n\r\t\x1b\u2028\u2029\ufeff\u200b"))),
    max_size=400,
)


@PROPERTY
@given(hostile_text, st.integers(64, 4096))
def test_any_text_comes_out_bounded_clean_and_idempotent(text: str, cap: int) -> None:
    shown = safe_text.bounded(text, cap)
    assert len(shown) <= cap
    assert not raw_characters(shown)
    assert safe_text.bounded(shown, cap) == shown  # read back and written again: unchanged


@PROPERTY
@given(hostile_text.filter(lambda t: "\\" not in t))
def test_escaping_is_reversible_enough_to_read(text: str) -> None:
    assert readable(safe_text.escape(text)) == text


def test_each_bidi_control_is_written_visibly() -> None:
    for char in BIDI:
        assert safe_text.escape(f"a{char}b") == f"a\\u{ord(char):04x}b"
    assert safe_text.escape("GPU\n  Degraded: False") == "GPU\\n  Degraded: False"
    assert safe_text.escape("tag\U000e0041") == "tag\\U000e0041"


def test_what_the_operator_writes_itself_is_left_as_it_is() -> None:
    for line in ("8.03B dense GQA (32 q / 8 kv heads); 48 GiB × 2", "l4: 1/2 ready", "über-GPU 80 GB"):
        assert safe_text.bounded(line, 1024) == line


@PROPERTY
@given(st.text(min_size=1, max_size=50).filter(lambda t: "\\" not in t), st.integers(2_000, 3_000_000))
def test_a_cut_says_how_much_was_cut(head: str, length: int) -> None:
    text = (head * (length // len(head) + 1))[:length]
    shown = safe_text.bounded(text, 1024)
    assert len(shown) <= 1024
    found = re.search(r"…\[(\d+) more characters cut\]$", shown)
    assert found is not None
    kept = len(readable(shown[: found.start()]))
    assert kept + int(found.group(1)) == length


def _tier(reason: str, gpu: str) -> dict[str, Any]:
    return {"name": "l4", "gpu": gpu, "feasible": True, "kvCacheTokens": 1000, "reasons": [reason, "fits"]}


def test_the_issue_s_megabyte_of_reasons_is_cut_to_a_line_and_says_so() -> None:
    """A tenant endpoint's error text made status.plan[].reasons 1.1 MB at 6e505f6."""
    error_body = "<html>" + "A" * 1_100_000 + "\u202e\n</html>"
    status = {
        "plan": [_tier(f"config.json could not be read: {error_body}", "L4")],
        "conditions": [
            {"type": "Degraded", "status": "True", "reason": "ApplyFailed", "message": error_body}
        ],
        "autoscalerState": {"version": 1, "tiers": {"l4": {"recentTargets": [[1.0, 2]]}}},
    }
    bounded = safe_text.bounded_status(status)
    assert safe_text.json_bytes(bounded) < 16 * 1024
    reason = bounded["plan"][0]["reasons"][0]
    assert len(reason) <= safe_text.PLAN_LINE_MAX_CHARS and "more characters cut" in reason
    assert bounded["plan"][0]["reasons"][1] == "fits" and bounded["plan"][0]["kvCacheTokens"] == 1000
    message = bounded["conditions"][0]["message"]
    assert len(message) <= safe_text.CONDITION_MESSAGE_MAX_CHARS and "more characters cut" in message
    assert bounded["autoscalerState"] == status["autoscalerState"]  # opaque state: untouched
    assert safe_text.bounded_status(bounded) == bounded


def test_a_status_over_budget_is_squeezed_under_it_keeping_its_shape() -> None:
    """Every field within its cap, yet too much of them: 16 tiers of 100 long reasons."""
    reasons = [f"line {i}: " + "x" * 2000 for i in range(150)]
    status = {"plan": [_tier("r", f"GPU-{i}") | {"reasons": reasons} for i in range(16)]}
    bounded = safe_text.bounded_status(status)
    assert safe_text.json_bytes(status) > 4 * 1024 * 1024
    assert safe_text.json_bytes(bounded) <= safe_text.STATUS_MAX_BYTES
    assert [tier["gpu"] for tier in bounded["plan"]] == [f"GPU-{i}" for i in range(16)]
    assert all(tier["reasons"][-1].endswith("more lines cut]") for tier in bounded["plan"])
    assert safe_text.bounded_status(bounded) == bounded


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | hostile_text,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@PROPERTY
@given(st.dictionaries(st.sampled_from(["plan", "conditions", "frontDoor", "cache", "x"]), json_values))
def test_any_status_comes_out_clean_and_idempotent(status: dict[str, Any]) -> None:
    bounded = safe_text.bounded_status(status)
    assert not raw_characters(bounded)
    assert safe_text.bounded_status(bounded) == bounded
    json.dumps(bounded, allow_nan=False)  # still JSON the API server accepts


@PROPERTY
@given(hostile_text, st.integers(0, 5000))
def test_an_event_message_fits_the_api_server_s_limit_in_bytes(text: str, repeat: int) -> None:
    message = safe_text.event_message(text * (repeat // max(1, len(text)) + 1))
    assert len(message.encode("utf-8", "replace")) <= 1024
    assert not raw_characters(message)
    assert safe_text.event_message("日本語のGPU " * 300).endswith("more characters cut]")
