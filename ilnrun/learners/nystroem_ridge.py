"""Nyström kernel ridge regression — a batch reference that scales (docs/algorithms.md §4c).

Exact kernel ridge regression (:mod:`.kernel_ridge`) solves a ``T × T`` system: ``O(T²)`` memory
and ``O(T³)`` time. The Nyström method (Williams & Seeger 2001) restricts the fit to the span of
``r = rank`` landmark rows ``L`` (drawn uniformly without replacement from the training rows with
the cell's generator) and solves an ``r × r`` system instead:

    z(x) = K_LL^{-1/2} k_L(x)                      (scikit-learn ``Nystroem``: its normalization)
    beta = argmin ‖Z beta − y‖² + T · ridge · ‖beta‖²     (scikit-learn ``Ridge``, no intercept)
    f(x) = beta · z(x) = sum_j c_j k(l_j, x),   c = K_LL^{-1/2} beta

with ``k`` the feature map's own closed-form kernel ``k(x, x') = E_w[psi(x; w) psi(x'; w)]``
(:meth:`ilnrun.features.FeatureMap.kernel`): the blocks ``K_LL`` and ``k_L(x)`` are computed by
the map and handed to ``Nystroem(kernel="precomputed")``, so the approximated kernel is exactly
the one the online learners' features sample. ``‖beta‖ = ‖f‖_H``, so the objective is kernel
ridge's ``(1/T) sum_t (f(x_t) − y_t)² + ridge ‖f‖_H²`` (times ``T``) over the functions spanned
by the landmarks; with ``rank >= T`` every training row is a landmark and the fit *is* kernel
ridge regression (``tests/test_nystroem_ridge.py``). ``rank`` and ``ridge`` are grid parameters
selected on the validation split like every other setting.

Cost: ``T r + r²`` kernel values (``kernel_evals``), ``O(T r²)`` time for ``Zᵀ Z`` and
``O(r³)`` for the square root, memory ``O(T r)`` (``Z``; the kernel blocks are formed in row
blocks). The learned ``f`` is stored as a :class:`FeatureExpansion` whose "features" are the
kernel columns ``k(l_j, ·)``: a prediction costs ``r`` kernel values and never touches the other
training rows.

Like kernel ridge it has no online predictions: its per-round losses (``online_loss``) are the
**leave-one-out** losses of the ridge stage, ``½ ((y_t − ŷ_t) / (1 − h_t))²`` with
``h_t = z_tᵀ (Zᵀ Z + T ridge I)^{-1} z_t`` (the landmarks held fixed).
"""

from __future__ import annotations

import numpy as np

from ..features import FeatureMap
from ..params import Param
from .base import (
    SECONDS_PER_LAPACK_FLOP,
    FeatureExpansion,
    FitResult,
    LearnerSpec,
    new_counters,
)

ROWS = 4096  # rows of a kernel block k(X[a:b], L) formed at once: O(ROWS · rank) temporaries

RANK = Param(
    "rank",
    "int",
    500,
    "Nyström landmarks r (training rows drawn without replacement; at most T are used)",
    min=1,
    key_omit=500,
)
RIDGE = Param(
    "ridge",
    "float",
    1e-3,
    "ridge penalty per example: beta = argmin |Z beta - y|^2 + T ridge |beta|^2",
    min=0,
    min_exclusive=True,
    key_omit=1e-3,
)


class LandmarkKernel(FeatureMap):
    """The kernel columns of a feature map as "features": ``psi(x; l) = k(x, l)`` with the
    parameter ``l`` a landmark row, so that ``sum_j c_j psi(x; l_j)`` is Nyström's predictor
    (not drawn from a distribution: not a registered map). Its "evaluations" are closed-form
    kernel values (``kernel_valued``: counted as kernel values, never as feature evaluations)."""

    kernel_valued = True

    def __init__(self, fmap: FeatureMap) -> None:
        super().__init__(fmap.d)
        self.fmap = fmap
        self.name = fmap.name

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError("Nyström landmarks are training rows, not draws from mu")

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        out = [self.fmap.kernel(X[i : i + 1], W[j : j + 1])[0, 0] for j, i in enumerate(rows)]
        return np.array(out, dtype=float)

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return self.fmap.kernel(X, W)

    def describe(self) -> dict:
        return self.fmap.describe()


def _blocks(n: int):
    for a in range(0, n, ROWS):
        yield a, min(n, a + ROWS)


def nystroem_features(X: np.ndarray, T: int, fmap: FeatureMap, rng: np.random.Generator, rank: int):
    """The Nyström features of the first ``T`` rows of ``X``: ``r = min(rank, T)`` landmark rows
    ``L`` drawn uniformly without replacement with ``rng`` (sorted), scikit-learn's ``Nystroem``
    fitted on the symmetrised ``K_LL``, and ``Z = K_LL^{-1/2} k_L(X)`` built in blocks of rows.
    Returns ``(landmarks, L, nys, Z)``; it costs ``r² + T r`` kernel values."""
    from sklearn.kernel_approximation import Nystroem

    r = min(int(rank), T)
    landmarks = np.sort(rng.choice(T, size=r, replace=False))
    L = X[landmarks]
    K_LL = fmap.kernel(L, L)
    nys = Nystroem(kernel="precomputed", n_components=r, random_state=0).fit((K_LL + K_LL.T) / 2)
    Z = np.empty((T, r))
    for a, b in _blocks(T):
        Z[a:b] = nys.transform(fmap.kernel(X[a:b], L))
    return landmarks, L, nys, Z


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    rank: int = 500,
    ridge: float = 1e-3,
    deadline: float | None = None,
) -> FitResult:
    """Nyström kernel ridge regression on ``(X, y)`` with ``min(rank, T)`` landmarks;
    leave-one-out losses of the ridge stage as the per-round losses."""
    from scipy.linalg import cho_factor, solve_triangular  # scipy, sklearn: where a fit runs
    from sklearn.linear_model import Ridge

    T = len(y)
    landmarks, L, nys, Z = nystroem_features(X, T, fmap, rng, rank)
    r = len(landmarks)
    counters = new_counters()
    counters["kernel_evals"] = r * r + T * r
    penalty = T * ridge
    model = Ridge(alpha=penalty, fit_intercept=False, solver="cholesky", copy_X=False)
    beta = model.fit(Z, y).coef_
    # leave-one-out: h_t = |C^{-1} z_t|^2 with C Cᵀ = Zᵀ Z + T ridge I
    A = Z.T @ Z
    A[np.diag_indices(r)] += penalty
    C = cho_factor(A, lower=True, check_finite=True)[0]
    losses = np.empty(T)
    for a, b in _blocks(T):
        G = solve_triangular(C, Z[a:b].T, lower=True, check_finite=False)
        h = np.einsum("ij,ij->j", G, G)
        losses[a:b] = 0.5 * ((y[a:b] - Z[a:b] @ beta) / (1.0 - h)) ** 2
    coef = nys.normalization_.T @ beta  # f(x) = k_L(x) · coef
    predictor = FeatureExpansion(L, coef, LandmarkKernel(fmap))
    return FitResult(predictor, losses, counters, extras={"landmarks": landmarks})


def memory(size: int, T: int, w: int, args: dict | None = None) -> int:
    """Bytes of the working arrays: ``Z`` (``T × r``), the kernel and solve blocks
    (``ROWS × r``, a few), the ``r × r`` matrices and the ``T``-long vectors."""
    r = min(int((args or {}).get("rank", RANK.default)), T)
    return 8 * (T * r + 4 * min(ROWS, T) * r + 5 * r * r + 6 * T)


def seconds(T: int, rank: int, kernel_value: float) -> float:
    """Rough CPU seconds of one fit: ``T r + r^2`` kernel values (``kernel_value`` seconds each:
    the map's, :func:`ilnrun.cost.kernel_value_seconds`) and, at
    :data:`~.base.SECONDS_PER_LAPACK_FLOP`, ``~7 T r^2`` flops (the transform ``k_L(X)
    K_LL^{-1/2}``, the Gram matrix ``Z^T Z`` twice, Ridge's and the leave-one-out's, and the
    triangular solves of the leave-one-out) and ``~22 r^3`` (the SVD of ``K_LL``); the fits
    measured at three sizes: ``BATCH_FITS_MEASURED`` in tests/test_estimates.py."""
    r = min(rank, T)
    return kernel_value * (T * r + r * r) + SECONDS_PER_LAPACK_FLOP * (7 * T * r * r + 22 * r**3)


def _notes(settings: list[dict], Ts: list[int]) -> list[str]:
    """``ilnrun validate``: the memory of a fit per T and rank (its time is in the per-cell
    estimates, which know the feature map's kernel cost)."""
    ranks = sorted({int(h["rank"]) for h in settings if h.get("rank") is not None})
    return [
        f"{SPEC.name} (rank={r}): "
        + "; ".join(
            f"T={T}: ~{memory(0, T, 0, {'rank': r}) / 2**20:,.0f} MiB"
            + (f" (rank > T: {T} landmarks)" if r > T else "")
            for T in Ts
        )
        for r in ranks
    ]


SPEC = LearnerSpec(
    name="nystroem_ridge",
    label="Nyström kernel ridge (batch)",
    short="NKRR",
    summary="batch kernel ridge regression on a rank-r Nyström approximation of the exact kernel "
    "(reference, not budgeted; scales to large T)",
    fit=fit,
    params=(RANK, RIDGE),
    role="reference",
    batch=True,
    needs_kernel=True,
    unused=lambda h: set(),
    choices=(
        "Nyström kernel ridge regression is a batch reference that scales: scikit-learn's "
        "`Nystroem` on the feature map's own closed-form kernel with `rank` landmark training "
        "rows, then `Ridge` with penalty `T·ridge` (rank and ridge selected on validation loss); "
        "its 'online loss' is the ridge stage's leave-one-out loss, not an online pass.",
    ),
    notes=_notes,
    memory=memory,
    kernel_blocks=False,  # a feature expansion evaluates itself
    seconds=lambda size, T, w, args, kv: seconds(T, int(args.get("rank", RANK.default)), kv),
)
