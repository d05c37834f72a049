"""YAML from users: alias bombs, deep nesting and duplicate keys are refused before expansion."""

from __future__ import annotations

import time

import pytest
import yaml

from inferfleet.api import SpecInvalid, load_all
from inferfleet.api.yaml_input import MAX_DEPTH, load_documents
from tests.conftest import example_paths
from tests.unit.api.samples import base_spec, document


def alias_bomb(levels: int = 9) -> str:
    """The classic "billion laughs": each level names the previous one ten times."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        refs = ",".join(f"*a{level - 1}" for _ in range(10))
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def spec_text_with(affinity_yaml: str) -> str:
    text = yaml.safe_dump(document(base_spec()), sort_keys=False)
    return text.replace("  - name: l4\n", "  - name: l4\n    affinity:\n" + affinity_yaml, 1)


def test_alias_bomb_in_affinity_is_refused_quickly_with_a_reason() -> None:
    bomb = alias_bomb()
    text = spec_text_with("".join(f"      {line}\n" for line in bomb.splitlines()))
    assert len(text.encode()) < 4096  # a small file ...
    started = time.perf_counter()
    with pytest.raises(SpecInvalid) as caught:
        load_all(text, "bomb.yaml")
    assert time.perf_counter() - started < 2.0  # ... refused before anything is expanded
    assert "aliases are expanded" in str(caught.value)


def test_a_thousand_levels_of_nesting_is_a_clear_error_not_a_recursion_error() -> None:
    for deep in ("[" * 1000 + "]" * 1000, "a:\n" + "".join("  " * i + "- b:\n" for i in range(1, 1000))):
        with pytest.raises(SpecInvalid) as caught:
            load_all(deep, "deep.yaml")
        assert f"nested deeper than {MAX_DEPTH} levels" in str(caught.value)


def test_duplicate_keys_are_refused_with_their_path_and_lines() -> None:
    text = yaml.safe_dump(document(base_spec()), sort_keys=False)
    text = text.replace("    minReplicas: 1\n", "    minReplicas: 1\n    minReplicas: 3\n", 1)
    with pytest.raises(SpecInvalid) as caught:
        load_all(text, "dup.yaml")
    message = str(caught.value)
    assert "spec.tiers[0].minReplicas: key repeated at line" in message
    assert "first at line" in message


def test_anchors_and_merge_keys_used_sensibly_still_load() -> None:
    text = """
base: &base {minReplicas: 1, maxReplicas: 4}
tiers:
  - <<: *base
    name: l4
    maxReplicas: 8
  - <<: *base
    name: a100
"""
    (loaded,) = load_documents(text)
    assert loaded["tiers"][0] == {"minReplicas": 1, "maxReplicas": 8, "name": "l4"}
    assert loaded["tiers"][1]["maxReplicas"] == 4


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.name)
def test_every_example_loads_as_safe_load_does(path: object) -> None:
    text = path.read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert list(load_documents(text)) == list(yaml.safe_load_all(text))
