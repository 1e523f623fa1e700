"""The statistics of every table, figure and verdict, in one place (docs/protocol.md §6-§7).

- 95% Student-t interval of a mean over ``n`` repetitions: half-width
  ``t_{0.975, n-1} s / sqrt(n)`` with ``s`` the sample standard deviation (``ddof = 1``);
  ``t`` from scipy's inverse Student-t distribution function (``scipy.special.stdtrit``, what
  ``scipy.stats.t.ppf`` evaluates, without importing all of ``scipy.stats``). Used by
  ``summary.csv``, the report's paired verdicts and the figures' bands.
- Paired differences: all learners of a repetition see the same data, so a comparison of two
  learners uses the per-repetition differences ``a_r - b_r`` and the interval of their mean.
- Verdict words against the mean predictor: a difference is *significant* when its interval
  excludes 0; over several data settings the words count them ("significantly worse at 1 of 6
  D, better at none").
- Verdicts of the proposed learner against a competitor (docs/protocol.md §7): per-repetition
  log loss ratios ``log(a_r / b_r)`` (scale-free), their paired t-test, Holm–Bonferroni over
  every comparison of a report's verdict tables (:func:`holm`), and no verdict word below
  :data:`MIN_REPETITIONS` repetitions (:func:`ratio_word`).
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


# A verdict word (SG against a competitor) needs at least this many repetitions with a finite
# ratio on both sides; with fewer, the report gives the ratios and intervals only
# (docs/protocol.md §7). Five: a t-interval on 4 degrees of freedom (t = 2.78) is about 30%
# wider than a normal one; on 2 (three repetitions, t = 4.30) it is 2.2 times wider.
MIN_REPETITIONS = 5
# the family-wise level of the Holm-adjusted verdicts
ALPHA = 0.05
# the per-setting word of a comparison with fewer than MIN_REPETITIONS finite pairs
TOO_FEW = "too few repetitions"


def t_test_p(mean: float, sd: float, n: int) -> float:
    """Two-sided p-value of the one-sample t-test of ``mean = 0`` over ``n`` values with sample
    standard deviation ``sd``: ``2 (1 − F_{n−1}(|mean| √n / sd))`` (NaN for ``n < 2``; 0 when
    ``sd = 0`` and ``mean ≠ 0``, 1 when both are 0)."""
    if n < 2 or math.isnan(mean) or math.isnan(sd):
        return math.nan
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    from scipy.special import stdtr

    return float(2.0 * stdtr(n - 1, -abs(mean) * math.sqrt(n) / sd))


def holm(pvalues: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input's order: with the ``m`` finite p-values
    sorted, ``p_(1) ≤ … ≤ p_(m)``, ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j))``. Rejecting
    where ``p̃ < α`` keeps the family-wise error rate at ``α`` for any dependence between the
    tests (Holm 1979). NaN p-values (untested comparisons) stay NaN and do not count in ``m``."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    idx.sort(key=lambda i: pvalues[i])
    m = len(idx)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for j, i in enumerate(idx):
        running = max(running, min(1.0, (m - j) * pvalues[i]))
        out[i] = running
    return out


def ratio_word(p: dict, subject: str = "SG") -> str:
    """The per-setting word of a :func:`paired_ratio` ``subject / other`` whose ``p_holm`` has
    been set (:func:`holm`): ``no data`` without a finite pair, :data:`TOO_FEW` with fewer than
    :data:`MIN_REPETITIONS`, else ``<subject> lower|higher (significant|not significant)``,
    significant when the Holm-adjusted p is below :data:`ALPHA`. The words are those of
    :func:`verdict_word`, so :func:`claim_verdict` collapses both alike."""
    return _paired_word(p, subject, p["ratio"], 1.0)


def claim_verdict(words: list[str]) -> str:
    """Collapse per-setting words into ``holds`` (significantly lower everywhere), ``no
    significant difference`` (significant nowhere, whatever the signs), ``holds in direction,
    not always significantly`` (lower everywhere, significantly somewhere), ``does not hold``
    (significantly higher somewhere, significantly lower nowhere), ``holds in part``
    (significantly lower somewhere, higher nowhere), ``mixed`` (significant both ways),
    ``nothing to compare`` (no setting had data on both sides), or ``no verdict (fewer than 5
    repetitions)`` (:data:`TOO_FEW` at every setting with data)."""
    words = [w for w in words if w != "no data"]
    if words and all(w == TOO_FEW for w in words):
        return f"no verdict (fewer than {MIN_REPETITIONS} repetitions)"
    words = [w for w in words if w != TOO_FEW]
    n = len(words)
    if n == 0:
        return "nothing to compare"
    lower = sum(" lower" in w for w in words)
    sig_lower = sum(w.endswith("lower (significant)") for w in words)
    sig_higher = sum(w.endswith("higher (significant)") for w in words)
    if sig_lower == n:
        return "holds"
    if sig_higher == 0 and sig_lower == 0:  # a direction with no significance is no finding
        return "no significant difference"
    if sig_higher == 0 and lower == n:
        return "holds in direction, not always significantly"
    if sig_higher > 0 and sig_lower == 0:
        return "does not hold"
    if sig_higher == 0:  # significantly lower somewhere, significantly higher nowhere
        return "holds in part"
    return "mixed"


def tally(words: list[str]) -> tuple[int, int, int]:
    """``(n, significantly lower, significantly higher)`` over the per-setting words that have
    data and enough repetitions."""
    words = [w for w in words if w not in ("no data", TOO_FEW)]
    return (
        len(words),
        sum(w.endswith("lower (significant)") for w in words),
        sum(w.endswith("higher (significant)") for w in words),
    )


def counted_verdict(words: list[str], axis: str | None = None) -> str:
    """:func:`claim_verdict`, followed over several data settings (``axis`` names them, e.g.
    ``D``) by how many were significant either way and how many not: ``holds in part
    (significantly lower at 2 of 4 T, no significant difference at 2)``, ``mixed (significantly
    lower at 1 of 4 T, higher at 1, no significant difference at 2)``; settings with too few
    repetitions are counted apart. Never a blanket word where significance differs: only
    ``holds`` (significant at every setting) and ``no significant difference`` (at none) go
    without counts."""
    verdict = claim_verdict(words)
    n, lower, higher = tally(words)
    few = sum(w == TOO_FEW for w in words)
    tail = f"; {few} {axis} with fewer than {MIN_REPETITIONS} repetitions" if few and n else ""
    if axis is None or n < 2 or verdict in ("holds", "no significant difference"):
        return verdict + (f" ({tail[2:]})" if tail else "")
    counts = [(c, w) for c, w in ((lower, "lower"), (higher, "higher")) if c]
    parts = [f"{w} at {c}" for c, w in counts] or ["lower at 0"]
    parts[0] = f"significantly {parts[0]} of {n} {axis}"
    if n - lower - higher:
        parts.append(f"no significant difference at {n - lower - higher}")
    return f"{verdict} ({', '.join(parts)}{tail})"


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
    ``hi`` (NaN where ``n`` is too small), ``p`` (the two-sided paired t-test of ``mean l = 0``,
    :func:`t_test_p`), and ``a_inf`` / ``b_inf``: the repetitions left out because ``a`` or
    ``b`` alone is infinite (diverged; ``0×`` or ``∞×`` cannot enter a mean of logs)."""
    if not (a.index.is_unique and b.index.is_unique):  # type: ignore[union-attr]
        # a repetition with several rows on one side (e.g. two dataset settings left in by the
        # caller's keys) has no single pair: nothing to compare
        return {"n": 0, "ratio": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan,
                "a_inf": 0, "b_inf": 0}  # fmt: skip
    r = (a / b).dropna()  # type: ignore[operator]
    a_inf = int((np.isinf(r) & (r > 0)).sum())
    b_inf = int(((r == 0) & np.isinf(b.reindex(r.index))).sum())  # type: ignore[union-attr]
    r = r[np.isfinite(r) & (r > 0)]
    s = mean_ci(np.log(r.to_numpy(dtype=float)))
    mean, half = s["mean"], s["ci95"]
    return {
        "n": s["n"],
        "ratio": math.exp(mean) if s["n"] else math.nan,
        "lo": math.exp(mean - half) if s["n"] > 1 else math.nan,
        "hi": math.exp(mean + half) if s["n"] > 1 else math.nan,
        "p": t_test_p(mean, s["std"], s["n"]),
        "a_inf": a_inf,
        "b_inf": b_inf,
    }


def paired_error_difference(a: object, b: object) -> dict[str, float]:
    """How much higher the error rate ``a`` is than ``b``, paired by repetition (``a``, ``b``:
    pandas Series of test error rates indexed by repetition; docs/protocol.md §7.4).

    With ``d_r = a_r − b_r`` over the ``n`` repetitions where both are finite: ``mean`` (in
    error-rate units: ``-0.03`` = three points in a hundred fewer misclassified), the 95%
    interval ``[mean − h, mean + h]``, ``h = t_{0.975, n−1} sd(d)/√n`` (:func:`mean_ci`), and
    ``p``, the two-sided paired t-test of ``mean d = 0`` (:func:`t_test_p`). A difference, not
    a ratio: error rates share one unit whatever the losses learned with, and a rate of 0 (a
    perfect split) has no log. ``a_inf`` / ``b_inf``: the repetitions left out because ``a`` or
    ``b`` alone is infinite (a diverged cell's ``test_error``)."""
    if not (a.index.is_unique and b.index.is_unique):  # type: ignore[union-attr]
        return {"n": 0, "mean": math.nan, "lo": math.nan, "hi": math.nan, "ci": math.nan,
                "p": math.nan, "a_inf": 0, "b_inf": 0}  # fmt: skip
    a, b = a.align(b, join="inner")  # type: ignore[union-attr]
    av, bv = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    a_inf = int(np.sum(np.isinf(av) & np.isfinite(bv)))
    b_inf = int(np.sum(np.isinf(bv) & np.isfinite(av)))
    ok = np.isfinite(av) & np.isfinite(bv)
    s = mean_ci(av[ok] - bv[ok])
    mean, half = s["mean"], s["ci95"]
    return {
        "n": s["n"],
        "mean": mean,
        "lo": mean - half if s["n"] > 1 else math.nan,
        "hi": mean + half if s["n"] > 1 else math.nan,
        "ci": half,
        "p": t_test_p(mean, s["std"], s["n"]),
        "a_inf": a_inf,
        "b_inf": b_inf,
    }


def difference_word(p: dict, subject: str = "SG") -> str:
    """The per-setting word of a :func:`paired_error_difference` ``subject − other`` whose
    ``p_holm`` has been set: the words of :func:`ratio_word` (``lower`` when the mean difference
    is below 0), so :func:`claim_verdict` and :func:`counted_verdict` collapse both alike."""
    return _paired_word(p, subject, p["mean"], 0.0)


def _paired_word(p: dict, subject: str, value: float, even: float) -> str:
    """The word of :func:`ratio_word` and :func:`difference_word`: ``value`` (the ratio, or the
    mean difference) below ``even`` (1, or 0) is ``lower``."""
    if not p["n"] or math.isnan(value):
        return "no data"
    if p["n"] < MIN_REPETITIONS:
        return TOO_FEW
    side = f"{subject} lower" if value < even else f"{subject} higher"
    sig = p.get("p_holm", math.nan) < ALPHA
    return f"{side} ({'significant' if sig else 'not significant'})"


def fmt_difference(p: dict) -> str:
    """``-0.0351 [-0.061, -0.0092]`` for a :func:`paired_error_difference` (signed, three
    significant digits; ``—`` without data)."""
    if not p["n"] or math.isnan(p["mean"]):
        return "—"
    interval = "" if math.isnan(p["lo"]) else f" [{p['lo']:+.3g}, {p['hi']:+.3g}]"
    return f"{p['mean']:+.3g}{interval}"


def fmt_ratio(p: dict) -> str:
    """``3.61× [3.12, 4.18]`` for a :func:`paired_ratio` (``—`` without data)."""
    if not p["n"] or math.isnan(p["ratio"]):
        return "—"
    interval = "" if math.isnan(p["lo"]) else f" [{num(p['lo'])}, {num(p['hi'])}]"
    return f"{num(p['ratio'])}×{interval}"


def num(v: float) -> str:
    """Three significant digits, thousands written out (``2,140`` rather than ``2.14e+03``)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
