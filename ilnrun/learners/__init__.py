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
    "nystroem_svm",
    "nystroem_logistic",
)


def _load() -> dict[str, LearnerSpec]:
    specs = [importlib.import_module(f"{__name__}.{m}").SPEC for m in MODULES]
    specs += [ep.load() for ep in entry_points(group="ilnrun.learners")]
    return {s.name: s for s in specs}


LEARNERS: dict[str, LearnerSpec] = _load()


def load_native() -> None:
    """Import the native libraries the passes call, before a cell pins the native thread pools.

    The learner modules import their heavy parts where a pass runs (numba with the compiled
    kernels, scipy's factorizations), so that ``ilnrun list`` and ``validate`` start quickly.
    But :func:`ilnrun.numeric_env.one_thread` pins only the libraries loaded when a cell enters
    it: scipy's BLAS (which numba's ``np.dot`` and the ridge references call) loaded inside a
    cell would run its own threads, and numba must be imported after its threading layer is
    chosen (``shrinking_gradient_kernels``). Whatever runs cells calls this first:
    :mod:`ilnrun.cell` at its import (the engines, :func:`ilnrun.load`) and
    :mod:`ilnrun.estimators`."""
    # in this order, as the learners imported them before: numba, scipy's BLAS (numba's np.dot
    # calls it), then scipy.linalg (the ridge references; loads that BLAS without numba too)
    from . import shrinking_gradient_kernels  # noqa: F401, I001

    import scipy.linalg  # noqa: F401


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
    "load_native",
    "size_columns",
]
