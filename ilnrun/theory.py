"""Diagnostics of ILN paper Theorem 1 and Lemma 5 (exact-kernel computations, not budgeted).

- Regret (Theorem 1): ``R_T = sum_t l_t(f_t) - min_{|f|_H <= B} sum_t l_t(f)`` with
  ``l_t(f) = 0.5 (f(x_t) - y_t)^2``. The ``f_t`` are evaluated exactly with the kernel.
- Lemma 5: ``|alpha^(t+1)|_1 <= (16 B + 1) sum_{s <= t} eta_s`` (``(16B + 1) eta t`` for a
  constant step), since every update adds ``eta_t |y_t - E_t| < eta_t (16 B + 1)`` and a shrink
  only lowers the norm.
"""

from __future__ import annotations

import numpy as np


def best_in_ball_loss(K: np.ndarray, y: np.ndarray, B: float) -> float:
    """``min_{|f|_H <= B} 0.5 sum_t (f(x_t) - y_t)^2`` over the RKHS ball of radius ``B``.

    By the representer theorem ``f = sum_i beta_i Phi(x_i)``; with ``K = U diag(lam) U^T`` and
    ``z = diag(lam)^{1/2} U^T beta`` the problem is ``min 0.5 |U diag(lam)^{1/2} z - y|^2``
    s.t. ``|z| <= B``. With ``b = U^T y`` the solution is ``z_j = sqrt(lam_j) b_j / (lam_j + mu)``,
    ``mu >= 0`` the smallest value with ``|z| <= B`` (found by bisection), and the loss is
    ``0.5 sum_j (mu b_j / (lam_j + mu))^2`` (``0.5 sum_{lam_j = 0} b_j^2`` when ``mu = 0``).
    """
    lam, U = np.linalg.eigh((K + K.T) / 2.0)
    lam = np.where(lam > 1e-12 * max(lam.max(), 1e-300), lam, 0.0)
    b = U.T @ y
    pos = lam > 0

    def norm(mu: float) -> float:
        return float(np.sqrt(np.sum(lam[pos] * b[pos] ** 2 / (lam[pos] + mu) ** 2)))

    def loss(mu: float) -> float:
        r = np.where(pos, mu * b / (lam + mu), b) if mu > 0 else np.where(pos, 0.0, b)
        return float(0.5 * np.sum(r**2))

    if norm(0.0) <= B:
        return loss(0.0)
    lo, hi = 0.0, max(float(lam.max()), 1e-12)
    while norm(hi) > B:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if norm(mid) > B:
            lo = mid
        else:
            hi = mid
    return loss(hi)


def sg_exact_online_predictions(
    K: np.ndarray, alpha_new: np.ndarray, shrinks_before: np.ndarray
) -> np.ndarray:
    """Exact ``f_t(x_t) = sum_{i<t} alpha_i^(t) k(x_i, x_t)`` along a Shrinking Gradient pass.

    ``alpha_i^(t) = alpha_i 4^-(K_t - K_i)``: the coefficient appended at round i, divided by 4 at
    each of the ``K_t - K_i`` shrinks since (``shrinks_before`` holds ``K``). O(T^2), diagnostics.
    """
    n = len(alpha_new)
    gap = shrinks_before[:, None] - shrinks_before[None, :]
    weights = np.where(np.tri(n, k=-1, dtype=bool), 0.25 ** np.maximum(gap, 0), 0.0)
    return np.einsum("ti,ti,i->t", K[:n, :n], weights, alpha_new)


def lemma5_ratio(alpha_l1: np.ndarray, etas: np.ndarray, B: float) -> float:
    """``max_t |alpha^(t+1)|_1 / ((16 B + 1) sum_{s<=t} eta_s)``: Lemma 5 holds iff <= 1."""
    bound = (16.0 * B + 1.0) * np.cumsum(etas[: len(alpha_l1)])
    return float(np.max(alpha_l1 / bound)) if len(alpha_l1) else 0.0
