"""The rate comparison with Doubly SGD (ILN paper Section 4; docs/protocol.md §11).

For a target excess risk ``epsilon`` over the best predictor in the ball ``|f|_H <= B``, the paper
bounds the number of examples Shrinking Gradient needs by ``O(B^2 / epsilon^2)`` (Corollary 1) and
the number Doubly SGD needs, with the regularisation ``nu = O(epsilon / B^2)`` the risk asks for,
by ``O(B^4 / epsilon^4)``. This module turns excess-risk curves ``epsilon(T)`` (one value per
``T`` of a log grid) into the smallest ``T`` that reaches each target and into the log-log slope
of ``T`` against ``1/epsilon`` (2 and 4 in the claim).

- :func:`first_reach`: the smallest ``T`` with ``epsilon(T) <= target`` on the grid, refined by
  log-log interpolation between that grid point and the one before it: with
  ``(T_a, e_a)`` (``e_a > target``) and ``(T_b, e_b)`` (``e_b <= target``),
  ``log T = log T_a + (log T_b - log T_a) (log e_a - log target) / (log e_a - log e_b)``.
  ``nan`` when no grid ``T`` reaches the target; the first grid ``T`` itself when it already does
  (the crossing lies below the grid: *censored*, flagged by :func:`reach_table`).
- :func:`rate_slope`: least-squares slope of ``log T(epsilon)`` against ``log(1/epsilon)``.
- :func:`slope_over_repetitions`: that slope per repetition (each repetition's own curve), then
  the Student-t 95% interval of their mean (:func:`ilnrun.stats.slope_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .stats import loglog_slope, slope_interval


def first_reach(Ts: Sequence[float], eps: Sequence[float], target: float) -> tuple[float, bool]:
    """``(T(target), censored)``: the smallest ``T`` at which the curve ``eps`` (ordered by the
    increasing ``Ts``) reaches ``target``, log-log interpolated with the grid point before it;
    ``censored`` when the first grid point already reaches it. ``(nan, False)`` when none does.
    Non-finite values (a diverged pass) never reach a target."""
    T = np.asarray(Ts, dtype=float)
    e = np.asarray(eps, dtype=float)
    if len(T) != len(e):
        raise ValueError("Ts and eps differ in length")
    if np.any(np.diff(T) <= 0):
        raise ValueError("Ts must increase")
    ok = np.isfinite(e) & (e <= target)
    if not ok.any():
        return math.nan, False
    i = int(np.argmax(ok))
    if i == 0:
        return float(T[0]), True
    ea, eb = e[i - 1], e[i]
    if not (np.isfinite(ea) and ea > 0 and eb > 0):  # no log-log interpolation possible
        return float(T[i]), False
    frac = (math.log(ea) - math.log(target)) / (math.log(ea) - math.log(eb))
    return float(math.exp(math.log(T[i - 1]) + frac * (math.log(T[i]) - math.log(T[i - 1])))), False


def rate_slope(targets: Iterable[float], Ts: Iterable[float]) -> float:
    """Least-squares slope of ``log T`` against ``log(1/epsilon)`` over the finite pairs
    (``nan`` with fewer than two distinct targets)."""
    t = np.asarray(list(targets), dtype=float)
    T = np.asarray(list(Ts), dtype=float)
    return loglog_slope(1.0 / t, T)


def reach_table(
    Ts: Sequence[float], eps: Sequence[float], targets: Sequence[float]
) -> list[tuple[float, float, bool]]:
    """``(target, T(target), censored)`` for every target (:func:`first_reach`)."""
    return [(t, *first_reach(Ts, eps, t)) for t in targets]


def slope_over_repetitions(
    curves: Mapping[float, Mapping[object, tuple[Sequence[float], Sequence[float]]]],
) -> dict[str, float]:
    """The rate slope of every repetition over the targets its curve reaches on the grid
    (neither unreached nor censored), then the 95% t-interval of their mean.

    ``curves`` maps each target ``epsilon`` to the curves to read it from, by repetition:
    ``{epsilon: {rep: (Ts, eps)}}`` (the same curves for every target for a learner with one
    setting; one setting per target for Doubly SGD under the paper's reading, whose ``nu``
    depends on ``epsilon``). Returns ``mean``, ``ci95``, ``std``, ``n`` and ``dropped``
    (repetitions with fewer than two usable targets)."""
    per: dict[object, tuple[list[float], list[float]]] = {}
    for target, by_rep in curves.items():
        for rep, (Ts, eps) in by_rep.items():
            xs, ys = per.setdefault(rep, ([], []))
            T, censored = first_reach(Ts, eps, target)
            if math.isfinite(T) and not censored:
                xs.append(1.0 / target)
                ys.append(T)
    return slope_interval(per)
