"""The losses: one module each, every module declaring its :class:`LossSpec` as ``SPEC``.

``LOSSES`` maps a config name (``loss: <name>``, ``methods.<learner>.loss``) to its spec, in
registry order. To add a loss, write one module with ``value``, ``derivative``, its label space,
its best constant and its metrics in a ``SPEC`` (docs/architecture.md §6.1), add its name to
``MODULES`` below (or, from another package, expose the spec under the entry-point group
``ilnrun.losses``), and list it in the ``losses`` of the learners that take it.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from .base import LABEL_SPACES, METRICS, LossSpec, error_rate, majority_class

MODULES = ("square", "logistic", "hinge", "squared_hinge", "smoothed_hinge")

# The loss of a config that names none: every number computed before losses were plugins.
DEFAULT_LOSS = "square"


def _load() -> dict[str, LossSpec]:
    specs = [importlib.import_module(f"{__name__}.{m}").SPEC for m in MODULES]
    specs += [ep.load() for ep in entry_points(group="ilnrun.losses")]
    return {s.name: s for s in specs}


LOSSES: dict[str, LossSpec] = _load()

# ``LearnerSpec.losses`` of a learner that steps along any loss's derivative ``l'``: every loss
# registered when it is asked (one added later, by another package or a test, included).
EVERY = "every"


def get(name: str | None) -> LossSpec:
    """The spec of loss ``name`` (the default, square, for ``None``)."""
    return LOSSES[name or DEFAULT_LOSS]


__all__ = [
    "DEFAULT_LOSS",
    "EVERY",
    "LABEL_SPACES",
    "LOSSES",
    "METRICS",
    "LossSpec",
    "error_rate",
    "majority_class",
    "get",
]
