"""The learners: one module each, every module declaring its :class:`LearnerSpec` as ``SPEC``.

``LEARNERS`` maps a config name (``methods.<name>``) to its spec, in registry order (the order of
tables, figure legends and colours). To add a learner, write one module with a ``fit`` function
and a ``SPEC`` (docs/architecture.md §4) and add its name to ``MODULES`` below, or, from another
package, expose the spec under the entry-point group ``ilnrun.learners``.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from .base import BudgetSize, FitResult, LearnerSpec

MODULES = (
    "shrinking_gradient",
    "doubly_sgd",
    "fixed_random",
    "kernel_ogd",
    "kernel_ridge",
    "nystroem_ridge",
)


def _load() -> dict[str, LearnerSpec]:
    specs = [importlib.import_module(f"{__name__}.{m}").SPEC for m in MODULES]
    specs += [ep.load() for ep in entry_points(group="ilnrun.learners")]
    return {s.name: s for s in specs}


LEARNERS: dict[str, LearnerSpec] = _load()


def budgeted() -> list[LearnerSpec]:
    """The learners that take a size from the matched budget, in registry order."""
    return [s for s in LEARNERS.values() if s.budget is not None]


def competitors() -> list[str]:
    """Names of the learners compared under equal budgets (proposed and competitors)."""
    return [n for n, s in LEARNERS.items() if s.role != "reference"]


def hyper_columns() -> list[str]:
    """Every learner parameter name, in registry order (the hyperparameter columns of the
    tables)."""
    return list(dict.fromkeys(p.name for s in LEARNERS.values() for p in s.params))


def size_columns() -> list[str]:
    """The budget size names of the budgeted learners (``m``, ``k``, ``r``), in registry order."""
    return list(dict.fromkeys(s.budget.name for s in budgeted()))


__all__ = [
    "LEARNERS",
    "LearnerSpec",
    "BudgetSize",
    "FitResult",
    "budgeted",
    "competitors",
    "hyper_columns",
    "size_columns",
]
