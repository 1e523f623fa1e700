"""The headline: one line per claim checked, collapsed over budgets; where every learner stands
against the mean predictor, per budget, in plain words; then theory findings."""

from __future__ import annotations

import math

from ...stats import ALPHA, MIN_REPETITIONS
from ..data import (
    COMPARISONS,
    ERROR_COMPARISON,
    FREE,
    KERNEL,
    MODE_TITLE,
    ONE_REPETITION,
    ReportData,
    label,
    m_test_text,
    pick,
)
from .best import headline_lines as best_headline_lines
from .gap import headline_lines as gap_lines
from .rate import headline_lines as rate_lines
from .selected import edge_text
from .theory import headline_clause, slope_sentence


def _nmse_span(r: ReportData, m: str, k: int | None, metric: str) -> str:
    """``NMSE 0.31–0.45`` over the x values of a learner's selected settings (means)."""
    col = f"{metric}_mean"
    vals = []
    for x in r.xs:
        s = r.summary_rows(m, k if r.budgeted(m) else None, x)
        if len(s) and col in s and math.isfinite(v := float(s[col].iloc[0])):
            vals.append(v)
    return _span_text(vals)


def _span_text(vals: list[float]) -> str:
    """``NMSE 0.31–0.45`` (or ``NMSE 0.31`` when the values round alike; ``''`` for none)."""
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    return f"NMSE {lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"NMSE {lo:.3g}–{hi:.3g}"


def _view_nmse_span(r: ReportData, m: str, k: int | None, mode: str) -> str:
    """:func:`_nmse_span` of the settings selected in the runs of protocol ``mode``: the mean
    ``test_nmse`` of the view's selected rows (for the proposed learner without the kernel, its
    Algorithm-2 ``test_nmse_estimated``)."""
    runs = r.view(mode)
    vals = []
    for x in r.xs:
        rows = pick(runs, m, r.keys(k if r.budgeted(m) else None, x), None)
        if "test_nmse" not in rows or rows.empty:
            continue
        if math.isfinite(v := float(rows["test_nmse"].mean())):
            vals.append(v)
    return _span_text(vals)


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
            what = f" ({protocol_clause(r)})" if protocol_clause(r) else ""
            L.append(f"- {at}, test NMSE of the one repetition{what}: " + "; ".join(parts) + ".")
    return L


def protocol_clause(r: ReportData) -> str:
    """How the run's own tables evaluated the learners, in the words of the headline: the
    proposed learners with the closed-form kernel (exact run), or every learner without it."""
    if r.eval_kernel == "free":
        return "every learner selected and evaluated with no closed-form kernel value"
    subjects = ", ".join(label(m) for m in r.proposed)
    return f"{subjects} selected and evaluated with the closed-form kernel" if subjects else ""


def mean_lines(r: ReportData) -> list[str]:
    """Per budget: each learner against the mean predictor (test loss, paired), with its NMSE."""
    if not r.has_const:
        return []
    if not r.tested:
        return nmse_lines(r)
    exact = r.mean_rows("test_loss")
    free_run = r.eval_kernel == "free"
    # the proposed learner without the kernel: selected and scored by Algorithm 2 (FREE view);
    # results without an Algorithm-2 validation loss: its kernel-selected setting, estimated
    free_view = not free_run and r.view(FREE) is not None
    est = (
        {}
        if free_run
        else {
            (m, k): v
            for m, k, _, v in (
                r.mean_rows("test_loss", FREE) if free_view else r.mean_rows("test_loss_estimated")
            )
            if m in r.proposed
        }
    )
    where = f", counted over the {len(r.xs)} {r.xa}" if r.xa and len(r.xs) > 1 else ""
    ev = r.cfg["evaluation"]
    n_est = ev.get("n_test_estimated", "all")
    points = "all test points" if n_est == "all" else f"first {n_est} test points"
    how = "test loss without the kernel" if free_run else "exact test loss"
    tail = f"; {protocol_clause(r)}" if protocol_clause(r) else ""
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
                if free_view:
                    span2 = _view_nmse_span(r, m, kk, FREE)
                    text += (
                        ", and without the kernel (selected on its Algorithm-2 validation loss, "
                        f"Algorithm-2 test estimates, {m_test_text(ev['m_test'])}; {points}, "
                        f"against the mean predictor on the same points) {est[(m, kk)]}"
                    )
                else:
                    span2 = _nmse_span(r, m, kk, "test_nmse_estimated")
                    text += (
                        ", and without the kernel at test time (Algorithm-2 test estimates, "
                        f"settings selected with the kernel; {points}, against the mean "
                        f"predictor on the same points) {est[(m, kk)]}"
                    )
                text += f" ({span2})" if span2 else ""
            parts.append(text)
        if parts:
            at = f"At k = {k}" if k is not None else "Overall"
            L.append(
                f"- {at}, against the mean predictor ({how}{where}{tail}): "
                + "; ".join(parts)
                + "."
            )
    return L


def claim_subject(r: ReportData, subject: str, mode: str, i: int) -> str:
    """The subject of a verdict line, saying its protocol: comparison ``i`` of
    :data:`COMPARISONS` made ``mode`` (with the closed-form kernel / without the kernel)."""
    return f"{label(subject)}, {protocol_words(r, subject, mode, i)},"


def protocol_words(r: ReportData, subject: str, mode: str, i: int) -> str:
    """How ``subject`` was selected (and evaluated) in comparison ``i`` of :data:`COMPARISONS`
    made ``mode``: ``selected and evaluated with the closed-form kernel``, ..."""
    if COMPARISONS[i][1] is not None:  # each learner's best online setting: no kernel in it
        return (
            "without the kernel (each learner's best setting for online loss; its online "
            "predictions are Algorithm-2 estimates)"
        )
    estimated = r.select_modes().get(subject) == "estimated"
    if mode == FREE:
        if i == 0:
            return (
                "selected and evaluated without the kernel (Algorithm-2 validation and test "
                f"estimates, {m_test_text(r.cfg['evaluation']['m_test'])})"
            )
        return "selected without the kernel (on its Algorithm-2 validation loss)"
    if i == 0:
        if estimated:
            return (
                "selected on its Algorithm-2 validation loss and evaluated with the closed-form "
                "kernel"
            )
        return "selected and evaluated with the closed-form kernel"
    if estimated:
        return "selected without the kernel (on its Algorithm-2 validation loss)"
    return "selected with the closed-form kernel"


# what each comparison's headline line says after "reaches a lower"
CLAIM_WHAT = ("test loss", "online loss (same settings)", "online loss")


def claim_lines(r: ReportData) -> list[str]:
    """One line per (protocol, comparison, subject, competitor), collapsed over budgets; the
    comparison on each learner's best online setting once, as it uses no kernel."""
    L = []
    modes = [m for m in (KERNEL, FREE) if r.view(m) is not None]
    for mode in modes:
        for i, (metric, by, _) in enumerate(COMPARISONS):
            if by is not None and mode != modes[-1]:
                continue  # the same numbers in both views: said once
            rows = r.verdict_rows(metric, by, mode)
            for subject in r.proposed:
                for other in r.compared_in(mode):
                    by_verdict: dict[str, list] = {}
                    ratios: dict[str, list] = {}
                    for s, o, k, ps, v in rows:
                        if s == subject and o == other:
                            by_verdict.setdefault(v, []).append(k)
                            ratios.setdefault(v, []).extend(p["ratio"] for p in ps)
                    if by_verdict:
                        parts = "; ".join(
                            f"**{v}**{ratio_span(ratios[v], v)} at k = "
                            f"{', '.join(str(k) for k in ks)}"
                            for v, ks in by_verdict.items()
                        )
                        L.append(
                            f"- {claim_subject(r, subject, mode, i)} reaches a lower "
                            f"{CLAIM_WHAT[i]} than {label(other)}{points_note(r, mode, i)}: "
                            f"{parts}."
                        )
    return L


def error_lines(r: ReportData) -> list[str]:
    """The test-error verdict lines of a classification run (docs/protocol.md §7.4): one per
    (subject, competitor), collapsed over budgets, in the run's own protocol; none for a
    regression run."""
    mode = r.error_mode
    if not r.classifies or r.view(mode) is None:
        return []
    metric, by, _ = ERROR_COMPARISON
    rows = r.verdict_rows(metric, by, mode)
    L = []
    for subject in r.proposed:
        for other in r.compared_in(mode):
            by_verdict: dict[str, list] = {}
            diffs: dict[str, list] = {}
            for s, o, k, ps, v in rows:
                if s == subject and o == other:
                    by_verdict.setdefault(v, []).append(k)
                    diffs.setdefault(v, []).extend(p["mean"] for p in ps)
            if by_verdict:
                parts = "; ".join(
                    f"**{v}**{difference_span(diffs[v], v)} at k = {', '.join(str(k) for k in ks)}"
                    for v, ks in by_verdict.items()
                )
                L.append(
                    f"- {claim_subject(r, subject, mode, 0)} reaches a lower test error rate "
                    f"than {label(other)} (settings selected on each learner's own validation "
                    f"loss; paired differences of error rates): {parts}."
                )
    return L


def difference_span(diffs: list[float], verdict: str) -> str:
    """``, error-rate difference -0.05 to +0.01`` over a line's cells: what a line without a
    verdict word gives in its place."""
    v = [x for x in diffs if math.isfinite(x)]
    if not verdict.startswith("no verdict") or not v:
        return ""
    lo, hi = f"{min(v):+.3g}", f"{max(v):+.3g}"
    return ", error-rate difference (mean over repetitions) " + (
        lo if lo == hi else f"{lo} to {hi}"
    )


def ratio_span(ratios: list[float], verdict: str) -> str:
    """``, loss ratio 0.31–0.62×`` over a line's cells: the numbers a line without a verdict
    word gives in its place (fewer than :data:`~ilnrun.stats.MIN_REPETITIONS` repetitions)."""
    v = [x for x in ratios if math.isfinite(x)]
    if not verdict.startswith("no verdict") or not v:
        return ""
    lo, hi = f"{min(v):.3g}", f"{max(v):.3g}"
    return f", loss ratio (geometric mean over repetitions) {lo}×" + ("" if lo == hi else f"–{hi}×")


def best_lines(r: ReportData) -> list[str]:
    """The "against the best competitor" lines (:mod:`.best`), one protocol per verdict view;
    the proposed learner's protocol worded as its test-loss verdict lines word it."""
    modes = [m for m in (KERNEL, FREE) if r.view(m) is not None]
    subject = r.proposed[0] if r.proposed else ""
    return best_headline_lines(r, {m: protocol_words(r, subject, m, 0) for m in modes})


def family_line(r: ReportData) -> str:
    """How many comparisons the verdict lines below rest on, and how their words are decided."""
    modes = dict.fromkeys(MODE_TITLE[mode] for mode, _, _ in r.verdict_plan())
    errors = r.classifies and r.view(r.error_mode) is not None
    return (
        "- The verdicts below compare per-repetition loss ratios (the proposed learner's over "
        "the other's, paired)"
        + (" and per-repetition differences of test error rates" if errors else "")
        + f": {r.n_comparisons} paired t-tests over all verdict tables "
        f"({' and '.join(modes)}), "
        f"significant when the Holm-adjusted p < {ALPHA:g}; no verdict word with fewer than "
        f"{MIN_REPETITIONS} repetitions (this run: {r.repetitions})."
    )


def points_note(r: ReportData, mode: str, i: int) -> str:
    """Where the without-kernel test-loss comparison's two sides are scored."""
    if mode != FREE or i != 0:
        return ""
    if r.free_points_differ:
        n_est = r.cfg["evaluation"].get("n_test_estimated", "all")
        return f" (on its own features, all test points; the proposed learner on the first {n_est})"
    return " (on its own features, same test points)"


def render(r: ReportData) -> list[str]:
    L = ["## Headline", ""]
    if not r.tested:
        L.append(f"- {ONE_REPETITION}")
    if r.mixed_losses():
        L.append(f"- {r.mixed_losses()}")
    L += mean_lines(r)
    L += gap_lines(r)
    L += rate_lines(r)
    if r.tested:
        claims = claim_lines(r)
        L += [family_line(r)] if claims or error_lines(r) else []
    L += best_lines(r)
    if r.tested:
        L += claims + error_lines(r)
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
                # with intervals, every window's slope; one repetition: the mean curve's
                tail = headline_clause(raw[(m, setting)], B, setting) if r.tested else ""
                L.append(
                    f"- {label(m)} ({setting}), {r.run_protocol} (regret of its predictions "
                    f"evaluated {'exactly' if r.eval_kernel == 'exact' else 'by Algorithm 2'}):"
                    + (tail or f" {slope_sentence(g)}")
                )
    if "lemma5_max_ratio" in r.runs and r.runs["lemma5_max_ratio"].notna().any():
        ratio = r.runs["lemma5_max_ratio"].dropna()
        held = (ratio <= 1).all()
        L.append(
            "- Implementation check, not a finding: by its proof, Lemma 5's bound on |α|₁ is "
            "true of every pass of the update, and the code "
            + ("met it" if held else f"**exceeded it in {(ratio > 1).sum()} passes (a bug)**")
            + f" ({len(ratio)} passes checked after every round; largest |α|₁/bound = "
            f"{ratio.max():.3g})."
        )
    L.append("")
    return L
