"""Diagnostics of ILN paper Theorem 1 and Lemma 5 (exact-kernel computations, not budgeted).

- Regret (Theorem 1): ``R_T = sum_t l_t(f_t) - min_{|f|_H <= B} sum_t l_t(f)`` with
  ``l_t(f) = 0.5 (f(x_t) - y_t)^2``. The ``f_t`` are evaluated exactly with the kernel.
- Lemma 5: ``|alpha^(t+1)|_1 <= (16 B + 1) sum_{s <= t} eta_s`` (``(16B + 1) eta t`` for a
  constant step), since every update adds ``eta_t |y_t - E_t| < eta_t (16 B + 1)`` and a shrink
  only lowers the norm.

Two exact routes, equal to rounding (docs/algorithms.md §1.6):

- the **kernel matrix** ``K = k(X_train, X_train)`` (``T x T``): the comparator costs an
  ``O(T^3)`` eigendecomposition, the replay of Shrinking Gradient's predictions ``O(T^2)``;
- a feature map's exact finite **primal** ``k(x, x') = c phi(x) . phi(x')`` with ``phi`` in
  ``R^p`` (:meth:`ilnrun.features.FeatureMap.primal`; ``coordinate``: ``phi(x) = x``,
  ``c = 1/D``): the comparator is a ``p``-dimensional constrained least squares (``O(T p^2 + p^3)``)
  and the replay keeps ``v = sum_i alpha_i^(t) phi(x_i)`` (``O(T p)``).

:class:`TrainKernel` picks the route. The loops are compiled with numba when it can be imported
(cached on disk, :mod:`ilnrun.compiled_cache`: compiled once per install, see the
``NUMBA_CACHE_DIR`` variable of numba), else
the numpy forms below run, with the same numbers to rounding.
"""

from __future__ import annotations

import functools

import numpy as np

# Eigenvalues below this fraction of the largest are taken as 0 (both routes).
EIG_CUTOFF = 1e-12

# The kernel-matrix route (maps without a finite primal): the largest T it is allowed for. Its
# T x T kernel, the symmetrized copy, the eigenvectors and LAPACK's workspace take about
# ``KERNEL_DIAGNOSTICS_COPIES * 8 T^2`` bytes (20 000: 16 GB) and the eigendecomposition
# O(T^3) time (measured on one core: 1.4 s at T = 2 000, so about 3 min at 10 000, 25 at 20 000).
KERNEL_DIAGNOSTICS_MAX_T = 20_000
KERNEL_DIAGNOSTICS_COPIES = 5


def kernel_diagnostics_bytes(T: int, p: int | None) -> int:
    """Bytes the regret's diagnostics need for ``T`` rounds: ``T x T`` matrices on the kernel
    route, ``p x p`` ones on the primal route (map with a primal of dimension ``p``; the
    smaller of the two Gram matrices is decomposed)."""
    n = T if p is None else min(T, p)
    return KERNEL_DIAGNOSTICS_COPIES * 8 * n * n + (8 * 4 * T if p is not None else 0)


# ----------------------------------------------------------------------------------------------
# the comparator


def _ball_multiplier(lam: np.ndarray, b: np.ndarray, B: float) -> float:
    """The smallest ``mu >= 0`` with ``|z(mu)| <= B``, ``z_j = sqrt(lam_j) b_j / (lam_j + mu)``
    over the positive eigenvalues ``lam`` (bisection, 200 halvings)."""

    def norm(mu: float) -> float:
        return float(np.sqrt(np.sum(lam * b**2 / (lam + mu) ** 2)))

    if len(lam) == 0 or norm(0.0) <= B:
        return 0.0
    lo, hi = 0.0, max(float(lam.max()), 1e-12)
    while norm(hi) > B:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if norm(mid) > B:
            lo = mid
        else:
            hi = mid
    return hi


def best_in_ball_loss(K: np.ndarray, y: np.ndarray, B: float) -> float:
    """``min_{|f|_H <= B} 0.5 sum_t (f(x_t) - y_t)^2`` over the RKHS ball of radius ``B``.

    By the representer theorem ``f = sum_i beta_i Phi(x_i)``; with ``K = U diag(lam) U^T`` and
    ``z = diag(lam)^{1/2} U^T beta`` the problem is ``min 0.5 |U diag(lam)^{1/2} z - y|^2``
    s.t. ``|z| <= B``. With ``b = U^T y`` the solution is ``z_j = sqrt(lam_j) b_j / (lam_j + mu)``,
    ``mu >= 0`` the smallest value with ``|z| <= B`` (found by bisection), and the loss is
    ``0.5 sum_j (mu b_j / (lam_j + mu))^2`` (``0.5 sum_{lam_j = 0} b_j^2`` when ``mu = 0``).
    """
    lam, U = np.linalg.eigh((K + K.T) / 2.0)
    lam = np.where(lam > EIG_CUTOFF * max(lam.max(), 1e-300), lam, 0.0)
    b = U.T @ y
    pos = lam > 0
    mu = _ball_multiplier(lam[pos], b[pos], B)
    r = np.where(pos, mu * b / (lam + mu), b) if mu > 0 else np.where(pos, 0.0, b)
    return float(0.5 * np.sum(r**2))


def best_in_ball_loss_primal(Phi: np.ndarray, c: float, y: np.ndarray, B: float) -> float:
    """:func:`best_in_ball_loss` for ``K = c Phi Phi^T`` without forming ``K``: ``O(T p^2 + p^3)``.

    The positive eigenvalues of ``K`` are those of the ``p x p`` Gram ``G = c Phi^T Phi =
    V diag(lam) V^T``, with eigenvectors ``u_j = sqrt(c) Phi v_j / sqrt(lam_j)``, so
    ``b_j = u_j . y = sqrt(c) v_j . (Phi^T y) / sqrt(lam_j)``; the part of ``y`` outside their
    span, ``r = y - sum_j b_j u_j``, contributes ``0.5 |r|^2`` whatever ``mu``. The multiplier is
    found by the same bisection; the loss is ``0.5 (sum_j (mu b_j / (lam_j + mu))^2 + |r|^2)``.
    """
    G = (Phi.T @ Phi) * c
    lam, V = np.linalg.eigh((G + G.T) / 2.0)
    pos = lam > EIG_CUTOFF * max(lam.max(), 1e-300)
    lam, V = lam[pos], V[:, pos]
    b = np.sqrt(c) * (V.T @ (Phi.T @ y)) / np.sqrt(lam)
    r = y - np.sqrt(c) * (Phi @ (V @ (b / np.sqrt(lam))))
    mu = _ball_multiplier(lam, b, B)
    fit = mu * b / (lam + mu) if mu > 0 else np.zeros_like(b)
    return float(0.5 * (np.sum(fit**2) + np.sum(r**2)))


# ----------------------------------------------------------------------------------------------
# Shrinking Gradient's exact online predictions


def _replay_kernel(K, alpha_new, shrinks_before, out, coef):  # pragma: no cover - compiled
    """``out[t] = sum_{i<t} K[t, i] coef_i`` with ``coef_i = alpha_i 4^-(K_t - K_i)`` kept up to
    date: appended at round i, all multiplied by ``4^-gap`` at a shrink (exact: a power of 2).
    ``coef``: zeros of ``alpha_new``'s length (made by the caller: numba compiles its
    ``np.zeros`` as functions of their own)."""
    n = len(alpha_new)
    for t in range(n):
        acc = 0.0
        for i in range(t):
            acc += K[t, i] * coef[i]
        out[t] = acc
        if t + 1 < n:
            coef[t] = alpha_new[t]
            gap = shrinks_before[t + 1] - shrinks_before[t]
            if gap > 0:
                f = 0.25**gap
                for i in range(t + 1):
                    coef[i] *= f


def _replay_primal(Phi, c, alpha_new, shrinks_before, out, v):  # pragma: no cover - compiled
    """``out[t] = c v . phi(x_t)`` with ``v = sum_{i<t} alpha_i 4^-(K_t - K_i) phi(x_i)``:
    after round t, ``v += alpha_t phi(x_t)``, then ``v *= 4^-gap`` at a shrink. ``v``: zeros of
    ``Phi``'s width (made by the caller, as :func:`_replay_kernel`'s ``coef``)."""
    n, p = len(alpha_new), Phi.shape[1]
    for t in range(n):
        acc = 0.0
        for j in range(p):
            acc += v[j] * Phi[t, j]
        out[t] = c * acc
        if t + 1 < n:
            a = alpha_new[t]
            if a != 0.0:
                for j in range(p):
                    v[j] += a * Phi[t, j]
            gap = shrinks_before[t + 1] - shrinks_before[t]
            if gap > 0:
                f = 0.25**gap
                for j in range(p):
                    v[j] *= f


def _replay_kernel_numpy(K, alpha_new, shrinks_before, out, coef) -> None:
    """:func:`_replay_kernel` with numpy rows (where numba cannot be imported)."""
    n = len(alpha_new)
    gaps = np.diff(shrinks_before)
    for t in range(n):
        out[t] = K[t, :t] @ coef[:t]
        if t + 1 < n:
            coef[t] = alpha_new[t]
            if gaps[t] > 0:
                coef[: t + 1] *= 0.25 ** gaps[t]


def _replay_primal_numpy(Phi, c, alpha_new, shrinks_before, out, v) -> None:
    """:func:`_replay_primal` with numpy rows (where numba cannot be imported)."""
    n = len(alpha_new)
    gaps = np.diff(shrinks_before)
    for t in range(n):
        out[t] = c * (v @ Phi[t])
        if t + 1 < n:
            if alpha_new[t] != 0.0:
                v += alpha_new[t] * Phi[t]
            if gaps[t] > 0:
                v *= 0.25 ** gaps[t]


@functools.cache
def _replays() -> tuple:
    """``(kernel replay, primal replay)``: compiled with numba on first use (numba is imported
    only then, so the modules importing this one stay light), the numpy forms where numba
    cannot be imported."""
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - exercised where numba cannot be imported
        return _replay_kernel_numpy, _replay_primal_numpy
    from .compiled_cache import jit

    return jit(_replay_kernel, nogil=True), jit(_replay_primal, nogil=True)


def sg_exact_online_predictions(
    K: np.ndarray, alpha_new: np.ndarray, shrinks_before: np.ndarray
) -> np.ndarray:
    """Exact ``f_t(x_t) = sum_{i<t} alpha_i^(t) k(x_i, x_t)`` along a Shrinking Gradient pass.

    ``alpha_i^(t) = alpha_i 4^-(K_t - K_i)``: the coefficient appended at round i, divided by 4 at
    each of the ``K_t - K_i`` shrinks since (``shrinks_before`` holds ``K``). O(T^2) time on the
    rows of ``K`` below the diagonal, O(T) extra memory.
    """
    n = len(alpha_new)
    out = np.zeros(n)
    _replays()[0](
        np.ascontiguousarray(K[:n, :n], dtype=np.float64),
        np.ascontiguousarray(alpha_new, dtype=np.float64),
        np.ascontiguousarray(shrinks_before, dtype=np.int64),
        out,
        np.zeros(n),
    )
    return out


def sg_exact_online_predictions_primal(
    Phi: np.ndarray, c: float, alpha_new: np.ndarray, shrinks_before: np.ndarray
) -> np.ndarray:
    """:func:`sg_exact_online_predictions` for ``k(x, x') = c Phi[x] . Phi[x']``: one primal
    vector ``v = sum_{i<t} alpha_i^(t) Phi[i]`` updated every round (a step adds
    ``alpha_t Phi[t]`` after the prediction of round t, a shrink divides ``v`` by 4), so
    ``f_t(x_t) = c v . Phi[t]``: O(T p) time, O(p) extra memory."""
    n = len(alpha_new)
    out = np.zeros(n)
    _replays()[1](
        np.ascontiguousarray(Phi[:n], dtype=np.float64),
        float(c),
        np.ascontiguousarray(alpha_new, dtype=np.float64),
        np.ascontiguousarray(shrinks_before, dtype=np.int64),
        out,
        np.zeros(Phi.shape[1]),
    )
    return out


# ----------------------------------------------------------------------------------------------
# the route


class TrainKernel:
    """The kernel among the training inputs ``X`` for the exact diagnostics.

    With an exact finite primal (``fmap.primal(X) = (Phi, c)``), the replay runs in the primal and
    the comparator decomposes the smaller of the ``p x p`` Gram and the ``T x T`` kernel; without
    one, both use ``K = fmap.kernel(X, X)``, built on first use and kept (``8 T^2`` bytes)."""

    def __init__(self, fmap, X: np.ndarray, use_primal: bool = True) -> None:
        self.fmap, self.X = fmap, X
        self.primal = fmap.primal(X) if use_primal else None
        self._K: np.ndarray | None = None

    @property
    def K(self) -> np.ndarray:
        if self._K is None:
            self._K = self.fmap.kernel(self.X, self.X)
        return self._K

    def best_in_ball_loss(self, y: np.ndarray, B: float) -> float:
        """The comparator ``min_{|f|_H <= B} 0.5 sum_t (f(x_t) - y_t)^2``."""
        if self.primal is not None and self.primal[0].shape[1] <= len(self.X):
            return best_in_ball_loss_primal(*self.primal, y, B)
        return best_in_ball_loss(self.K, y, B)

    def sg_online_predictions(self, alpha_new: np.ndarray, shrinks_before: np.ndarray):
        """Shrinking Gradient's exact online predictions ``f_t(x_t)``."""
        if self.primal is not None:
            return sg_exact_online_predictions_primal(*self.primal, alpha_new, shrinks_before)
        return sg_exact_online_predictions(self.K, alpha_new, shrinks_before)


# ----------------------------------------------------------------------------------------------
# exact predictions of a kernel expansion

# Exact validation / test predictions go through the primal (when the map has one) above this
# many training rounds; up to it, through the kernel blocks ``k(X_eval, X_train)``, by which every
# committed config's numbers were made (the two routes differ in the last bits only).
PRIMAL_EVALUATION_ABOVE_T = 20_000


def primal_evaluation(fmap, T: int) -> bool:
    """Whether exact predictions after ``T`` training rounds go through the map's primal."""
    return T > PRIMAL_EVALUATION_ABOVE_T and fmap.primal_dim(fmap.d) is not None


def primal_predictions(
    fmap, X_train: np.ndarray, X_eval: np.ndarray, alpha: np.ndarray
) -> np.ndarray:
    """``f(x) = sum_i alpha_i k(x_i, x) = c (sum_i alpha_i Phi[x_i]) . Phi[x]`` for the rows of
    ``X_eval``, in O((T + n) p) (``fmap`` must have a primal)."""
    Phi, c = fmap.primal(X_train[: len(alpha)])
    Phi_eval, _ = fmap.primal(X_eval)
    return c * (Phi_eval @ (Phi.T @ alpha))


def lemma5_ratio(alpha_l1: np.ndarray, etas: np.ndarray, B: float) -> float:
    """``max_t |alpha^(t+1)|_1 / ((16 B + 1) sum_{s<=t} eta_s)``: Lemma 5 holds iff <= 1."""
    bound = (16.0 * B + 1.0) * np.cumsum(etas[: len(alpha_l1)])
    return float(np.max(alpha_l1 / bound)) if len(alpha_l1) else 0.0
