"""What a learner's passes implement (docs/architecture.md §8, "What an engine implements").

A learner's ``fit`` is its numpy pass, the reference: it implements every setting. It may have
other passes of the same algorithm: a numba-compiled one, which ``fit`` chooses by itself on the
numpy engine where it applies, and one on the jax engine (``LearnerSpec.engines["jax"]``). Each
of those declares in the learner's spec, ``LearnerSpec.implements[<pass>]`` (``"compiled"``,
``"jax"``), an :class:`Implements`: for each ``fit`` keyword it implements, the values it
implements — :data:`ANY`, a tuple of values, or a predicate ``value -> bool``.

**A keyword not named is not implemented, at any value.** A parameter added to a learner later
(a ``loss``, say) therefore reaches none of its other passes until each says that it implements
it (and which values): until then a setting with it runs as numpy code on the numpy engine (the
compiled pass is left out, with a note) and is refused at validation on the jax engine (exit
status 2, the learner, key and value named). No pass is handed a setting it would ignore.

The declaration is over the ``fit`` keywords of a setting (``LearnerSpec.fit_arguments``), which
is what every pass receives: config keys that the spec resolves before any pass (``eta_scale``,
a preset and its constants) reach no pass and need no declaration; a keyword that says how a pass
runs rather than what it computes (:data:`CONTROLS`) is every pass's.

This module imports nothing heavy: ``ilnrun validate`` reads the declarations without numba or
jax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..params import show


class _Any:
    """Sentinel: every value of a keyword."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()

# ``fit`` keywords about how a pass runs, not what it computes: its time limit (the runner's;
# the jax engine checks it between chunks of rounds) and its threads (the same numbers for any
# number).
CONTROLS = frozenset({"deadline", "threads"})

# The passes a learner may declare, besides its numpy ``fit``.
PASSES = ("compiled", "jax")


def _same(value: Any, allowed: Any) -> bool:
    """``value == allowed``, a bool never equal to a number (``True`` is not ``1``)."""
    return isinstance(value, bool) == isinstance(allowed, bool) and value == allowed


@dataclass(frozen=True)
class Implements:
    """What one pass of a learner implements: ``values[key]`` is :data:`ANY`, a tuple of the
    values of ``fit`` keyword ``key`` it runs, or a predicate ``value -> bool``. A keyword not
    in ``values`` is not implemented (see the module docstring)."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def accepts(self, key: str, value: Any) -> bool:
        """Whether the pass implements ``fit`` keyword ``key`` at ``value``."""
        if key in CONTROLS:
            return True
        if key not in self.values:
            return False
        allowed = self.values[key]
        if allowed is ANY:
            return True
        if callable(allowed):
            return bool(allowed(value))
        return any(_same(value, a) for a in allowed)

    def missing(self, args: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The ``(key, value)`` of the ``fit`` keywords ``args`` the pass does not implement
        (empty: it runs them)."""
        return [(k, v) for k, v in args.items() if not self.accepts(k, v)]

    def describe(self, key: str) -> str:
        """What the pass implements of ``key``, for a message."""
        if key not in self.values:
            return f"no {key}: it does not declare the key"
        allowed = self.values[key]
        if allowed is ANY:
            return f"every {key}"
        if callable(allowed):
            doc = (getattr(allowed, "__doc__", None) or "").strip().splitlines()
            return f"{key} where {doc[0] if doc else getattr(allowed, '__name__', 'a check')}"
        if len(allowed) == 1:
            return f"only {key} = {show(allowed[0])}"
        return f"{key} in {', '.join(show(a) for a in allowed)}"


# A pass that declares nothing implements nothing.
NOTHING = Implements()


def refusal(learner: str, pass_name: str, declared: Implements, key: str, values: list) -> str:
    """The message of ``ilnrun validate`` refusing ``values`` of ``key`` on the jax engine (or
    noting them for the compiled pass)."""
    got = " or ".join(show(v) for v in values)
    return (
        f"{key} = {got} is not implemented by the {pass_name} pass of {learner} (it implements "
        f"{declared.describe(key)})"
    )


def unimplemented(
    declared: Implements, settings_args: list[dict[str, Any]]
) -> dict[str, list[Any]]:
    """Over the ``fit`` keywords of several settings: each keyword the pass ``declared`` does
    not implement, with its distinct values in order."""
    out: dict[str, list[Any]] = {}
    for args in settings_args:
        for key, value in declared.missing(args):
            seen = out.setdefault(key, [])
            if not any(_same(value, s) for s in seen):
                seen.append(value)
    return out
