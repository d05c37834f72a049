"""README.md is the front page: short, the two set-up commands first, every link inside
the repository resolving, and its quickstart the one docs/getting-started/quickstart.md
runs (the e2e tier runs that page's commands: tests/e2e/test_quickstart.py)."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
QUICKSTART = REPO_ROOT / "docs" / "getting-started" / "quickstart.md"
COMMANDS = [
    "./hack/demo.sh      # install, then validate, plan, render and simulate a bundled example (no cluster)",
    "./hack/test.sh      # install what the tests need, lint, type-check, run unit, integration and e2e"
    " tests",
]


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_readme_is_a_front_page() -> None:
    assert len(readme().splitlines()) <= 300


def test_the_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"```\w*\n(.*?)```", readme(), re.S)
    assert first_block is not None
    assert first_block.group(1).splitlines() == COMMANDS


def test_every_relative_link_of_the_readme_resolves() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme()):
        if "://" in target:
            continue
        assert (REPO_ROOT / target).exists(), target


def test_the_readme_quickstart_is_the_one_the_e2e_tier_runs() -> None:
    text = readme()
    section = text[text.index("## Quickstart") :]
    block = section[section.index("```sh\n") + len("```sh\n") :]
    block = block[: block.index("\n```")]
    page = QUICKSTART.read_text(encoding="utf-8")
    commands = [line.split("  #")[0].strip().removesuffix("&").strip() for line in block.splitlines()]
    checked = [c for c in commands if c.startswith(("kubectl ", ".venv/bin/", "./hack/"))]
    assert len(checked) >= 6
    for command in checked:
        assert command in page, command
    spec = block[block.index("<<'EOF'\n") : block.index("\nEOF") + 4]
    assert spec in page
