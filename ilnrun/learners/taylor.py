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
