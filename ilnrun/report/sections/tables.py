"""Test loss, test NMSE and online loss of every learner's selected setting (mean ± 95% CI; the
value alone with one repetition), with the zero and best-constant (mean) predictors beside them
(docs/protocol.md §8)."""

from __future__ import annotations

from ..data import ONE_REPETITION, ReportData, label, md_table

YARDSTICKS = (
    "Yardsticks: *mean predictor* = the training-label mean predicted everywhere (the best "
    "constant a learner could know); *zero predictor* = `f = 0`, where every learner starts. "
    "NMSE = `mean (f(x) − y)² / var(y_test)`: 1.0 is the NMSE of the test-label mean, so an "
    "NMSE at or above 1 does no better than predicting the mean."
)
MARKS = (
    "Marks (paired by repetition, 95% t-interval of `loss − mean predictor's loss`): **‡** "
    "significantly *worse* than the mean predictor, **†** not significantly better than it; no "
    "mark: significantly better."
)


ERROR_MARKS = (
    "Yardstick: the sign of the best constant predictor of each learner's loss (the majority "
    "class). Marks (paired by repetition, 95% t-interval of `error − the constant's error`): "
    "**‡** significantly *worse*, **†** not significantly better; no mark: significantly better."
)


def spread(r: ReportData) -> str:
    """What a table's cells are: ``mean ± 95% CI over repetitions``, or the one repetition's
    value."""
    return "mean ± 95% CI over repetitions" if r.tested else "one repetition"


# (metric, title, yardstick columns: (summary metric, header))
TABLES = (
    (
        "test_loss",
        "Test loss",
        (("test_loss_const", "mean predictor"), ("test_loss_zero", "zero predictor")),
    ),
    (
        "test_nmse",
        "Test NMSE (1.0 = predicting the test mean)",
        (("test_nmse_const", "mean predictor"),),
    ),
    ("online_loss", "Online loss", ()),
    (
        "test_error",
        "Test error rate (misclassified test points, sign f(x) against ±1 labels)",
        (("test_error_const", "best constant's sign"),),
    ),
)


def render(r: ReportData) -> list[str]:
    """One table per budget with a row per x value; with no x axis, one table with a row per
    budget."""
    head = [label(m) for m in r.methods]
    L = []
    for metric, title, yard in TABLES:
        if f"{metric}_mean" not in r.summary:
            continue
        yard = tuple((c, h) for c, h in yard if f"{c}_mean" in r.summary)
        flag = metric != "online_loss" and r.has_const
        L += [f"## {title} ({spread(r)}, selected settings)", ""]
        if metric == "test_loss" and r.mixed_losses():
            L += [str(r.mixed_losses()), ""]
        if flag and metric == "test_error":
            L += [f"{ERROR_MARKS if r.tested else ONE_REPETITION}", ""]
        elif flag:
            L += [f"{YARDSTICKS} {MARKS if r.tested else ONE_REPETITION}", ""]
        yhead = [h for _, h in yard]
        if r.xa is None:
            rows = [
                [k if k is not None else "—"]
                + [r.cell(m, metric, k, None, flag) for m in r.methods]
                + [r.yardstick(c, None) for c, _ in yard]
                for k in r.ks or [None]
            ]
            L += [md_table(["k", *head, *yhead], rows), ""]
            continue
        for k in r.ks or [None]:
            rows = [
                [x]
                + [r.cell(m, metric, k, x, flag) for m in r.methods]
                + [r.yardstick(c, x) for c, _ in yard]
                for x in r.xs
            ]
            if k is not None:
                L += [f"Budget k = {k}:", ""]
            L += [md_table([r.xa, *head, *yhead], rows), ""]
    return L
