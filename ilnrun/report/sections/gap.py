"""The gap to the batch fit: every online learner's test NMSE as a multiple of a batch
reference's (kernel ridge regression), paired by repetition, with a 95% interval
(:func:`ilnrun.stats.paired_ratio`, docs/protocol.md §8.2). Stated in the headline and tabulated
with the verdicts; the reference's own NMSE, the yardstick, is printed beside it.

In a classification run (±1 labels, :attr:`~ilnrun.report.data.ReportData.classifies`) the
learners and references may learn with different losses, and a hinge or logistic learner has
no NMSE: there the gap is each learner's **test error rate minus the reference's**, paired by
repetition (:func:`ilnrun.stats.paired_error_difference`), the one unit every loss shares, as
in the test-error verdict (docs/protocol.md §7.4); the headline states it against the batch
reference with the lowest mean test error, the table against every reference."""

from __future__ import annotations

import math

from ...stats import fmt_difference, fmt_ratio, num
from ..data import ReportData, label, md_table, short

HOW = (
    "geometric mean over repetitions of the per-repetition ratio of test NMSEs (both at their "
    "settings selected on validation loss, on the same split), 95% t-interval on the log ratios"
)
HOW_ONE = (
    "the ratio of test NMSEs of the one repetition (both at their settings selected on "
    "validation loss, on the same split); one repetition: no interval can be computed"
)
HOW_ERROR = (
    "mean over repetitions of the per-repetition difference of test error rates (both at their "
    "settings selected on their own validation loss, on the same split), 95% Student-t interval"
)
HOW_ERROR_ONE = (
    "the difference of test error rates of the one repetition (both at their settings selected "
    "on their own validation loss, on the same split); one repetition: no interval can be "
    "computed"
)
# what a difference of error rates reads as, after the table's title
ERROR_UNIT = (
    "0 = as good as the batch fit, +0.02 = two test points in a hundred more misclassified; "
    "the learners' losses may differ, the error rate is in one unit whatever the loss"
)


def _span(ps: list[dict], axis: str | None) -> str:
    """One ratio with its interval, or over several x values the smallest and largest."""
    ok = [p for p in ps if p["n"] and not math.isnan(p["ratio"])]
    if not ok:
        return "no data"
    if len(ps) == 1:
        return fmt_ratio(ok[0])
    lo, hi = min(p["ratio"] for p in ok), max(p["ratio"] for p in ok)
    return f"{num(lo)}–{num(hi)}× over the {len(ok)} {axis}"


def _difference_span(ps: list[dict], axis: str | None) -> str:
    """One difference of error rates with its interval, or over several x values the smallest
    and largest."""
    ok = [p for p in ps if p["n"] and not math.isnan(p["mean"])]
    if not ok:
        return "no data"
    if len(ps) == 1:
        return fmt_difference(ok[0])
    lo, hi = min(p["mean"] for p in ok), max(p["mean"] for p in ok)
    return f"{lo:+.3g} to {hi:+.3g} over the {len(ok)} {axis}"


def _ref_value(r: ReportData, ref: str, metric: str = "test_nmse") -> str:
    """The batch reference's ``metric`` (test NMSE or test error rate): ``mean ± ci``, or its
    range over the x values."""
    if len(r.xs) == 1:
        return r.yardstick(metric, r.xs[0], ref)
    vals = [
        float(s[f"{metric}_mean"].iloc[0])
        for x in r.xs
        if len(s := r.summary_rows(ref, None, x)) and f"{metric}_mean" in s
    ]
    vals = [v for v in vals if math.isfinite(v)]
    return f"{min(vals):.3g}–{max(vals):.3g} over the {r.xa}" if vals else "—"


def _parts(r: ReportData, rows: list, ref: str, k: int | None, span) -> list[str]:
    """``SG 3.1× [2.8, 3.5]`` for every online learner at budget ``k`` (an unbudgeted one at
    every budget) against ``ref``."""
    return [
        f"{short(m)} {span(ps, r.xa)}"
        for rr, m, kk, ps in rows
        if rr == ref and (kk == k or (kk is None and not r.budgeted(m)))
    ]


def headline_lines(r: ReportData) -> list[str]:
    """Per batch reference and budget: each online learner's NMSE as a multiple of it; in a
    classification run, per budget, each learner's test error rate minus the best batch
    reference's (:func:`error_headline_lines`)."""
    if r.gap_metric == "test_error":
        return error_headline_lines(r)
    L = []
    rows = r.gap_rows()
    for ref in r.batch:
        for k in r.ks or [None]:
            parts = _parts(r, rows, ref, k, _span)
            if parts:
                at = f" at k = {k}" if k is not None else ""
                how = "(paired by repetition, 95% interval)" if r.tested else "(one repetition)"
                more = r.tested and len(r.xs) > 1
                L.append(
                    f"- Gap to the batch fit{at}, {r.run_protocol} ({label(ref)}, test NMSE "
                    f"{_ref_value(r, ref)}), "
                    f"each learner's test NMSE as a multiple of it {how}: "
                    + "; ".join(parts)
                    + (" (each interval in the verdicts)." if more else ".")
                )
    return L


def error_headline_lines(r: ReportData) -> list[str]:
    """The gap to the batch fit of a classification run, per budget: each online learner's
    test error rate minus that of the batch reference with the lowest mean test error
    (:meth:`~ilnrun.report.data.ReportData.best_batch`), paired by repetition. The other
    references' gaps are in the table (:func:`table`)."""
    ref = r.best_batch()
    if ref is None:
        return []
    rows = r.gap_rows()
    others = len(r.batch) - 1
    which = (
        f"the batch reference with the lowest mean test error rate of the {len(r.batch)}"
        if others
        else "the batch reference"
    )
    L = []
    for k in r.ks or [None]:
        parts = _parts(r, rows, ref, k, _difference_span)
        if parts:
            at = f" at k = {k}" if k is not None else ""
            how = "(paired by repetition, 95% interval)" if r.tested else "(one repetition)"
            more = r.tested and len(r.xs) > 1
            L.append(
                f"- Gap to the batch fit{at}, {r.run_protocol}, in test error rate ({which}: "
                f"{label(ref)}, test error rate {_ref_value(r, ref, 'test_error')}), each "
                f"learner's test error rate minus it {how}: "
                + "; ".join(parts)
                + (" (each interval in the verdicts)." if more else ".")
            )
    return L


def table(r: ReportData, head: list[str]) -> list[str]:
    """The gap per learner, budget and x value, under a row with the reference's NMSE (in a
    classification run: its test error rate, and the gaps as differences of error rates)."""
    L: list[str] = []
    rows_all = r.gap_rows()
    error = r.gap_metric == "test_error"
    for ref in r.batch:
        if error:
            rows = [[f"{label(ref)}'s test error rate (the yardstick)", "—"]]
            rows[0] += [r.yardstick("test_error", x, ref) for x in r.xs]
            title = f"test error rate minus {label(ref)}'s"
            how = f"{HOW_ERROR if r.tested else HOW_ERROR_ONE}; {ERROR_UNIT}"
            sign, cell = "−", fmt_difference
        else:
            rows = [[f"{label(ref)}'s test NMSE (the yardstick)", "—"]]
            rows[0] += [r.yardstick("test_nmse", x, ref) for x in r.xs]
            title = f"test NMSE as a multiple of {label(ref)}'s"
            how = f"{HOW if r.tested else HOW_ONE}; 1× = as good as the batch fit"
            sign, cell = "÷", fmt_ratio
        rows += [
            [f"{label(m)} {sign} {short(ref)}", k if k is not None else "—"] + [cell(p) for p in ps]
            for rr, m, k, ps in rows_all
            if rr == ref
        ]
        L += [
            f"**Gap to the batch fit: {title}** ({how}):",
            "",
            md_table(["learner", *head[1:]], rows),
            "",
        ]
    return L
