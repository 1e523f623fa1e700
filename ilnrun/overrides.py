"""Command-line overrides of a config: ``--set KEY=VALUE`` (the convention of Hydra).

``KEY`` is a dotted path into the config mapping (``dataset.T``,
``methods.shrinking_gradient.eta``); ``VALUE`` is parsed as YAML by the bounded reader
(:func:`ilnrun.safe_yaml.load_text`: size, nesting, aliases and expanded size capped), so
``40`` is an int, ``[0.1, 0.3]`` a list (a grid or an axis), ``null`` None and ``inv_sqrt`` a
string. YAML 1.1's surprising numbers are refused, naming the override: an unquoted ``010``
(octal, 8) or ``2:30`` (base 60, 150); write the number meant or quote the text.
Overrides are applied in order to the *raw* mapping read from the file, creating missing
intermediate mappings, before :func:`ilnrun.config.resolve`: an overridden config is validated
exactly like an edited file (an unknown key gets the same key path and close-match hint) and the
resolved ``config.yaml`` of a run records the result.

A malformed override (no ``=``, an empty key or key component, a value that is not YAML, a path
through a value that is not a mapping) raises :class:`OverrideError` naming it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from . import config as C
from .safe_yaml import YamlLimitError, bounded_repr, check_object, key_text, load_text


class OverrideError(ValueError):
    """A ``--set`` that cannot be applied; the message names the override."""

    def __init__(self, override: str, message: str) -> None:
        self.override, self.message = override, message
        super().__init__(f"--set {bounded_repr(override, 120)}: {message}")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b.c=VALUE"`` -> ``(["a", "b", "c"], VALUE read as YAML within bounds)``."""
    if not isinstance(text, str):
        raise OverrideError(str(type(text).__name__), "an override must be a KEY=VALUE string")
    if "=" not in text:
        raise OverrideError(text, "expected KEY=VALUE (e.g. dataset.T=400)")
    key, value = text.split("=", 1)
    key = key.strip()
    if not key:
        raise OverrideError(text, "empty key before '='")
    parts = key.split(".")
    if any(not p.strip() for p in parts):
        raise OverrideError(text, f"empty component in the key path {bounded_repr(key, 80)}")
    try:
        parsed = load_text(value)
    except YamlLimitError as exc:
        raise OverrideError(text, f"{key_text(key, 80)}: refused: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        what = exc.problem or exc.context or "syntax error"
        raise OverrideError(text, f"the value is not valid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise OverrideError(text, f"the value is not valid YAML ({type(exc).__name__})") from None
    return [p.strip() for p in parts], parsed


def apply_overrides(raw: dict, overrides: Iterable[str]) -> dict:
    """A deep copy of ``raw`` with every override applied in order (later ones win)."""
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Iterable):
        raise OverrideError(
            bounded_repr(overrides, 60), "overrides must be a list of KEY=VALUE strings"
        )
    out = copy.deepcopy(raw)
    for text in overrides:
        parts, value = parse_override(text)
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:  # absent (or null): a new mapping
                child = node[part] = {}
            elif not isinstance(child, dict):
                where = key_text(".".join(parts[: i + 1]), 80)
                raise OverrideError(
                    text,
                    f"{where} is {type(child).__name__} {bounded_repr(child, 80)}, "
                    "not a mapping of keys",
                )
            node = child
        node[parts[-1]] = value
    return out


def load_config(
    source: dict | str | Path, overrides: Iterable[str] = (), default_name: str | None = None
) -> C.Experiment:
    """Read a config (a raw mapping or a YAML file), apply ``overrides``, resolve it. The name
    defaults to the file's stem (``experiment`` for a mapping); relative data paths are relative
    to the file's folder (the working directory for a mapping). Raises
    :class:`~ilnrun.config.ConfigError` or :class:`OverrideError`."""
    if isinstance(source, dict):
        try:
            check_object(source)
        except YamlLimitError as exc:
            raise C.ConfigError([("", f"the config mapping is refused: {exc}")]) from None
        raw, stem, base = source, "experiment", None
    else:
        raw, stem = C.load_yaml(source), Path(source).stem
        base = Path(source).resolve().parent
    return C.resolve(
        apply_overrides(raw, overrides), default_name=default_name or stem, base_dir=base
    )
