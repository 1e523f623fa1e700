"""The paper's claim as verdict rows: paired loss ratios of the proposed learner against each
competitor, per budget and x value (Holm-adjusted over the report), collapsed into one counted
word (:mod:`ilnrun.stats`); in a classification run also the paired differences of test error
rates, in the same Holm family, with each side against the majority class; then every learner
against the best constant (mean) predictor, on paired differences (docs/protocol.md §7–§8)."""

from __future__ import annotations

import math

from ...stats import ALPHA, MIN_REPETITIONS, claim_verdict, fmt_difference, fmt_ratio, verdict_word
from ..data import (
    COMPARISONS,
    CONST_OF,
    ERROR_COMPARISON,
    FREE,
    KERNEL,
    MODE_TITLE,
    ONE_REPETITION,
    ReportData,
    fmt,
    label,
    m_test_text,
    md_table,
    short,
)
from .gap import table as gap_table

WHICH_LOSS = (
    "Which loss each {verdict} uses: the test-loss {verdict}s evaluate every learned predictor "
    "**exactly** — {subjects} with the closed-form kernel (`Σ α_i k(x_i, x)`), which a user "
    "without the kernel cannot do; the feature learners on their own features. What such a user "
    "gets, {subjects}'s Algorithm-2 test loss (`test_loss_estimated`, `m_test` = {m_test} samples "
    "per point on {n_est} test points), enters only the comparison with the mean predictor "
    "below, as its own row. The online-loss {verdict}s use each learner's own online predictions "
    "(for {subjects}, its Algorithm-2 estimates `E_t`)."
)


FREE_HOW = (
    "Without the kernel, as a user without the closed-form kernel can do it: {subjects} "
    "selected on its Algorithm-2 validation loss (`val_loss_estimated`) and scored by its "
    "Algorithm-2 test loss (`test_loss_estimated`, {m_test} samples per point on {n_est} test "
    "points); the learners that do not need the kernel ({others}) selected on their validation "
    "loss and scored on their own features{points}. Learners that need the kernel are left out. "
    "The online losses are each learner's own predictions during the pass (for {subjects}, its "
    "Algorithm-2 estimates `E_t`); the comparison on each learner's best setting for online "
    "loss is made in this table only, as no kernel chooses or scores it."
)
FREE_RUN = (
    "Without the kernel (`evaluation.kernel: free`): every learner was selected and scored with "
    "no closed-form kernel value ({subjects} on its Algorithm-2 validation and test loss on every "
    "point, {m_test} samples per point; the others on their own features)."
)
SAME_POINTS = ", on the same test points (`test_loss_subset`)"
OTHER_POINTS = (
    " — **on all test points, while {subjects}'s Algorithm-2 loss is on the first {n_est}**: "
    "these results predate `test_loss_subset`, so the two sides are scored on different test "
    "points (paired by repetition all the same, both estimate the expected loss, with more "
    "noise than on the same points)"
)


def mean_note(r: ReportData, a: str, b: str, k: int | None, mode: str | None = None) -> str:
    """Where two compared learners stand against the mean predictor (test loss) at a budget."""
    if not r.has_const:
        return ""
    rows = {m: v for m, kk, _, v in r.mean_rows("test_loss", mode) if kk == k}
    va, vb = rows.get(a), rows.get(b)
    if va == vb and va is not None and va.startswith("worse than predicting the mean"):
        return f"both learners are {va}"  # significantly worse at every setting
    parts = [f"{short(m)}: {v}" for m, v in ((a, va), (b, vb)) if v is not None]
    return "; ".join(parts)


def render(r: ReportData) -> list[str]:
    if not r.proposed:
        return []
    subjects = ", ".join(label(m) for m in r.proposed)
    ev = r.cfg["evaluation"]
    L = [
        "## Verdict on the paper's claim" if r.tested else "## The paper's claim",
        "",
        f"Claim (paper Section 6): at an equal feature budget, {subjects} reaches a lower loss "
        "than the other learners. The paper does not say which loss, so three comparisons are "
        "made: the test loss of the learned predictor with settings selected on validation "
        "loss; the online loss of the single pass with the same settings; and the online loss "
        "with each learner's best setting for online loss (the regret view: best step size in "
        "hindsight). Each is made twice: **with the closed-form kernel** (the proposed "
        "learner selected and evaluated exactly, `Σ α_i k(x_i, x)`) and **without the kernel** "
        "(Algorithm 2 at validation and test time: what the method is for). A fourth puts every "
        "learner against the mean predictor. Cells: the proposed learner's loss as a multiple "
        "of the other's, paired by repetition (below 1× = the proposed learner is better): "
        + (
            "the geometric mean of the per-repetition ratios with its 95% interval "
            "(`exp` of the mean log ratio ± its Student-t half-width)."
            if r.tested
            else f"one repetition. {ONE_REPETITION}"
        ),
        "",
    ]
    if r.classifies and r.view(r.error_mode) is not None:
        L += [
            "For ±1 labels a further comparison is made on the **test error rate**, which "
            "shares one unit whatever loss each learner learns with: paired differences of "
            "error rates (below).",
            "",
        ]
    if r.tested:
        L += [family_text(r), ""]
    head = ["claim", "k"] + [f"{r.xa}={x}" if r.xa else "all" for x in r.xs]
    made = [mode for mode in (KERNEL, FREE) if r.view(mode) is not None]
    for mode in (KERNEL, FREE):
        L += [f"### {'Verdict table' if r.tested else 'Comparisons'} {MODE_TITLE[mode]}", ""]
        L += [mode_text(r, mode, subjects, ev), ""]
        if mode in made:
            L += comparison_tables(r, head, mode, last=mode == made[-1])
    L += error_tables(r, head)
    L += gap_table(r, head)
    L += against_mean_table(r, head)
    return L


ERROR_HOW = (
    "The labels are ±1, so every learner is also scored by its **test error rate** "
    "(`test_error`: the fraction of test points where the sign of its prediction is not the "
    "label; a prediction of 0 counts as an error), in one unit whatever loss it learns "
    "with.{mixed} Settings are those selected on each learner's **own validation loss** (its "
    "loss, as in every table of this report; not on a validation error rate). Cells: the "
    "proposed learner's error rate minus the other's, paired by repetition (below 0 = the "
    "proposed learner misclassifies fewer test points; `-0.02` = two test points in a hundred "
    "fewer): {cell} Each side is also put against the **majority class** (the majority class "
    "of the training labels predicted everywhere, `test_error_const`; paired differences, "
    "each with its own 95% interval). {protocol}"
)
MIXED_ERROR = (
    " The learners learn with different losses, so the loss ratios above divide numbers in "
    "different units: **this test-error verdict is the comparison that is comparable**."
)
ERROR_CELL = (
    "the mean of the per-repetition differences with its 95% Student-t interval; its paired "
    "t-test is in the report's Holm family."
)
ERROR_PROTOCOL = {
    KERNEL: "Made with the closed-form kernel, as the run evaluated: {subjects}'s error is that "
    "of its kernel-evaluated predictor (`Σ α_i k(x_i, x)`). The error rate of its Algorithm-2 "
    "predictions is not recorded in an exact run, so no test-error verdict is made without the "
    "kernel; `evaluation.kernel: free` gives one.",
    FREE: "Made without the kernel, as the run evaluated (`evaluation.kernel: free`): "
    "{subjects}'s error is that of its Algorithm-2 predictions on every test point, the "
    "others' of their own features.",
}
# claim_verdict's words for "learner − majority class", in plain words
AGAINST_MAJORITY = {
    "holds": "beats the majority class",
    "holds in direction, not always significantly": "below the majority class, not always "
    "significantly",
    "does not hold": "worse than the majority class",
    "no significant difference": "not distinguishable from the majority class",
    "holds in part": "significantly better than the majority class somewhere, worse nowhere",
    "mixed": "mixed against the majority class",
    "nothing to compare": "nothing to compare",
}


def majority_note(r: ReportData, a: str, b: str, k: int | None, mode: str) -> str:
    """Where two compared learners stand against the majority class (test error, paired by
    repetition, each x value's own 95% interval) at a budget."""
    parts = []
    for m in (a, b):
        kk = k if r.budgeted(m) else None
        words = [verdict_word(r.vs_mean(m, kk, x, "test_error", mode), short(m)) for x in r.xs]
        parts.append(f"{short(m)}: {AGAINST_MAJORITY.get(claim_verdict(words), '—')}")
    return "; ".join(parts)


def error_tables(r: ReportData, head: list[str]) -> list[str]:
    """The test-error verdict of a classification run (docs/protocol.md §7.4): the paired
    differences ``test_error(proposed) − test_error(other)`` per budget and x value, in the
    run's own protocol (:attr:`ReportData.error_mode`), Holm-adjusted with every other verdict
    cell of the report, with each side against the majority class. Nothing for a regression
    run."""
    mode = r.error_mode
    if not r.classifies or r.view(mode) is None:
        return []
    subjects = ", ".join(label(m) for m in r.proposed)
    metric, by, what = ERROR_COMPARISON
    note = r.has_const and "test_error_const" in r.runs
    holm = ["Holm-adjusted p" + (f" (per {r.xa})" if r.xa else "")] if r.tested else []
    rows = [
        [f"{short(s)} < {label(o)}", k if k is not None else "—"]
        + [difference_cell(p, label(o)) for p in ps]
        + ([", ".join(p_text(p.get("p_holm", math.nan)) for p in ps)] if r.tested else [])
        + ([word(r, v)] if r.tested else [])
        + ([majority_note(r, s, o, k, mode)] if note and r.tested else [])
        for s, o, k, ps, v in r.verdict_rows(metric, by, mode)
    ]
    how = ERROR_HOW.format(
        mixed=MIXED_ERROR if r.mixed_losses() else "",
        cell=ERROR_CELL if r.tested else f"one repetition. {ONE_REPETITION}",
        protocol=ERROR_PROTOCOL[mode].format(subjects=subjects),
    )
    verdict = ["verdict"] if r.tested else []
    majority = ["against the majority class"] if note and r.tested else []
    return [
        f"### {'Verdict' if r.tested else 'Comparison'} on the test error rate",
        "",
        how,
        "",
        f"**{what[0].upper() + what[1:]}, {MODE_TITLE[mode]}**:",
        "",
        md_table([*head, *holm, *verdict, *majority], rows),
        "",
    ]


def difference_cell(p: dict, other: str) -> str:
    """A paired error-rate difference's cell: ``-0.0351 [-0.061, -0.0092]``, with the
    repetitions left out because one side diverged."""
    return fmt_difference(p) + _left_out(p, other)


def mode_text(r: ReportData, mode: str, subjects: str, ev: dict) -> str:
    """How the verdicts of ``mode`` are made, or why they are not."""
    verdict = "verdict" if r.tested else "comparison"
    n_est = ev.get("n_test_estimated", "all")
    if mode == KERNEL:
        if r.view(KERNEL) is None:
            return (
                "Not run: this run's protocol is `evaluation.kernel: free`, so no learner was "
                "selected or evaluated with the closed-form kernel."
            )
        return WHICH_LOSS.format(
            subjects=subjects, m_test=ev["m_test"], n_est=n_est, verdict=verdict
        )
    if r.eval_kernel == "free":
        return FREE_RUN.format(subjects=subjects, m_test=m_test_text(ev["m_test"]))
    if r.view(FREE) is None:
        return (
            f"Cannot be made from these results: {subjects}'s rows carry no Algorithm-2 "
            "validation loss (`val_loss_estimated`, written since ilnrun selects without the "
            "kernel), so no setting can be selected without the kernel. Rerun the config to "
            "get it."
        )
    others = ", ".join(label(m) for m in r.compared_in(FREE) if m not in r.proposed) or "none"
    points = (
        OTHER_POINTS.format(subjects=subjects, n_est=n_est) if r.free_points_differ else SAME_POINTS
    )
    return FREE_HOW.format(
        subjects=subjects,
        m_test=m_test_text(ev["m_test"]),
        n_est=n_est,
        others=others,
        points=points,
    )


def comparison_tables(r: ReportData, head: list[str], mode: str, last: bool) -> list[str]:
    """The comparisons of :data:`COMPARISONS` on the runs of protocol ``mode``, the first with
    where each side stands against the mean predictor; the one on each learner's best online
    setting only in the ``last`` table made (no kernel chooses or scores it: the same numbers
    in both views)."""
    L: list[str] = []
    verdict = ["verdict"] if r.tested else []  # one repetition: the differences only
    for i, (metric, by, what) in enumerate(COMPARISONS):
        if by is not None and not last:
            continue
        title = MODE_TITLE[FREE] + " (no kernel chooses or scores it)" if by else MODE_TITLE[mode]
        note = i == 0 and r.has_const and r.tested
        holm = ["Holm-adjusted p" + (f" (per {r.xa})" if r.xa else "")] if r.tested else []
        rows = [
            [f"{short(s)} < {label(o)}", k if k is not None else "—"]
            + [ratio_cell(p, label(o)) for p in ps]
            + ([", ".join(p_text(p.get("p_holm", math.nan)) for p in ps)] if r.tested else [])
            + ([word(r, v)] if r.tested else [])
            + ([mean_note(r, s, o, k, mode)] if note else [])
            for s, o, k, ps, v in r.verdict_rows(metric, by, mode)
        ]
        L += [f"**{what[0].upper() + what[1:]}, {title}**:", ""]
        L += [
            md_table([*head, *holm, *verdict, *(["against the mean"] if note else [])], rows),
            "",
        ]
    return L


def family_text(r: ReportData) -> str:
    """How the verdict words are decided, with the number of comparisons of this report."""
    few = (
        f" **This run has {r.repetitions} repetitions, fewer than the {MIN_REPETITIONS} a "
        "verdict needs: the tables give the ratios and intervals only, no verdict words.**"
        if r.repetitions < MIN_REPETITIONS
        else ""
    )
    tests = (
        "of the mean log ratio, or of the mean difference of test error rates"
        if r.classifies and r.view(r.error_mode) is not None
        else "of the mean log ratio"
    )
    return (
        f"This report's verdict tables make **{r.n_comparisons} comparisons** (paired t-tests "
        f"{tests}, one per cell with two finite pairs or more). A difference is "
        f"called significant when its **Holm-adjusted** p-value (Holm–Bonferroni over all "
        f"{r.n_comparisons}) is below {ALPHA:g}; the intervals are each comparison's own 95% "
        "interval, so one that excludes 1× may still fall short after the adjustment. A verdict "
        f"word needs at least {MIN_REPETITIONS} repetitions with a finite loss on both sides; a "
        "repetition in which one side diverged (infinite loss, a ratio of 0× or ∞×) is left "
        "out of the ratio and counted in its cell (docs/protocol.md §7)." + few
    )


def ratio_cell(p: dict, other: str) -> str:
    """A paired ratio's cell: ``0.62× [0.55, 0.70]``, with the repetitions left out because one
    side diverged."""
    return fmt_ratio(p) + _left_out(p, other)


def _left_out(p: dict, other: str) -> str:
    """`` (n rep. where … diverged left out; …)`` of a paired cell, or ``''``."""
    left = [
        f"{n} rep. where {who} diverged left out"
        for n, who in ((p.get("b_inf", 0), other), (p.get("a_inf", 0), "the proposed learner"))
        if n
    ]
    return f" ({'; '.join(left)})" if left else ""


def p_text(p: float) -> str:
    """A p-value for a table: ``—`` when untested, ``<0.001`` below that."""
    if math.isnan(p):
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.2g}"


def word(r: ReportData, verdict: str) -> str:
    """The verdict column: the word, or with too few repetitions the reason there is none."""
    if verdict.startswith("no verdict"):
        return f"— ({r.repetitions} repetitions: a verdict needs {MIN_REPETITIONS})"
    return verdict


def against_mean_table(r: ReportData, head: list[str]) -> list[str]:
    """The fourth comparison: every learner's test loss minus the mean predictor's, paired by
    repetition (and the proposed learner's Algorithm-2 test loss on its own test points)."""
    if not r.has_const:
        return []
    rows = []
    for metric, how in (("test_loss", "exact"), ("test_loss_estimated", "Algorithm-2")):
        mrows = r.mean_rows(metric)
        if not mrows:
            continue
        const = CONST_OF[metric]
        n_est = r.cfg["evaluation"].get("n_test_estimated", "all")
        points = (
            "all test points"
            if metric == "test_loss"
            else ("all" if n_est == "all" else f"the first {n_est}")
            + " test points, where the Algorithm-2 loss is measured"
        )
        # with different losses, each loss's yardstick row above its learners' rows
        for loss, methods in r.loss_groups():
            own = [row for row in mrows if row[0] in methods]
            if not own:
                continue
            in_loss = f", {loss} loss" if loss is not None else ""
            rows.append(
                [f"mean predictor's test loss on {points}{in_loss} (the yardstick)", "—"]
                + [r.yardstick(const, x, among=methods) for x in r.xs]
                + (["—"] if r.tested else [])
            )
            for m, k, ps, v in own:
                name = label(m) + (f" ({how} test loss)" if metric != "test_loss" else "")
                rows.append(
                    [f"{name} < mean predictor", k if k is not None else "—"]
                    + [fmt(p["mean"], p["ci"], 3) for p in ps]
                    + ([v] if r.tested else [])
                )
    counted = (
        "verdicts count the data settings where the difference is significant"
        if r.tested
        else ONE_REPETITION[0].lower() + ONE_REPETITION[1:-1]
    )
    return [
        "**Test loss against the mean predictor** (learner − training-mean constant on the same "
        "test points, paired by repetition; negative = the learner beats the mean; the "
        "yardstick rows give the mean predictor's own loss on those points"
        + (", one per loss above the learners of that loss" if r.mixed_losses() else "")
        + f"; {counted}):",
        "",
        md_table([*head, *(["verdict"] if r.tested else [])], rows),
        "",
    ]
