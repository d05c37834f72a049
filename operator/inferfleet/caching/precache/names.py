"""Which names from a source may become files in a revision directory. Pure.

A hub listing, an S3 or GCS key and a file in a source tree all name a path the fetcher
creates below `.partial/<revision>/`. Each such name is untrusted: `../x`, `/etc/x`, a
NUL byte or a backslash would reach outside the revision (or the cache root, or another
model's finished revision), and two names that differ only by Unicode normalisation or
case are one file on filesystems that fold them. The fetch is refused as a whole
(`UnsafeSource`) when any name it would write (the listing's selected files) is not a
plain relative path of safe segments:

- segments separated by '/', none empty, '.' or '..', none longer than NAME_MAX bytes;
- no control character (NUL included) and no backslash anywhere;
- not under the marker directory (`.inferfleet/`), not ending in `.part` (the fetcher's
  own in-progress suffix), and no name both a file and a directory of another name;
- no two names equal after NFC normalisation and case folding.

Revision ids become one directory name: `layout.safe_revision_id` checks them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from inferfleet.caching.precache.fetch_errors import UnsafeSource
from inferfleet.caching.precache.layout import MARKER_DIR, PART_SUFFIX

NAME_MAX_BYTES: Final = 255
PATH_MAX_BYTES: Final = 4096 - 512  # room for the cache root and .partial/<revision>/
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def name_problem(name: str) -> str | None:
    """Why one listed name cannot become a file in a revision directory, or None."""
    if not name:
        return "an empty name"
    if _CONTROL.search(name):
        return "a control character (NUL included) in the name"
    if "\\" in name:
        return "a backslash in the name"
    if name.startswith("/"):
        return "an absolute name"
    if len(name.encode("utf-8", "surrogatepass")) > PATH_MAX_BYTES:
        return f"a name longer than {PATH_MAX_BYTES} bytes"
    segments = name.split("/")
    for segment in segments:
        if segment in {"", ".", ".."}:
            return f"a {segment or 'empty'!r} path segment" if segment else "an empty path segment ('//')"
        if len(segment.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES:
            return f"a path segment longer than {NAME_MAX_BYTES} bytes"
    if segments[0] == MARKER_DIR:
        return f"a name under {MARKER_DIR}/, where the cache keeps its marker"
    if name.endswith(PART_SUFFIX):
        return f"a name ending in {PART_SUFFIX}, the fetcher's in-progress suffix"
    return None


def fold(name: str) -> str:
    """The form two names share when a filesystem would treat them as one."""
    return unicodedata.normalize("NFC", name).casefold()


def listing_problems(names: Iterable[str]) -> list[str]:
    """Every reason a listing cannot be written as is, each naming the name (repr'd)."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    files: set[str] = set()
    for name in names:
        problem = name_problem(name)
        if problem is not None:
            problems.append(f"{name!r}: {problem}")
            continue
        key = fold(name)
        if key in seen and seen[key] != name:
            problems.append(f"{name!r} and {seen[key]!r} differ only by case or Unicode normalisation")
        elif key in seen:
            problems.append(f"{name!r} is listed twice")
        seen[key] = name
        files.add(key)
    for key in files:
        parts = key.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in files:
                outer = seen["/".join(parts[:depth])]
                problems.append(f"{seen[key]!r} lies inside {outer!r}, which is a file")
                break
    return problems


def check_listing(what: str, names: Iterable[str]) -> None:
    """Raise UnsafeSource naming the first few bad names of a listing."""
    problems = listing_problems(names)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; … {len(problems) - 3} more" if len(problems) > 3 else "")
        raise UnsafeSource(f"{what}: the listing holds names that cannot be written safely: {shown}")
