"""Declared parameters and the validation engine every spec uses.

A :class:`Param` is one config key: its type, default, range and documentation. Learners, feature
maps and datasets declare their parameters with it in their own modules; the config layer
(:mod:`ilnrun.config.schema`) validates a YAML mapping against those declarations. Every problem
is collected as ``(key path, message)``, so that all of them are reported together, each with the
key path and, for an unknown key or value, the closest valid one.
"""

from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass
from typing import Any

from .safe_yaml import bounded_repr


class ConfigError(Exception):
    """A config that cannot be run; ``problems`` is a list of ``(key path, message)``."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("\n".join(f"{p}: {m}" if p else m for p, m in problems))


class _Never:
    """Sentinel: a parameter that is never left out of a cell's key."""

    def __repr__(self) -> str:
        return "NEVER"


NEVER: Any = _Never()

# Values are echoed in error messages at most this long (a hostile value may be huge).
SHOW_CHARS = 60


def show(v: Any, width: int = SHOW_CHARS) -> str:
    """``repr(v)`` cut to ``width`` characters, rendered in bounded time: a list of more than 20
    items as its length; nested values at most 3 levels and 20 items deep, each cut
    (:func:`ilnrun.safe_yaml.bounded_repr`)."""
    if isinstance(v, (list, dict, tuple)) and len(v) > 20:
        return f"<{type(v).__name__} of {len(v)} items>"
    return bounded_repr(v, width)


def key_text(key: Any, width: int = 40) -> str:
    """A mapping key as it appears in a key path: its text, cut to ``width`` characters, with
    non-printable characters escaped."""
    s = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(key)[: width + 1])
    return s if len(s) <= width else s[: width - 3] + "..."


@dataclass(frozen=True)
class Param:
    """One config key: its type, default, range and documentation.

    ``key_omit`` is the value under which the parameter is left out of a cell's key (and so of
    its seed). It is frozen when the parameter is introduced — usually its default at that time —
    and never changed afterwards, even if the default changes: cell identity then depends only
    on the resolved config, never on a default that lives in code. :data:`NEVER` (the default)
    keeps the parameter in every key. ``since`` names the version that added a dataset or
    feature-map parameter after record digests were first written (0.2.0 on): at its
    ``key_omit`` it is left out of a record's digest too, so the records of results written
    before it existed still resume (:func:`ilnrun.config.grid.record_digest`).
    """

    name: str
    type: str  # int | float | bool | str | strlist | classlist | path
    default: Any
    doc: str
    min: float | None = None
    min_exclusive: bool = False
    max: float | None = None
    choices: tuple | None = None
    listable: bool = True  # may be given as a list (an axis or a grid)
    special: tuple = ()  # extra values accepted for a numeric key (e.g. "median", None)
    key_omit: Any = NEVER
    label: str = ""  # axis label in figures (dataset keys)
    since: str = ""  # the version that added it, if after 0.1.0 (record digests)

    def describe(self) -> str:
        rng = ""
        if self.min is not None:
            rng = f" {'>' if self.min_exclusive else '>='} {self.min:g}"
        if self.max is not None:
            rng += f" <= {self.max:g}"
        if self.choices:
            rng = f" one of {', '.join(self.choices)}"
        return f"{self.name} ({self.type}{rng}; default {self.default!r}): {self.doc}"

    def axis_label(self) -> str:
        return self.label or self.name


# the types whose list is one value, never an axis or a grid: ``strlist`` (column names) and
# ``classlist`` (class labels, integers or strings: ``dataset.classes: [8, 6]``)
ONE_VALUE_LISTS = ("strlist", "classlist")


def _type_ok(p: Param, v: Any) -> bool:
    if p.type == "bool":
        return isinstance(v, bool)
    if p.type == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if p.type == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if p.type == "strlist":
        return isinstance(v, str) or (
            isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v)
        )
    if p.type == "classlist":
        return isinstance(v, list) and all(
            isinstance(x, (int, str)) and not isinstance(x, bool) for x in v
        )
    return isinstance(v, str)


_WANT = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "strlist": "a string or a list of strings",
    "classlist": "a list of class labels (integers or strings)",
    "path": "a file path",
}


def check_scalar(p: Param, v: Any, path: str, problems: list) -> Any:
    """One value of ``p``: type, finiteness, choices and range; ``None`` (and a problem) if bad."""
    if (v is None or isinstance(v, str)) and v in p.special:
        return v
    if not _type_ok(p, v):
        want = _WANT[p.type]
        if p.special:
            want += " or " + " / ".join("null" if s is None else repr(s) for s in p.special)
        problems.append((path, f"must be {want}, got {show(v)}"))
        return None
    if p.type == "float":
        v = float(v)
        if not math.isfinite(v):
            problems.append((path, f"must be finite, got {v!r}"))
            return None
    if p.choices is not None and v not in p.choices:
        close = difflib.get_close_matches(str(v)[:100], p.choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append((path, f"must be one of {', '.join(p.choices)}, got {show(v)}{hint}"))
        return None
    if p.min is not None:
        bad = v <= p.min if p.min_exclusive else v < p.min
        if bad:
            op = ">" if p.min_exclusive else ">="
            problems.append((path, f"must be {op} {p.min:g}, got {v!r}"))
            return None
    if p.max is not None and v > p.max:
        problems.append((path, f"must be <= {p.max:g}, got {v!r}"))
        return None
    return v


def check_value(p: Param, v: Any, path: str, problems: list) -> Any:
    """A value or (when ``p.listable``) a non-empty list of distinct values of ``p``. A
    ``strlist`` or ``classlist`` parameter takes its list as one value (never an axis or a
    grid)."""
    if isinstance(v, list) and p.type not in ONE_VALUE_LISTS:
        if not p.listable:
            problems.append((path, f"must be a single value, not a list, got {show(v)}"))
            return None
        if not v:
            problems.append((path, "must not be an empty list"))
            return None
        out = [check_scalar(p, x, f"{path}[{i}]", problems) for i, x in enumerate(v)]
        if len(set(map(repr, out))) != len(out):
            problems.append((path, f"has repeated values: {show(v)}"))
        return out
    if isinstance(v, dict):
        problems.append((path, f"must be a value or a list of values, got a mapping {show(v)}"))
        return None
    return check_scalar(p, v, path, problems)


def unknown(key: Any, valid, path: str, what: str = "key") -> tuple[str, str]:
    """The problem for an unknown key or kind, with the closest valid one."""
    close = difflib.get_close_matches(str(key)[:100], list(valid), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (path, f"unknown {what} {show(key)}{hint} (valid: {', '.join(valid)})")


def check_section(
    raw: Any, params: tuple[Param, ...], path: str, problems: list, skip: tuple = ()
) -> dict:
    """Validate a mapping of ``params``; fill defaults; report unknown keys."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append((path, f"must be a mapping, got {type(raw).__name__} {show(raw)}"))
        return {p.name: p.default for p in params}
    names = [p.name for p in params]
    for key in raw:
        if key not in names and key not in skip:
            problems.append(unknown(key, names + list(skip), f"{path}.{key_text(key)}"))
    return {
        p.name: check_value(p, raw[p.name], f"{path}.{p.name}", problems)
        if p.name in raw
        else copy.deepcopy(p.default)
        for p in params
    }


def check_kind(
    raw: Any, registry: dict, path: str, problems: list, default_kind: str | None
) -> dict | None:
    """A ``{kind: NAME, ...}`` section: ``NAME`` one of ``registry`` (name -> object with a
    ``params`` tuple), its keys checked against those params."""
    if raw is None and default_kind is not None:
        raw = {"kind": default_kind}
    if raw is None:
        problems.append((path, "is required"))
        return None
    if not isinstance(raw, dict):
        problems.append((path, f"must be a mapping, got {type(raw).__name__} {show(raw)}"))
        return None
    kind = raw.get("kind", default_kind)
    if kind is None:
        problems.append((f"{path}.kind", f"is required (one of {', '.join(registry)})"))
        return None
    if not isinstance(kind, str) or kind not in registry:
        problems.append(unknown(kind, registry, f"{path}.kind", what=path.split(".")[-1]))
        return None
    out = {"kind": kind}
    out.update(check_section(raw, registry[kind].params, path, problems, skip=("kind",)))
    return out


def key_part(params: tuple[Param, ...], values: dict) -> dict:
    """``values`` without the entries a cell key leaves out: ``None`` (unused) and values equal
    to their parameter's frozen ``key_omit``."""
    omit = {p.name: p.key_omit for p in params}
    return {
        k: v
        for k, v in values.items()
        if v is not None and (omit.get(k, NEVER) is NEVER or v != omit[k])
    }
