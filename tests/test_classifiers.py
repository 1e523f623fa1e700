"""The scikit-learn classifiers (``ilnrun.estimators``, docs/estimators.md §6): scikit-learn's own
estimator checks, the same numbers as the learners they wrap on -1/+1 labels, the class mapping,
the losses, ``predict_proba`` where the loss defines it, the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from ilnrun.estimators import (
    DoublySGDClassifier,
    FixedRandomClassifier,
    KernelOGDClassifier,
    KernelRidgeClassifier,
    NystroemRidgeClassifier,
    ShrinkingGradientClassifier,
)

FOURIER = {"feature_map": "fourier"}
CLASSIFIERS = [
    ShrinkingGradientClassifier(**FOURIER),
    DoublySGDClassifier(**FOURIER),
    FixedRandomClassifier(**FOURIER),
    KernelOGDClassifier(**FOURIER),
    DoublySGDClassifier(k=4, eta=0.3, loss="hinge", **FOURIER),
    FixedRandomClassifier(r=50, loss="logistic", **FOURIER),
    KernelOGDClassifier(feature_map="relu", eta=0.03, loss="smoothed_hinge"),
    FixedRandomClassifier(r=50, eta=0.1, loss="squared_hinge", feature_map="relu"),
    ShrinkingGradientClassifier(predict_mode="estimated", m_test=50, **FOURIER),
    KernelRidgeClassifier(ridge=1e-2, **FOURIER),
    NystroemRidgeClassifier(feature_map="relu", rank=30),
]


def _expected_failures(estimator) -> dict[str, str]:
    """Checks that cannot apply, with the reason (as for the regressors, tests/test_estimators.py):
    Algorithm-2 predictions only."""
    if getattr(estimator, "predict_mode", "exact") != "estimated":
        return {}
    reason = (
        "predict_mode='estimated' is Algorithm 2: every point gets m_test random draws taken in "
        "row order, so a point's decision value depends on the rows before it in X (random by "
        "design; the exact mode passes)"
    )
    # measured on the check's 200 two-blob rows, seeds 0-4: training accuracy 0.61-0.75 with
    # m_test = 50 where the same fits predicted exactly reach 0.95-0.97 (0.83 is asked)
    noisy = "Algorithm-2 decision values at m_test = 50 are too noisy for accuracy > 0.83"
    return {
        "check_methods_sample_order_invariance": reason,
        "check_methods_subset_invariance": reason,
        **{
            f"check_classifiers_train{v}": noisy
            for v in ("", "(readonly_memmap=True)", "(readonly_memmap=True,X_dtype=float32)")
        },
    }


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(CLASSIFIERS, expected_failed_checks=_expected_failures)
def test_sklearn_classifier_checks(estimator, check):
    check(estimator)
