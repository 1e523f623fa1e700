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
- :func:`b_slope_over_repetitions`: the B-dependence at a fixed target, the log-log slope of
  ``T(epsilon)`` against the ball radius ``B`` (2 in Corollary 1's ``B^2/epsilon^2``, 4 in
  ``B^4/epsilon^4``), per repetition over the ``B`` whose curve reaches the target inside the
  grid, with the same interval.

Both statistics also return the range of their ``x`` that entered a slope (``x_lo``, ``x_hi``:
``1/epsilon`` or ``B``) and ``decades = log10(x_hi / x_lo)``, the span the slope describes.
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


Curve = tuple[Sequence[float], Sequence[float]]


def reach_slope(points: Iterable[tuple[float, float, Mapping[object, Curve]]]) -> dict[str, float]:
    """The log-log slope of ``T(target)`` against ``x`` per repetition, then the 95% t-interval
    of their mean (:func:`ilnrun.stats.slope_interval`).

    ``points`` are ``(x, target, {rep: (Ts, eps)})``: each repetition's curve enters with the
    point ``(x, T(target))`` when it reaches the target inside the grid (neither unreached nor
    censored, :func:`first_reach`). Returns ``mean``, ``ci95``, ``std``, ``n``, ``dropped``
    (repetitions with fewer than two usable points) and ``x_lo``, ``x_hi``, ``decades``: the
    smallest and largest ``x`` of any repetition's slope and ``log10(x_hi / x_lo)`` (``nan``
    when no repetition has a slope)."""
    per: dict[object, tuple[list[float], list[float]]] = {}
    for x, target, by_rep in points:
        for rep, (Ts, eps) in by_rep.items():
            xs, ys = per.setdefault(rep, ([], []))
            T, censored = first_reach(Ts, eps, target)
            if math.isfinite(T) and not censored:
                xs.append(x)
                ys.append(T)
    st = slope_interval(per)
    used = [x for xs, _ in per.values() if len(set(xs)) > 1 for x in xs]
    lo, hi = (min(used), max(used)) if used else (math.nan, math.nan)
    return {**st, "x_lo": lo, "x_hi": hi, "decades": math.log10(hi / lo) if used else math.nan}


def slope_over_repetitions(
    curves: Mapping[float, Mapping[object, Curve]],
) -> dict[str, float]:
    """The rate slope of every repetition over the targets its curve reaches on the grid
    (neither unreached nor censored), then the 95% t-interval of their mean.

    ``curves`` maps each target ``epsilon`` to the curves to read it from, by repetition:
    ``{epsilon: {rep: (Ts, eps)}}`` (the same curves for every target for a learner with one
    setting; one setting per target for Doubly SGD under the paper's reading, whose ``nu``
    depends on ``epsilon``). Returns what :func:`reach_slope` returns, with ``x = 1/epsilon``
    (``dropped``: repetitions with fewer than two usable targets)."""
    return reach_slope((1.0 / target, target, by_rep) for target, by_rep in curves.items())


def b_slope_over_repetitions(curves: Mapping[float, Mapping[object, Curve]], target: float) -> dict:
    """The slope of ``log T(target)`` against ``log B`` per repetition at one target
    ``epsilon``, then the 95% t-interval of their mean: ``curves`` maps each ball radius ``B``
    (the task's target norm and the learners' ``B``) to that task's curves by repetition,
    ``{B: {rep: (Ts, eps)}}``. At fixed ``epsilon`` the paper's bounds grow as ``B^2``
    (Shrinking Gradient) and ``B^4`` (Doubly SGD). Returns what :func:`reach_slope` returns,
    with ``x = B``."""
    return reach_slope((B, target, by_rep) for B, by_rep in curves.items())
