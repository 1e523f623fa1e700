"""An unbiased estimate of ``l'(E[X], y)`` from independent unbiased copies of ``X`` — paper 003
(Cesa-Bianchi, Shalev-Shwartz, Shamir, online learning of noisy data) §III-C, Lemma 1, with the
expansion around a pilot estimate that the same section proposes (docs/algorithms.md §1.10).

Given a pilot ``x_0`` and copies ``x_1, x_2, …`` of ``X`` independent of it and of each other,
and the Taylor coefficients ``gamma_n`` of ``l'(·, y)`` around ``x_0`` (``LossSpec.
derivative_series``): draw ``N`` with ``P(N = n) = (p − 1) / p^{n+1}`` (``n = 0, 1, …``), draw
``N`` copies, and return

    theta = gamma_N · p^{N+1} / (p − 1) · (x_1 − x_0) ⋯ (x_N − x_0)     (``zeroth = "sampled"``)

so that ``E[theta | x_0] = Σ_n gamma_n (E[X] − x_0)^n = l'(E[X], y)`` wherever the series
converges at ``E[X]`` (paper 003 Lemma 1, applied to ``X − x_0``). ``zeroth = "exact"`` keeps the
first term out of the lottery, ``theta = gamma_0 + [N >= 1] gamma_N p^{N+1}/(p−1) Π(x_j − x_0)``
(unbiased too, the same draws of ``N``): its variance vanishes as ``Var X → 0`` (the paper's
remark that a pilot-centred expansion makes it "arbitrarily small"), where the paper's form keeps
``gamma_0² / (p − 1)`` however good the copies.

With ``cap`` set, ``N > cap`` returns the zeroth part only (0, or ``gamma_0``) and draws no copy:
then ``theta`` is unbiased for the degree-``cap`` Taylor polynomial of ``l'`` around ``x_0``, and
biased for ``l'`` by its remainder. Unbounded ``N`` (``cap=None``) is what makes it unbiased.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

ZEROTH = ("exact", "sampled")
# the defaults (docs/algorithms.md §1.10, measured by bench/sg_unbiased.py): ``exact``, whose
# variance falls as 1/m where the printed form's stays >= gamma_0^2/(p - 1); p = 2, one copy a
# step in expectation, where variance x evaluations is flat between p = 2 and 3
ZEROTH_DEFAULT = "exact"
P_DEFAULT = 2.0


def draw_order(rng: np.random.Generator, p: float) -> int:
    """``N`` with ``P(N = n) = (p − 1) / p^{n+1}``: numpy's geometric law (on 1, 2, …) with
    success probability ``(p − 1) / p``, less one."""
    return int(rng.geometric((p - 1.0) / p)) - 1


def copies_mean(p: float = P_DEFAULT, cap: int | None = None) -> float:
    """``E[N']``, the copies one call of :func:`estimate_derivative` draws in expectation:
    ``N' = N`` (``N <= cap``) or 0 (``N > cap``: no copy is drawn), with ``q = 1/p``,
    ``P(N = n) = (1 − q) q^n``::

        no cap:  E[N]  = q/(1 − q) = 1/(p − 1)
        cap c:   E[N'] = Σ_{n<=c} n P(N = n) = 1/(p − 1) − p^{−(c+1)} (c + 1 + 1/(p − 1))

    (the tail ``Σ_{n>c} n P(N = n) = q^{c+1} E[N + c + 1]``, the law being memoryless). The
    budget sizes Shrinking Gradient's ``m`` by it (docs/budgets.md §4a)."""
    mean = 1.0 / (p - 1.0)
    if cap is None:
        return mean
    if cap <= 0:
        return 0.0
    return max(0.0, mean - p ** -(cap + 1.0) * (cap + 1.0 + mean))


def copies_variance(p: float = P_DEFAULT, cap: int | None = None) -> float:
    """``Var N'`` (see :func:`copies_mean`): ``p/(p − 1)²`` without a cap; with cap ``c``,
    ``E[N'²] − E[N']²`` where ``E[N'²] = E[N²] − q^{c+1} E[(N + c + 1)²]`` and
    ``E[N²] = (p + 1)/(p − 1)²``. The spread of a pass's copies about the budget's forecast
    (``tests/test_sg_budget.py`` derives its tolerance from it)."""
    mean = 1.0 / (p - 1.0)
    second = (p + 1.0) / (p - 1.0) ** 2
    if cap is None:
        return second - mean * mean
    if cap <= 0:
        return 0.0
    c1 = cap + 1.0
    tail = p**-c1 * (second + 2.0 * c1 * mean + c1 * c1)
    return max(0.0, second - tail - copies_mean(p, cap) ** 2)


def estimate_derivative(
    series: Callable[[float, int], np.ndarray],
    pilot: float,
    copy: Callable[[], float],
    rng: np.random.Generator,
    *,
    p: float = P_DEFAULT,
    cap: int | None = None,
    zeroth: str = ZEROTH_DEFAULT,
) -> tuple[float, int]:
    """``(theta, N')``: the estimate of ``l'(E[X])`` described in the module docstring around
    ``pilot``, with ``series(x0, n)`` the Taylor coefficients ``gamma_0..gamma_n`` of ``l'``
    around ``x0`` and ``copy()`` one fresh independent copy of ``X``; ``N'`` the copies drawn
    (``N``, or 0 where ``N > cap``). The draw of ``N`` comes first from ``rng``, then the copies
    (each drawing from its own source, typically the same ``rng``)."""
    n = draw_order(rng, p)
    if cap is not None and n > cap:
        return (0.0 if zeroth == "sampled" else float(series(pilot, 0)[0])), 0
    gamma = series(pilot, n)
    prod = 1.0
    for _ in range(n):
        prod *= copy() - pilot
    weight = p ** (n + 1) / (p - 1.0)
    if zeroth == "sampled":
        return float(gamma[n] * weight * prod), n
    return float(gamma[0] + (gamma[n] * weight * prod if n else 0.0)), n
