"""No comment, docstring or doc points at a file outside the repository.

A reader of the code or the docs has the repository and the public internet; paths to
the development machine's other folders (a notes tree beside the checkout, a home
directory) mean nothing to them, and neither do the section numbers and seed
numbers of documents that are not in it. Upstream sources are cited by their public
address, a paper or a datasheet by its title.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO_ROOT

SCANNED = ("operator", "hack", "tests", "docs", "charts", "manifests", "crds")
TOP_FILES = ("README.md", "pyproject.toml")
SKIPPED_PARTS = {"__pycache__", ".egg-info", ".venv", "node_modules"}
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".sh", ".txt", ".tpl", ".toml", ".j2", ".lua", ""}
# Built from parts so this file does not match itself.
SHARED = "sha" + "red"
SECTION = "\u00a7"  # the section sign
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + SHARED + r"\b",  # the notes folder beside the checkout
            r"(?<![\w.-])" + SHARED + r"/(reference|seeds|data|DESIGN)",
            r"\bseeds/\d",
            r"(?<![\w/.-])reference/(vllm|model-codebases)[\w-]*\.md",
            r"/wo" + r"rk/",
            "fie" + r"ld guide",
            SECTION + r"\s?\d",  # a section of a document the reader does not have
            r"(?<![-\w])[Ss]eed \d{3}\b",  # a numbered seed document
        ]
    )
)


def scanned_files() -> list[Path]:
    files = [REPO_ROOT / name for name in TOP_FILES]
    for top in SCANNED:
        for path in sorted((REPO_ROOT / top).rglob("*")):
            parts = set(path.relative_to(REPO_ROOT).parts)
            if (
                path.is_file()
                and path.suffix in TEXT_SUFFIXES
                and not parts & SKIPPED_PARTS
                and not any(part.endswith(".egg-info") for part in parts)
                and path.name != "go.sum"
            ):
                files.append(path)
    return files


def outside_paths(text: str) -> list[str]:
    return [match.group(0) for match in OUTSIDE.finditer(text)]


def test_the_pattern_catches_what_it_is_meant_to() -> None:
    assert outside_paths("see ../" + SHARED + "/data/traces/README.md")
    assert outside_paths("(" + SHARED + "/reference/vllm-kv-budget.md " + SECTION + "2)")
    assert outside_paths("the fie" + "ld guide's sizing algorithm")
    assert outside_paths("reference/" + "vllm-and-gpus.md " + SECTION + "1")
    # Section and seed numbers without a path, as three comments once had them.
    assert outside_paths("when spec.scaling.headroom is unset (se" + "ed 002 " + SECTION + "8.3:")
    assert outside_paths("on NVLink 2-9% (" + SECTION + "5.6).")
    assert outside_paths("(reference " + SECTION + "4b: out-of-tree plugins only)")
    assert outside_paths("Se" + "ed 004, chapter 2")
    assert not outside_paths("inferfleet simulate --seed 123 and a seed of 7")
    assert not outside_paths("see docs/reference/api.md and ../reference/settings.md")
    assert not outside_paths("allowedGateways: [" + SHARED + "/inference-gateway]")


def test_no_file_points_outside_the_repository() -> None:
    found = {}
    for path in scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits = outside_paths(text)
        if hits:
            found[str(path.relative_to(REPO_ROOT))] = hits
    assert found == {}
