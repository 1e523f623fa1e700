"""The statistics of every table, figure and verdict, in one place (docs/protocol.md §6-§7).

- 95% Student-t interval of a mean over ``n`` repetitions: half-width
  ``t_{0.975, n-1} s / sqrt(n)`` with ``s`` the sample standard deviation (``ddof = 1``);
  ``t`` from scipy's inverse Student-t distribution function (``scipy.special.stdtrit``, what
  ``scipy.stats.t.ppf`` evaluates, without importing all of ``scipy.stats``). Used by
  ``summary.csv``, the report's paired verdicts and the figures' bands.
- Paired differences: all learners of a repetition see the same data, so a comparison of two
  learners uses the per-repetition differences ``a_r - b_r`` and the interval of their mean.
- Verdict words: a difference is *significant* when its interval excludes 0; over several data
  settings the words count them ("significantly worse at 1 of 6 D, better at none").
- Paired ratios (the gap to a batch reference, docs/protocol.md §8.2): the per-repetition ratios
  ``a_r / b_r``, summarized by their geometric mean ``exp(mean_r log(a_r / b_r))`` with the
  95% t-interval of the mean log ratio mapped back by ``exp``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache

import numpy as np


@cache
def t975(df: int) -> float:
    """The Student-t 0.975 quantile with ``df`` degrees of freedom (NaN for ``df < 1``)."""
    if df < 1:
        return math.nan
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


def mean_ci(values: Iterable[float]) -> dict[str, float]:
    """``mean``, ``std`` (ddof 1), ``ci95`` (the 95% t-interval half-width) and ``n`` of the
    finite-or-infinite, non-NaN ``values``; NaN where ``n`` is too small."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    v = v[~np.isnan(v)]
    n = len(v)
    mean = float(v.mean()) if n else math.nan
    std = float(v.std(ddof=1)) if n > 1 else math.nan
    half = t975(n - 1) * std / math.sqrt(n) if n > 1 else math.nan
    return {"mean": mean, "std": std, "ci95": half, "n": n}


def paired_difference(a: dict | object, b: dict | object) -> dict[str, float]:
    """Mean and 95% interval of ``a_r - b_r`` over the repetitions ``r`` both have (``a``, ``b``:
    pandas Series indexed by repetition); non-finite differences are left out."""
    d = (a - b).dropna()  # type: ignore[operator]
    d = d[np.isfinite(d)]
    s = mean_ci(d.to_numpy(dtype=float))
    return {"n": s["n"], "mean": s["mean"], "ci": s["ci95"]}


def significant(p: dict) -> bool:
    """Whether a paired difference's 95% interval excludes 0."""
    return not math.isnan(p["ci"]) and abs(p["mean"]) > p["ci"]


def verdict_word(p: dict, subject: str = "SG") -> str:
    """``<subject> lower|higher (significant|not significant)`` for a paired difference
    ``subject - other``; ``no data`` without finite differences."""
    if p["n"] == 0 or math.isnan(p["mean"]):
        return "no data"
    side = f"{subject} lower" if p["mean"] < 0 else f"{subject} higher"
    return f"{side} ({'significant' if significant(p) else 'not significant'})"


def claim_verdict(words: list[str]) -> str:
    """Collapse per-setting words into ``holds`` (significantly lower everywhere), ``holds in
    direction, not always significantly``, ``does not hold`` (significantly higher somewhere,
    significantly lower nowhere), ``no significant difference``, ``mixed``, or ``nothing to
    compare`` (no setting had data on both sides)."""
    words = [w for w in words if w != "no data"]
    n = len(words)
    if n == 0:
        return "nothing to compare"
    lower = sum(" lower" in w for w in words)
    sig_lower = sum(w.endswith("lower (significant)") for w in words)
    sig_higher = sum(w.endswith("higher (significant)") for w in words)
    if sig_lower == n:
        return "holds"
    if sig_higher == 0 and lower == n:
        return "holds in direction, not always significantly"
    if sig_higher > 0 and sig_lower == 0:
        return "does not hold"
    if sig_higher == 0 and sig_lower == 0:
        return "no significant difference"
    if sig_higher == 0:  # significantly lower somewhere, significantly higher nowhere
        return "holds in part"
    return "mixed"


def tally(words: list[str]) -> tuple[int, int, int]:
    """``(n, significantly lower, significantly higher)`` over the per-setting words that have
    data."""
    words = [w for w in words if w != "no data"]
    return (
        len(words),
        sum(w.endswith("lower (significant)") for w in words),
        sum(w.endswith("higher (significant)") for w in words),
    )


def counted_verdict(words: list[str], axis: str | None = None) -> str:
    """:func:`claim_verdict`, followed over several data settings (``axis`` names them, e.g.
    ``D``) by how many were significant either way: ``holds in part (significantly lower at 2
    of 6 D, higher at 0)`` (not for ``holds`` and ``no significant difference``, which say it)."""
    verdict = claim_verdict(words)
    n, lower, higher = tally(words)
    if axis is None or n < 2 or verdict in ("holds", "no significant difference"):
        return verdict  # every setting significant the one way, or none either way
    return f"{verdict} (significantly lower at {lower} of {n} {axis}, higher at {higher})"


# ----------------------------------------------------------------------------------------------
# the mean predictor as a yardstick (docs/protocol.md §8)

# claim_verdict's words for "learner − best constant predictor", in plain words
AGAINST_MEAN = {
    "holds": "beats the mean predictor",
    "holds in direction, not always significantly": "below the mean predictor, not always "
    "significantly",
    "does not hold": "worse than predicting the mean",
    "no significant difference": "not distinguishable from predicting the mean",
    "holds in part": "significantly better than the mean predictor somewhere, worse nowhere",
    "mixed": "mixed against the mean predictor",
    "nothing to compare": "nothing to compare",
}


def against_mean(words: list[str]) -> str:
    """The verdict of ``learner − mean predictor`` (per-setting :func:`verdict_word` words) in
    plain words: :func:`claim_verdict` read with the mean predictor as the other side."""
    return AGAINST_MEAN[claim_verdict(words)]


def against_mean_counted(words: list[str], axis: str | None = None) -> str:
    """The verdict of ``learner − mean predictor`` counted over the data settings: with one
    setting (or no ``axis``) the words of :func:`against_mean`; with ``n > 1`` settings of the
    axis, ``beats the mean predictor at all n D``, ``worse than predicting the mean at all n D``,
    ``not significantly different from the mean predictor at any of the n D``, or else
    ``significantly worse than the mean predictor at w of n D, better at b`` (the larger count
    first). Never a blanket word for a learner significant at only some settings."""
    n, better, worse = tally(words)
    if axis is None or n < 2:
        return against_mean(words)
    if better == n:
        return f"beats the mean predictor at all {n} {axis}"
    if worse == n:
        return f"worse than predicting the mean at all {n} {axis}"
    if better == 0 and worse == 0:
        return f"not significantly different from the mean predictor at any of the {n} {axis}"
    if worse >= better:
        return (
            f"significantly worse than the mean predictor at {worse} of {n} {axis}, "
            f"better at {better or 'none'}"
        )
    return (
        f"significantly better than the mean predictor at {better} of {n} {axis}, "
        f"worse at {worse or 'none'}"
    )


def beats_mean(p: dict) -> bool:
    """Whether a paired difference ``learner − mean predictor`` is significantly negative."""
    return p["n"] > 0 and not math.isnan(p["mean"]) and p["mean"] < 0 and significant(p)


# ----------------------------------------------------------------------------------------------
# log-log slopes (Theorem 1: regret = O(B sqrt(T)), a slope of at most 1/2)


def loglog_slope(x: Iterable[float], y: Iterable[float]) -> float:
    """Least-squares slope of ``log y`` against ``log x`` over the points with ``x, y > 0``
    (NaN with fewer than two such points or a single distinct ``x``)."""
    x, y = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or len(np.unique(x[ok])) < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def slope_interval(per_rep: dict[object, tuple[list[float], list[float]]]) -> dict[str, float]:
    """A log-log slope with a 95% interval over repetitions: the slope of every repetition's
    own ``(x, y)`` points (:func:`loglog_slope`), then the Student-t interval of their mean
    (:func:`mean_ci`). Repetitions whose slope is undefined (too few positive points) are left
    out and counted in ``dropped``. Returns ``mean``, ``ci95``, ``std``, ``n``, ``dropped``."""
    slopes = [loglog_slope(x, y) for x, y in per_rep.values()]
    ok = [s for s in slopes if not math.isnan(s)]
    st = mean_ci(ok)
    return {**st, "dropped": len(slopes) - len(ok)}


# ----------------------------------------------------------------------------------------------
# paired ratios: the gap to a batch reference (docs/protocol.md §8.2)


def paired_ratio(a: object, b: object) -> dict[str, float]:
    """How many times ``b`` the loss ``a`` is, paired by repetition (``a``, ``b``: pandas Series
    indexed by repetition, e.g. an online learner's and the batch reference's test NMSE).

    With ``l_r = log(a_r / b_r)`` over the ``n`` repetitions both have (finite, positive
    values only): ``ratio = exp(mean l)``, the geometric mean of the per-repetition ratios, and
    the 95% interval ``[exp(mean l − h), exp(mean l + h)]`` with ``h = t_{0.975, n−1} sd(l)/√n``
    (:func:`mean_ci`). Logs make the interval multiplicative and keep it positive; pairing
    removes the split-to-split variation both losses share. Returns ``n``, ``ratio``, ``lo``,
    ``hi`` (NaN where ``n`` is too small)."""
    r = (a / b).dropna()  # type: ignore[operator]
    r = r[np.isfinite(r) & (r > 0)]
    s = mean_ci(np.log(r.to_numpy(dtype=float)))
    mean, half = s["mean"], s["ci95"]
    return {
        "n": s["n"],
        "ratio": math.exp(mean) if s["n"] else math.nan,
        "lo": math.exp(mean - half) if s["n"] > 1 else math.nan,
        "hi": math.exp(mean + half) if s["n"] > 1 else math.nan,
    }


def fmt_ratio(p: dict) -> str:
    """``3.61× [3.12, 4.18]`` for a :func:`paired_ratio` (``—`` without data)."""
    if not p["n"] or math.isnan(p["ratio"]):
        return "—"
    interval = "" if math.isnan(p["lo"]) else f" [{num(p['lo'])}, {num(p['hi'])}]"
    return f"{num(p['ratio'])}×{interval}"


def num(v: float) -> str:
    """Three significant digits, thousands written out (``2,140`` rather than ``2.14e+03``)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
