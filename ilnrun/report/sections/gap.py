"""The gap to the batch fit: every online learner's test NMSE as a multiple of a batch
reference's (kernel ridge regression), paired by repetition, with a 95% interval
(:func:`ilnrun.stats.paired_ratio`, docs/protocol.md §8.2). Stated in the headline and tabulated
with the verdicts; the reference's own NMSE, the yardstick, is printed beside it."""

from __future__ import annotations

import math

from ...stats import fmt_ratio, num
from ..data import ReportData, label, md_table, short

HOW = (
    "geometric mean over repetitions of the per-repetition ratio of test NMSEs (both at their "
    "settings selected on validation loss, on the same split), 95% t-interval on the log ratios"
)
HOW_ONE = (
    "the ratio of test NMSEs of the one repetition (both at their settings selected on "
    "validation loss, on the same split); one repetition: no interval can be computed"
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


def _ref_nmse(r: ReportData, ref: str) -> str:
    """The batch reference's test NMSE: ``mean ± ci``, or its range over the x values."""
    if len(r.xs) == 1:
        return r.yardstick("test_nmse", r.xs[0], ref)
    vals = [
        float(s["test_nmse_mean"].iloc[0])
        for x in r.xs
        if len(s := r.summary_rows(ref, None, x)) and "test_nmse_mean" in s
    ]
    vals = [v for v in vals if math.isfinite(v)]
    return f"{min(vals):.3g}–{max(vals):.3g} over the {r.xa}" if vals else "—"


def headline_lines(r: ReportData) -> list[str]:
    """Per batch reference and budget: each online learner's NMSE as a multiple of it."""
    L = []
    rows = r.gap_rows()
    for ref in r.batch:
        for k in r.ks or [None]:
            parts = [
                f"{short(m)} {_span(ps, r.xa)}"
                for rr, m, kk, ps in rows
                if rr == ref and (kk == k or (kk is None and not r.budgeted(m)))
            ]
            if parts:
                at = f" at k = {k}" if k is not None else ""
                how = "(paired by repetition, 95% interval)" if r.tested else "(one repetition)"
                more = r.tested and len(r.xs) > 1
                L.append(
                    f"- Gap to the batch fit{at}, {r.run_protocol} ({label(ref)}, test NMSE "
                    f"{_ref_nmse(r, ref)}), "
                    f"each learner's test NMSE as a multiple of it {how}: "
                    + "; ".join(parts)
                    + (" (each interval in the verdicts)." if more else ".")
                )
    return L


def table(r: ReportData, head: list[str]) -> list[str]:
    """The gap per learner, budget and x value, under a row with the reference's NMSE."""
    L: list[str] = []
    rows_all = r.gap_rows()
    for ref in r.batch:
        rows = [[f"{label(ref)}'s test NMSE (the yardstick)", "—"]]
        rows[0] += [r.yardstick("test_nmse", x, ref) for x in r.xs]
        rows += [
            [f"{label(m)} ÷ {short(ref)}", k if k is not None else "—"] + [fmt_ratio(p) for p in ps]
            for rr, m, k, ps in rows_all
            if rr == ref
        ]
        L += [
            f"**Gap to the batch fit: test NMSE as a multiple of {label(ref)}'s** "
            f"({HOW if r.tested else HOW_ONE}; "
            "1× = as good as the batch fit):",
            "",
            md_table(["learner", *head[1:]], rows),
            "",
        ]
    return L
