"""Kernel ridge regression with the exact kernel — a batch reference (not an online learner).

What the kernel can do with all ``T`` training examples at once, against which one online pass
of any learner is measured (issue "an honest yardstick", item 5):

    alpha = (K + T · ridge · I)^{-1} y,      f(x) = sum_i alpha_i k(x_i, x)

— the minimizer of ``(1/T) sum_t (f(x_t) - y_t)^2 + ridge ‖f‖_H^2``, the same solution as
scikit-learn's ``KernelRidge(alpha=T · ridge, kernel="precomputed")``. ``ridge`` is a grid
parameter, so the pipeline selects it on the validation split like every other
hyperparameter. It needs a closed-form kernel and uses ``T²`` kernel values (``kernel_evals``);
the solve is a Cholesky factorization, ``O(T³)``.

It has no online predictions. Its per-round losses (``online_loss``) are the **leave-one-out**
losses ``½ (y_t − f_{−t}(x_t))²``, each training point predicted by the fit on the other
``T − 1`` points, via the identity ``y_t − f_{−t}(x_t) = alpha_t / (A^{-1})_{tt}`` with
``A = K + T · ridge · I``. They are out-of-sample like an online loss, but each prediction has
seen every other point, not only the earlier ones.
"""

from __future__ import annotations

import numpy as np

from ..features import FeatureMap
from ..params import Param
from .base import (
    SECONDS_PER_LAPACK_FLOP,
    FitResult,
    KernelExpansion,
    LearnerSpec,
    new_counters,
)

RIDGE = Param(
    "ridge",
    "float",
    1e-3,
    "ridge penalty per example: alpha = (K + T ridge I)^-1 y",
    min=0,
    min_exclusive=True,
    key_omit=1e-3,
)


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    ridge: float = 1e-3,
    deadline: float | None = None,
) -> FitResult:
    """Kernel ridge regression on ``(X, y)``; leave-one-out losses as the per-round losses."""
    from scipy.linalg import cho_factor, cho_solve, solve_triangular  # scipy: where a fit runs

    T = len(y)
    counters = new_counters()
    K = fmap.kernel(X, X)
    counters["kernel_evals"] = K.size
    A = (K + K.T) / 2.0
    A[np.diag_indices(T)] += T * ridge
    factor = cho_factor(A, lower=True, overwrite_a=True, check_finite=True)
    alpha = cho_solve(factor, y)
    # diag(A^{-1}) = squared column norms of L^{-1}
    L_inv = solve_triangular(factor[0], np.eye(T), lower=True, check_finite=False)
    diag_inv = np.einsum("ij,ij->j", L_inv, L_inv)
    losses = 0.5 * (alpha / diag_inv) ** 2
    return FitResult(KernelExpansion(alpha), losses, counters)


def seconds(T: int, kernel_value: float) -> float:
    """Rough CPU seconds of one fit: ``T^2`` kernel values (``kernel_value`` seconds each: the
    map's, :func:`ilnrun.cost.kernel_value_seconds`), the Cholesky factorization
    (``T^3 / 3`` flops) and the triangular inverse ``L^{-1}`` (``T^3`` flops) at
    :data:`~.base.SECONDS_PER_LAPACK_FLOP` (the fits measured at three sizes:
    ``BATCH_FITS_MEASURED`` in tests/test_estimates.py)."""
    return T * T * kernel_value + SECONDS_PER_LAPACK_FLOP * 4 / 3 * T**3


SPEC = LearnerSpec(
    name="kernel_ridge",
    label="Kernel ridge regression (exact kernel, batch)",
    short="KRR",
    summary="batch kernel ridge regression with the exact kernel (reference, not budgeted)",
    fit=fit,
    params=(RIDGE,),
    role="reference",
    batch=True,
    needs_kernel=True,
    unused=lambda h: set(),
    choices=(
        "Kernel ridge regression is a batch reference (all T training points at once, exact "
        "kernel, `alpha = (K + T·ridge·I)^{-1} y`, ridge selected on validation loss like every "
        "other hyperparameter): what the kernel can reach, against which one online pass is "
        "measured. Its 'online loss' is its leave-one-out loss (each training point predicted "
        "from the other T − 1), not an online pass.",
    ),
    # K, A = (K + K^T) / 2, LAPACK's Fortran copy of A, the identity and L^{-1}: five T x T
    # matrices at once (measured peak RSS: 5.3 T^2 doubles at T = 3 000)
    memory=lambda size, T, w: 8 * 5 * T * T,
    seconds=lambda size, T, w, args, kv: seconds(T, kv),
)
