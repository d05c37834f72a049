"""Reading YAML a user wrote, with limits checked before anything is expanded. Pure.

`yaml.safe_load` is safe from code execution but not from size: an alias names a node
that is already built, so a 2 KB file of nested aliases (the "billion laughs") is a
small object graph that every later step (validation, JSON, templates) expands into
gigabytes; a document nested a thousand levels deep overflows Python's stack in the
composer; and a key written twice silently keeps its last value. This loader refuses
all three with a message that names the line, before any value is constructed:

- nesting deeper than `MAX_DEPTH` levels, counted while composing (so the composer's
  own recursion stays far from Python's limit);
- more than `MAX_NODES` values in one document once every alias is expanded, counted
  on the composed node graph with each anchored node's size computed once;
- a key repeated in one mapping (merge keys `<<` may still be overridden, as YAML says).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

# The deepest field of an InferenceService (a tier's node affinity expression values)
# sits about 12 levels below the document; 64 leaves room for any real object.
MAX_DEPTH: Final = 64
# A real InferenceService has a few hundred values; a large inline config.json a few
# thousand. Past this many (after expanding aliases) a document is an attack or a mistake.
MAX_NODES: Final = 100_000
_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class YamlRejected(yaml.YAMLError):
    """The text is YAML but breaks one of the limits above."""


def _where(node: Node) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "unknown position"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts its depth and refuses to go deeper than MAX_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                mark = event.start_mark
                line = f"line {mark.line + 1}" if mark is not None else "somewhere"
                raise YamlRejected(f"nested deeper than {MAX_DEPTH} levels at {line}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _key_text(node: Node) -> str | None:
    return str(node.value) if isinstance(node, ScalarNode) else None


def _check_document(root: Node) -> None:
    """Duplicate keys, and the expanded size, of one composed document.

    Each node's expanded size is computed once (memoised by identity), so a node that
    many aliases name costs one visit however often it is named. The walk recurses at
    most MAX_DEPTH levels (the composer refused anything deeper)."""
    sizes: dict[int, int] = {}

    def size(node: Node, path: str) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, MappingNode):
            seen: dict[str, Node] = {}
            for key, value in node.value:
                text = _key_text(key)
                if text is not None and key.tag != _MERGE_TAG:
                    if text in seen:
                        raise YamlRejected(
                            f"{path + '.' if path else ''}{text}: key repeated at {_where(key)} "
                            f"(first at {_where(seen[text])}); YAML keeps only one of them"
                        )
                    seen[text] = key
                child = f"{path}.{text}" if path and text is not None else (text or path)
                total += size(key, path) + size(value, child)
                if total > MAX_NODES:
                    break
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                total += size(item, f"{path}[{index}]")
                if total > MAX_NODES:
                    break
        if total > MAX_NODES:
            raise YamlRejected(
                f"more than {MAX_NODES:,} values once aliases are expanded (at {_where(node)}); "
                "an alias bomb or a far larger document than an InferenceService needs"
            )
        sizes[id(node)] = total
        return total

    size(root, "")


def load_documents(text: str) -> Iterator[Any]:
    """Every document of a YAML (or JSON) text, each checked before it is constructed.

    Raises `yaml.YAMLError` (a `YamlRejected` for a broken limit) like `yaml.safe_load_all`."""
    loader = _BoundedLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_document(node)
            try:
                document = loader.construct_document(node)
            except (ValueError, TypeError, OverflowError) as error:
                # A scalar no Python value can hold (an integer of 5,000 digits, say).
                message = f"a value cannot be read ({error}) in the document at {_where(node)}"
                raise YamlRejected(message) from None
            yield document
    finally:
        loader.dispose()


def load_one(text: str) -> Any:
    """The single document of a text (None when empty); more than one is an error."""
    documents = list(load_documents(text))
    if len(documents) > 1:
        raise YamlRejected(f"expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None
