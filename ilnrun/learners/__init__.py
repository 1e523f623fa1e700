"""The learners, one module each, sharing ``fit(X, y, fmap, rng, **hyper) -> FitResult``.

``LEARNERS`` maps a config name to its module's ``fit``, the budget size it takes (``m``, ``k``,
``r`` or none) and its hyperparameters beyond the common ``eta`` / ``schedule`` / ``decay``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import doubly_sgd, fixed_random, kernel_ogd, shrinking_gradient
from .base import FitResult


@dataclass(frozen=True)
class LearnerInfo:
    name: str
    fit: Callable[..., FitResult]
    budget_param: str | None  # which derived budget size the learner takes
    summary: str


LEARNERS: dict[str, LearnerInfo] = {
    "shrinking_gradient": LearnerInfo(
        "shrinking_gradient",
        shrinking_gradient.fit,
        "m",
        "ILN paper Algorithms 1-2: kernel-expansion OGD with Algorithm-2 estimates and shrinks",
    ),
    "doubly_sgd": LearnerInfo(
        "doubly_sgd", doubly_sgd.fit, "k", "Dai et al. (2014) Algorithms 1-2, k features per round"
    ),
    "fixed_random": LearnerInfo(
        "fixed_random", fixed_random.fit, "r", "Rahimi & Recht random features, one SGD pass"
    ),
    "kernel_ogd": LearnerInfo(
        "kernel_ogd", kernel_ogd.fit, None, "exact-kernel OGD oracle (not budget-limited)"
    ),
}

__all__ = ["LEARNERS", "LearnerInfo", "FitResult"]
