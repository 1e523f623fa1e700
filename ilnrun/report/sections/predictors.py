"""The predictors of learners that return more than one (the averaged predictor, Algorithm-2
estimates): final exact, averaged exact, final estimated, and the zero predictor for scale."""

from __future__ import annotations

from ..data import ONE_REPETITION, ReportData, label, md_table

COLUMNS = (
    ("test_loss", "final, exact"),
    ("test_loss_avg", "averaged, exact"),
    ("test_loss_estimated", "final, Algorithm-2 estimates"),
    ("test_loss_const_subset", "mean predictor on the Algorithm-2 test points"),
    ("test_loss_const", "mean predictor"),
    ("test_loss_zero", "zero predictor"),
)
FLAGGED = ("test_loss", "test_loss_estimated")  # marked against the mean predictor


def render(r: ReportData) -> list[str]:
    L: list[str] = []
    if "test_loss_avg" not in r.runs:
        return L
    for m in r.methods:
        if not r.runs.loc[r.runs["method"] == m, "test_loss_avg"].notna().any():
            continue
        marks = (
            "Marks as in the test-loss table (‡ significantly worse than the mean "
            "predictor, † not significantly better): the exact losses against the mean "
            "predictor on all test points, the Algorithm-2 loss against the mean predictor on "
            "its own test points (the column beside it)."
        )
        L += [
            f"## {label(m)}'s predictors (test loss"
            + (", mean ± 95% CI)" if r.tested else ", one repetition)"),
            "",
            "Final predictor evaluated exactly; the averaged predictor of Corollary 1; the final "
            "predictor evaluated with Algorithm-2 estimates (what a user without the kernel "
            "gets, on the first `n_test_estimated` test points); the mean and zero predictors "
            "for scale, the mean predictor both on all test points and on the Algorithm-2 test "
            "points. " + (marks if r.tested else ONE_REPETITION),
            "",
        ]
        rows = []
        for k in r.ks or [None]:
            for x in r.xs:
                rows.append(
                    [k if k is not None else "—", x if x is not None else "all"]
                    + [r.cell(m, metric, k, x, metric in FLAGGED) for metric, _ in COLUMNS]
                )
        L += [md_table(["k", r.xa or "—"] + [c for _, c in COLUMNS], rows), ""]
    return L
