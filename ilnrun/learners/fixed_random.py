"""Fixed-Random features — Rahimi & Recht (2007, 2009), as compared in ILN paper Section 6.

Sample ``r`` parameters once; ``z(x) = [psi(x; w_1) ... psi(x; w_r)] / sqrt(r)``; one online pass
of SGD on the squared loss (docs/algorithms.md §3):

    yhat_t = beta . z(x_t)
    beta  <- beta - eta_t ((yhat_t - y_t) z(x_t) + lam beta)

Each round evaluates the ``r`` features on ``x_t``: a pass spends ``r T`` evaluations.
"""

from __future__ import annotations

import math

import numpy as np

from ..features import FeatureMap
from ..params import Param
from ..schedules import step_sizes
from .base import (
    STEP_PARAMS,
    BudgetSize,
    FeatureExpansion,
    FitResult,
    LearnerSpec,
    OnlinePass,
    compiled_rounds,
    new_counters,
)
from .compiled import RF_CHECKS
from .compiled import available as compiled_available


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    r: int,
    lam: float = 0.0,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """One online pass of SGD on ``r`` fixed random features.

    Runs the compiled pass (:func:`fit_compiled`) where it applies (a ``np.random.Generator``
    and a feature map the kernels know), else the numpy code (:func:`fit_numpy`): the same
    draws and the same numbers, bit for bit (docs/algorithms.md §2.6)."""
    kw = dict(eta=eta, r=r, lam=lam, schedule=schedule, decay=decay, deadline=deadline)
    from . import random_feature_kernels as kernels  # numba: imported where a pass runs

    if type(rng) is np.random.Generator and kernels.use_compiled(fmap):
        return fit_compiled(X, y, fmap, rng, **kw)
    return fit_numpy(X, y, fmap, rng, **kw)


def fit_compiled(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    r: int,
    lam: float = 0.0,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """:func:`fit_numpy` compiled (``random_feature_kernels.fr_rounds``): the parameters drawn
    by ``fmap.sample`` as there, then the same pass and arithmetic; the deadline is looked at
    after round 1 (as :func:`fit_numpy` does), then between calls of a few million
    evaluations."""
    from . import random_feature_kernels as kernels

    T = len(y)
    X = np.ascontiguousarray(X, dtype=float)
    etas = step_sizes(schedule, eta, T, decay)
    yv = np.ascontiguousarray(y, dtype=float)
    kind = kernels.kind_of(fmap)
    W = fmap.sample(rng, r)
    Ws, b = kernels.split(W, kind, fmap)
    inv_sqrt_r = 1.0 / math.sqrt(r)
    beta, z, losses = np.zeros(r), np.empty(r), np.empty(T)
    state = np.array([2.0])  # the exponent of the loss
    counts = np.zeros(2, dtype=np.int64)  # train_evals, diverged
    t, timed_out = compiled_rounds(
        T, deadline, lambda t: r,
        lambda t, t1: kernels.fr_rounds(
            t, t1, X, yv, etas, Ws, b, inv_sqrt_r, float(lam), beta, z, losses,
            state, counts,
        ),
        lambda: bool(counts[1]),
    )  # fmt: skip
    counters = new_counters()
    counters.update(train_evals=int(counts[0]), features_sampled=len(W))
    predictor = FeatureExpansion(W, beta * inv_sqrt_r, fmap)
    return FitResult(predictor, losses[:t], counters, bool(counts[1]), timed_out)


def fit_numpy(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    r: int,
    lam: float = 0.0,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """One online pass of SGD on ``r`` fixed random features, in numpy (the reference)."""
    run = OnlinePass(y, eta, schedule, decay, deadline)
    etas = run.etas
    W = fmap.sample(rng, r)
    features_sampled = len(W)
    train_evals = 0  # counted in the loop (docs/budgets.md)
    inv_sqrt_r = 1.0 / math.sqrt(r)
    beta = np.zeros(r)
    point = fmap.point
    for t in run.rounds():
        z = point(X[t], W)
        z *= inv_sqrt_r
        train_evals += z.size
        yhat = float(beta @ z)
        if run.diverges(t, yhat):
            break
        if lam:
            beta *= 1.0 - etas[t] * lam
        z *= etas[t] * (yhat - run.y[t])
        beta -= z
    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled)
    return run.result(FeatureExpansion(W, beta * inv_sqrt_r, fmap), counters)


def _agrees(kind: int) -> bool:
    """Small passes, compiled and numpy, equal bit for bit: one feature and many, with and
    without ``lam`` (this build's BLAS ``ddot`` / ``gemv`` and cosine)."""
    from . import random_feature_kernels as kernels

    probe = np.random.default_rng(20261124)
    D = 19
    X = probe.standard_normal((60, D)) / 3.0
    y = np.tanh(X[:, 0] + X[:, 1])
    fmap = kernels.probe_map(kind, D)
    for r, lam, schedule in ((1, 0.0, "constant"), (300, 0.2, "inv_sqrt")):
        kw = dict(eta=0.4, r=r, lam=lam, schedule=schedule)
        r0 = fit_numpy(X, y, fmap, np.random.default_rng(1), **kw)
        r1 = fit_compiled(X, y, fmap, np.random.default_rng(1), **kw)
        if not (
            np.array_equal(r0.losses, r1.losses)
            and np.array_equal(r0.predictor.coef, r1.predictor.coef)
        ):
            return False
    return True


RF_CHECKS.append(_agrees)


SPEC = LearnerSpec(
    name="fixed_random",
    label="Fixed-Random",
    short="FR",
    summary="Rahimi & Recht random features, one SGD pass",
    fit=fit,
    params=(
        *STEP_PARAMS,
        Param("lam", "float", 0.0, "l2 regularization lambda", min=0, key_omit=0.0),
    ),
    budget=BudgetSize(
        "r",
        # total: and the r features on every validation and test point
        cost=lambda match, T, n: {"evaluations": T, "total": T + n}.get(match, 1),
        expected=lambda r, T: {"train_evals": r * T, "features_sampled": r},
        doc="random features drawn once, each evaluated on every x_t",
        default=100,
    ),
    memory=lambda r, T, w: 8 * (r * (w + 3) + 2 * T),
    # FixedRandomRegressor(): one pass at a config's eta = 0.1 with r = 100 random Fourier features
    # reaches R^2 < 0.5 on scikit-learn's 200-row check_regressors_train; 0.3 passes it
    estimator_defaults={"eta": 0.3},
    engines={"jax": ".fixed_random_jax"},  # the same pass on the jax engine
    kernel_blocks=False,  # a feature expansion evaluates itself
    # ~2 ns per evaluation and number of w (T = 4 000, r = 2 000: 0.1 s coordinate, 0.15 s relu)
    # per feature, round and number of w: compiled ~3e-10 s, numpy ~6e-10 s (diamonds relu cells)
    seconds=lambda r, T, w, args, kv: (
        1e-5 * T + (3e-10 if compiled_available() else 6e-10) * r * T * (4 + w)
    ),
)
