"""Bounded YAML loading: a config file cannot exhaust memory, time or the stack.

:func:`load_bounded` reads a file with PyYAML's safe loader under three caps, each checked before
the cost is paid:

- the file size (:data:`MAX_BYTES`), checked before reading;
- the nesting depth (:data:`MAX_DEPTH`), checked while the document is composed (deeper
  documents would otherwise exhaust Python's recursion limit);
- the expanded size (:data:`MAX_NODES`): the number of nodes the document has once every alias
  is replaced by the node it refers to, computed node by node during composition (a "billion
  laughs" alias bomb of a few hundred bytes stands for billions of nodes and is refused at the
  first level that crosses the cap), plus a cap on the number of aliases (:data:`MAX_ALIASES`).

Every failure is a :class:`YamlLimitError` or a ``yaml.YAMLError`` / ``OSError`` /
``UnicodeDecodeError``; :func:`ilnrun.config.load_yaml` turns them into a ``ConfigError`` naming
the file. No message renders the document's content.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_BYTES = 1 << 20  # 1 MiB
MAX_DEPTH = 50
MAX_NODES = 100_000
MAX_ALIASES = 1_000


class YamlLimitError(Exception):
    """A YAML document beyond one of the caps (size, depth, aliases, expanded size)."""


class BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that enforces :data:`MAX_DEPTH`, :data:`MAX_ALIASES` and
    :data:`MAX_NODES` while composing the node graph (before any Python object is built)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes once aliases are expanded

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            self._aliases += 1
            target = self.anchors.get(self.peek_event().anchor)
            if target is not None and id(target) not in self._sizes:
                raise YamlLimitError("an alias (*name) refers to a node that contains it")
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(f"more than {MAX_ALIASES} aliases (*name)")
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlLimitError(f"nesting deeper than {MAX_DEPTH} levels")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = 1 + sum(self._sizes.get(id(child), 1) for child in _children(node))
        if size > MAX_NODES:
            raise YamlLimitError(
                f"the document expands to more than {MAX_NODES:,} values "
                "(aliases referring to aliases?)"
            )
        self._sizes[id(node)] = size
        return node


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_bounded(path: str | Path) -> Any:
    """The YAML document in ``path`` (one document, safe types only) under the caps above."""
    p = Path(path)
    size = os.stat(p).st_size
    if size > MAX_BYTES:
        raise YamlLimitError(f"the file is {size:,} bytes; the limit is {MAX_BYTES:,}")
    with open(p, "rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise YamlLimitError(f"the file is larger than {MAX_BYTES:,} bytes")
    text = data.decode("utf-8")
    loader = BoundedSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
