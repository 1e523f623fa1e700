"""The headline: one line per claim checked, collapsed over budgets; where every learner stands
against the mean predictor, per budget, in plain words; then theory findings."""

from __future__ import annotations

import math

from ..data import COMPARISONS, ONE_REPETITION, ReportData, label
from .gap import headline_lines as gap_lines
from .rate import headline_lines as rate_lines
from .selected import edge_text
from .theory import last_decade_clause, slope_sentence


def _nmse_span(r: ReportData, m: str, k: int | None, metric: str) -> str:
    """``NMSE 0.31–0.45`` over the x values of a learner's selected settings (means)."""
    col = f"{metric}_mean"
    vals = []
    for x in r.xs:
        s = r.summary_rows(m, k if r.budgeted(m) else None, x)
        if len(s) and col in s and math.isfinite(v := float(s[col].iloc[0])):
            vals.append(v)
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    return f"NMSE {lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"NMSE {lo:.3g}–{hi:.3g}"


def nmse_lines(r: ReportData) -> list[str]:
    """Per budget: each learner's test NMSE (with one repetition, where no comparison with the
    mean predictor can be tested)."""
    L = []
    for k in r.ks or [None]:
        parts = [
            f"{label(m)} {span}" for m in r.methods if (span := _nmse_span(r, m, k, "test_nmse"))
        ]
        if parts:
            at = f"At k = {k}" if k is not None else "Overall"
            L.append(f"- {at}, test NMSE of the one repetition: " + "; ".join(parts) + ".")
    return L


def mean_lines(r: ReportData) -> list[str]:
    """Per budget: each learner against the mean predictor (test loss, paired), with its NMSE."""
    if not r.has_const:
        return []
    if not r.tested:
        return nmse_lines(r)
    exact = r.mean_rows("test_loss")
    est = {(m, k): v for m, k, _, v in r.mean_rows("test_loss_estimated")}
    where = f", counted over the {len(r.xs)} {r.xa}" if r.xa and len(r.xs) > 1 else ""
    n_est = r.cfg["evaluation"].get("n_test_estimated", "all")
    points = "all test points" if n_est == "all" else f"first {n_est} test points"
    L = []
    for k in r.ks or [None]:
        parts = []
        for m, kk, _, v in exact:
            if kk != k and not (kk is None and not r.budgeted(m)):
                continue
            span = _nmse_span(r, m, kk, "test_nmse")
            if v == "nothing to compare":
                v = "nothing to compare (no selected setting: every setting diverged)"
            text = f"{label(m)}: {v}" + (f" ({span})" if span else "")
            if (m, kk) in est:
                span2 = _nmse_span(r, m, kk, "test_nmse_estimated")
                text += (
                    f", and with Algorithm-2 test estimates (no kernel; {points}, against the "
                    f"mean predictor on the same points) {est[(m, kk)]}"
                ) + (f" ({span2})" if span2 else "")
            parts.append(text)
        if parts:
            at = f"At k = {k}" if k is not None else "Overall"
            L.append(
                f"- {at}, against the mean predictor (exact test loss{where}): "
                + "; ".join(parts)
                + "."
            )
    return L


def render(r: ReportData) -> list[str]:
    L = ["## Headline", ""]
    if not r.tested:
        L.append(f"- {ONE_REPETITION}")
    L += mean_lines(r)
    L += gap_lines(r)
    L += rate_lines(r)
    for metric, by, what in COMPARISONS if r.tested else ():
        rows = r.verdict_rows(metric, by)
        for subject in r.proposed:
            for other in r.compared:
                by_verdict: dict[str, list] = {}
                for s, o, k, _, v in rows:
                    if s == subject and o == other:
                        by_verdict.setdefault(v, []).append(k)
                if by_verdict:
                    parts = "; ".join(
                        f"**{v}** at k = {', '.join(str(k) for k in ks)}"
                        for v, ks in by_verdict.items()
                    )
                    L.append(
                        f"- {label(subject)} reaches a lower {what} than {label(other)}: {parts}."
                    )
    edges = [
        f"{label(m)}" + (f" (k = {k})" if k is not None else "") + f": {edge_text(r, m, k)}"
        for m in r.methods
        for k in (r.ks if r.budgeted(m) else [None])
        if r.edges(m, k)
    ]
    if edges:
        L.append(
            "- Selected at the edge of its grid (the best value may lie outside it): "
            + "; ".join(edges)
            + "."
        )
    if r.xa == "T":
        raw = {(m, setting): g for m, setting, g in r.regret_raw()}
        B = float(r.cfg["evaluation"].get("regret_B") or 1.0)
        for m, setting, g in r.regret_groups():
            if m in r.proposed:
                tail = last_decade_clause(raw[(m, setting)], B)
                L.append(f"- {label(m)} ({setting}): {slope_sentence(g)}{tail}")
    if "lemma5_max_ratio" in r.runs and r.runs["lemma5_max_ratio"].notna().any():
        ratio = r.runs["lemma5_max_ratio"].dropna()
        L.append(
            f"- Lemma 5's bound on |α|₁ {'never failed' if (ratio <= 1).all() else 'failed'} "
            f"({len(ratio)} passes checked after every round; largest |α|₁/bound = "
            f"{ratio.max():.3g})."
        )
    L.append("")
    return L
