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

A key given twice in one mapping is refused with the key named (:class:`YamlDuplicateKeyError`).
:func:`load_text` parses one value (a ``--set`` override) under the same caps and refuses the
YAML 1.1 readings a user does not expect (``010`` read as the octal number 8, ``2:30`` as the
sexagesimal number 150): write the number meant, or quote the text.

The same reader serves JSON (:func:`load_json`, :func:`loads_json`): a size cap, and a nesting
depth measured by an iterative scan *before* ``json.loads`` builds anything (a JSON document
100 000 levels deep is refused, never a ``RecursionError``). :func:`check_object` applies the
caps to a Python object handed to the API (shared references counted as often as they occur),
and :func:`bounded_repr` renders any value in bounded time and length.

Every failure is a :class:`YamlLimitError` or a ``yaml.YAMLError`` / ``OSError`` /
``UnicodeDecodeError`` / ``ValueError``; :func:`ilnrun.config.load_yaml` turns them into a
``ConfigError`` naming the file. No message renders the document's content.
"""

from __future__ import annotations

import json
import os
import re
import reprlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 1 << 20  # 1 MiB
MAX_DEPTH = 50
MAX_NODES = 100_000
MAX_ALIASES = 1_000


MAX_VALUE_BYTES = 64 * 1024  # one --set value


class YamlLimitError(Exception):
    """A YAML or JSON document beyond one of the caps (size, depth, aliases, expanded size)."""


class YamlDuplicateKeyError(YamlLimitError):
    """A mapping that gives one key twice (the second would silently win)."""


def key_text(key: Any, width: int = 40) -> str:
    """A key as text for a message: cut to ``width`` characters, non-printables escaped."""
    s = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(key)[: width + 1])
    return s if len(s) <= width else s[: width - 3] + "..."


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

    def construct_mapping(self, node: Any, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if (
                    not isinstance(key_node, ScalarNode)
                    or key_node.tag == "tag:yaml.org,2002:merge"
                ):
                    continue
                k = (key_node.tag, key_node.value)
                if k in seen:
                    line = key_node.start_mark.line + 1 if key_node.start_mark else "?"
                    raise YamlDuplicateKeyError(
                        f"the key {key_text(key_node.value)!r} is given twice in one mapping "
                        f"(line {line}); keep one"
                    )
                seen.add(k)
        return super().construct_mapping(node, deep=deep)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def read_capped(path: str | Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, refused beyond ``limit`` (checked before and
    while reading)."""
    p = Path(path)
    size = os.stat(p).st_size
    if size > limit:
        raise YamlLimitError(f"the file is {size:,} bytes; the limit is {limit:,}")
    with open(p, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise YamlLimitError(f"the file is larger than {limit:,} bytes")
    return data


def load_bounded(path: str | Path) -> Any:
    """The YAML document in ``path`` (one document, safe types only) under the caps above."""
    return _load(read_capped(path).decode("utf-8"))


def _load(text: str, strict_numbers: bool = False) -> Any:
    loader = BoundedSafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if strict_numbers:
            _refuse_yaml11_numbers(node)
        try:
            return loader.construct_document(node)
        except ValueError as exc:  # an integer of more digits than Python converts from text
            if "integer string conversion" not in str(exc):
                raise
            raise YamlLimitError(
                f"an integer of more than {sys.get_int_max_str_digits():,} digits"
            ) from None
    finally:
        loader.dispose()


# YAML 1.1 plain scalars that PyYAML reads as numbers a user rarely means
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")


def _refuse_yaml11_numbers(root: Node) -> None:
    """Refuse an unquoted ``010`` (octal: 8) or ``2:30`` (base 60: 150) anywhere in ``root``."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            if node.style is None and node.tag.endswith((":int", ":float")):
                text = node.value
                if _OCTAL.fullmatch(text):
                    kind = "an octal number"
                elif _SEXAGESIMAL.fullmatch(text):
                    kind = "a base-60 number"
                else:
                    continue
                value = yaml.safe_load(text)
                raise YamlLimitError(
                    f"{key_text(text)} would be read as {kind} ({value}) by YAML 1.1; "
                    f"write the number meant, or quote the text ('{key_text(text)}') for a string"
                )
        else:
            stack.extend(_children(node))


def load_text(text: str) -> Any:
    """One YAML value given as text (a ``--set`` override) under the caps above, YAML 1.1's
    octal and base-60 numbers refused."""
    if len(text) > MAX_VALUE_BYTES:
        raise YamlLimitError(
            f"the value is {len(text):,} characters; the limit is {MAX_VALUE_BYTES:,}"
        )
    return _load(text, strict_numbers=True)


# ---- JSON -----------------------------------------------------------------------------------

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_depth(data: bytes) -> int:
    """The bracket nesting depth of a JSON text, measured without parsing it (strings removed,
    then a running sum of ``[{`` minus ``]}``)."""
    bare = _JSON_STRING.sub(b"", data)
    if not bare:
        return 0
    steps = _OPEN[np.frombuffer(bare, np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def loads_json(data: bytes, limit: int = MAX_BYTES) -> Any:
    """A JSON document from ``data`` under the size and depth caps (``ValueError`` if not JSON)."""
    if len(data) > limit:
        raise YamlLimitError(f"the document is {len(data):,} bytes; the limit is {limit:,}")
    if json_depth(data) > MAX_DEPTH:
        raise YamlLimitError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise YamlLimitError(f"nesting deeper than {MAX_DEPTH} levels") from None


def load_json(path: str | Path, limit: int = MAX_BYTES) -> Any:
    """The JSON document in the file ``path`` under the caps above."""
    return loads_json(read_capped(path, limit), limit)


# ---- Python objects -------------------------------------------------------------------------


def check_object(obj: Any) -> None:
    """Refuse a Python value (a config mapping given to the API) that nests deeper than
    :data:`MAX_DEPTH` or has more than :data:`MAX_NODES` values once shared references are
    counted as often as they occur (a cycle counts forever). Walks iteratively."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    count = 0
    while stack:
        v, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise YamlLimitError(
                f"the value expands to more than {MAX_NODES:,} values (shared or cyclic lists?)"
            )
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(v, dict):
            for k, x in v.items():
                stack.append((k, depth + 1))
                stack.append((x, depth + 1))
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, (str, bytes)) and len(v) > MAX_BYTES:
            raise YamlLimitError(f"a text of {len(v):,} characters; the limit is {MAX_BYTES:,}")


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 20
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 200


def bounded_repr(v: Any, width: int = 200) -> str:
    """``repr(v)`` in bounded time and length: at most 3 levels and 20 items per level, each
    text cut, then the whole cut to ``width`` characters."""
    try:
        s = _REPR.repr(v)
    except Exception:  # a foreign object whose repr fails
        s = f"<{type(v).__name__}>"
    return s if len(s) <= width else s[: width - 3] + "..."
