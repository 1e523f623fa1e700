"""Nyström features with a linear support vector machine — a batch classification reference
(issue 27 item 4; Dai et al. compare against Nyström features with linear solvers, their §7).

The features are Nyström's (:mod:`.nystroem_ridge`): ``r = rank`` landmark training rows ``L``
drawn uniformly without replacement with the cell's generator, the feature map's own closed-form
kernel ``k``, and ``z(x) = K_LL^{-1/2} k_L(x)`` (scikit-learn ``Nystroem`` on the precomputed
blocks). On them scikit-learn's ``LinearSVC`` (hinge loss, no intercept, ``dual=True``) solves

    beta = argmin_beta  (1/2) ‖beta‖² + C sum_t max(0, 1 − y_t beta · z(x_t)),

``‖beta‖ = ‖f‖_H`` over the functions the landmarks span, so this is the kernel SVM restricted
to that span; ``f(x) = beta · z(x) = sum_j c_j k(l_j, x)``, ``c = K_LL^{-1/2} beta``, stored as a
:class:`FeatureExpansion` over the kernel columns (a prediction costs ``r`` kernel values).
``rank`` and ``C`` are grid parameters selected on the validation loss like every other setting.

Labels must be ±1 (the hinge loss's label space; ``ilnrun validate`` refuses the learner on a
dataset with real labels). A training split with one class only has no separating problem to
solve: the predictor is 0 (every point an error under ``test_error``). The per-round losses
(``online_loss``) are the **training** losses ``l(f(x_t), y_t)`` of the fitted predictor (a
batch fit has no online predictions). Cost: ``T r + r²`` kernel values (``kernel_evals``).

:func:`fit_linear` is shared with :mod:`.nystroem_logistic` (``LogisticRegression``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..features import FeatureMap
from ..losses import LOSSES
from ..params import Param
from .base import FeatureExpansion, FitResult, LearnerSpec, new_counters
from .nystroem_ridge import RANK, LandmarkKernel, nystroem_features
from .nystroem_ridge import memory as _ridge_memory
from .nystroem_ridge import seconds as _ridge_seconds

C_PARAM = Param(
    "C",
    "float",
    1.0,
    "inverse regularization: beta = argmin |beta|^2 / 2 + C sum_t loss(y_t, beta . z(x_t))",
    min=0,
    min_exclusive=True,
    key_omit=1.0,
)


def fit_linear(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    rank: int,
    loss: str,
    solver: Callable[[], object],
) -> FitResult:
    """Nyström features of ``min(rank, T)`` landmarks and the linear classifier ``solver()`` (a
    scikit-learn estimator with ``coef_``, fitted without an intercept) on ``(Z, y)``, ``y`` in
    {-1, +1}; the training losses of ``loss`` as the per-round losses."""
    y = np.asarray(y, dtype=float)
    if not np.all(np.abs(y) == 1.0):
        raise ValueError(f"a {loss} classifier needs labels in {{-1, +1}}")
    T = len(y)
    landmarks, L, nys, Z = nystroem_features(X, T, fmap, rng, rank)
    r = len(landmarks)
    counters = new_counters()
    counters["kernel_evals"] = r * r + T * r
    if len(np.unique(y)) < 2:  # one class: nothing to separate, the zero predictor
        beta = np.zeros(r)
    else:
        beta = np.asarray(solver().fit(Z, y).coef_, dtype=float).reshape(-1)
    losses = np.asarray(LOSSES[loss].value(Z @ beta, y), dtype=float)
    coef = nys.normalization_.T @ beta  # f(x) = k_L(x) . coef
    predictor = FeatureExpansion(L, coef, LandmarkKernel(fmap))
    return FitResult(predictor, losses, counters, extras={"landmarks": landmarks})


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    rank: int = 500,
    C: float = 1.0,
    loss: str = "hinge",
    deadline: float | None = None,
) -> FitResult:
    """``LinearSVC`` (hinge loss, penalty ``C``) on ``min(rank, T)`` Nyström features."""
    from sklearn.svm import LinearSVC

    if loss != "hinge":
        raise ValueError(f"nystroem_svm learns with the hinge loss, got {loss!r}")

    def solver():
        return LinearSVC(
            C=C, loss="hinge", dual=True, fit_intercept=False, max_iter=20_000, random_state=0
        )

    return fit_linear(X, y, fmap, rng, rank, loss, solver)


def memory(size: int, T: int, w: int, args: dict | None = None) -> int:
    """Bytes of the working arrays: Nyström ridge's (``Z``, the kernel blocks, the ``r × r``
    matrices), a copy of ``Z`` the solver may make included."""
    r = min(int((args or {}).get("rank", RANK.default)), T)
    return _ridge_memory(size, T, w, args) + 8 * T * r


def seconds(size: int, T: int, w: int, args: dict, kernel_value: float) -> float:
    """Rough seconds of one fit: Nyström ridge's (the kernel values, the transform and the
    square root dominate; the linear solvers pass over ``Z`` a few dozen times)."""
    return _ridge_seconds(T, int(args.get("rank", RANK.default)), kernel_value)


def spec(name: str, label: str, short: str, loss: str, solver: str, fit_fn) -> LearnerSpec:
    """The spec of a Nyström linear classifier (``nystroem_svm``, ``nystroem_logistic``)."""
    return LearnerSpec(
        name=name,
        label=label,
        short=short,
        summary=f"batch {loss} classifier: scikit-learn's {solver} on rank-r Nyström features of "
        "the exact kernel (reference, not budgeted; ±1 labels)",
        fit=fit_fn,
        params=(RANK, C_PARAM),
        role="reference",
        batch=True,
        needs_kernel=True,
        unused=lambda h: set(),
        choices=(
            f"{label} is a batch classification reference: scikit-learn's `Nystroem` on the "
            f"feature map's own closed-form kernel with `rank` landmark training rows, then "
            f"`{solver}` ({loss} loss, penalty `C`, no intercept; rank and C selected on "
            "validation loss); its 'online loss' is the training loss of the fitted predictor, "
            "not an online pass.",
        ),
        memory=memory,
        kernel_blocks=False,  # a feature expansion evaluates itself
        seconds=seconds,
        losses=(loss,),
    )


SPEC = spec("nystroem_svm", "Nyström + LinearSVC (batch)", "NSVM", "hinge", "LinearSVC", fit)
