"""Test loss, test NMSE and online loss of every learner's selected setting (mean ± 95% CI; the
value alone with one repetition), with the zero and best-constant (mean) predictors beside them
(a test-loss table per loss, each with its own, when the learners learn with different losses);
for ±1 labels the test error rate with the majority class beside it, and the test loss named as
each learner's loss (the logistic loss's is the log-loss) (docs/protocol.md §8, §8.1)."""

from __future__ import annotations

from ...losses import LOSSES
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


ERROR_YARDSTICK = (
    "Yardstick: *majority class* = the majority class of the training labels (`+1` on a tie) "
    "predicted everywhere, `test_error_const`: the error rate a classifier gets from the "
    "training labels alone (the best constant of every loss, by its sign). Settings are "
    "selected on each learner's own validation loss, not on a validation error rate. The "
    "error rate is a fraction of the test points (0.05 = 5 in 100 misclassified)."
)
ERROR_MARKS = (
    "Marks (paired by repetition, 95% t-interval of `error − majority class's error`): **‡** "
    "significantly *worse* than the majority class, **†** not significantly better than it; no "
    "mark: significantly better."
)
LOG_LOSS = (
    "The labels are ±1: each learner's test loss is its own loss ({each}); that of the "
    "logistic loss `log(1 + e^(−y f(x)))` is the **log-loss** (the negative log-likelihood "
    "of `P(y = +1) = σ(f(x))`, in nats), the others are no log-likelihood. {yardsticks}"
)
ONE_LOSS_YARDSTICKS = (
    "The yardstick columns are in that loss (its best constant's and the zero predictor's)."
)
PER_LOSS_YARDSTICKS = (
    "The table is given per loss, each with its learners and that loss's yardsticks (its best "
    "constant's and the zero predictor's loss), so that every row compares numbers in one unit."
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
        "Test error rate (fraction of test points misclassified, sign f(x) against ±1 labels)",
        (("test_error_const", "majority class"),),
    ),
)


def render(r: ReportData) -> list[str]:
    """One table per budget with a row per x value; with no x axis, one table with a row per
    budget."""
    L = []
    for metric, title, yard in TABLES:
        if f"{metric}_mean" not in r.summary:
            continue
        yard = tuple((c, h) for c, h in yard if f"{c}_mean" in r.summary)
        flag = metric != "online_loss" and r.has_const
        L += [f"## {title} ({spread(r)}, selected settings)", ""]
        if metric == "test_loss" and r.mixed_losses():
            L += [str(r.mixed_losses()), ""]
        if metric == "test_loss" and r.classifies:
            each = ", ".join(f"{label(m)}: {v}" for m, v in r.losses.items())
            yardsticks = PER_LOSS_YARDSTICKS if r.mixed_losses() else ONE_LOSS_YARDSTICKS
            L += [LOG_LOSS.format(each=each, yardsticks=yardsticks), ""]
        if metric == "test_error":
            marks = ERROR_MARKS if r.tested else ONE_REPETITION
            L += [f"{ERROR_YARDSTICK} {marks}" if flag else ERROR_YARDSTICK, ""]
        elif flag:
            L += [f"{YARDSTICKS} {MARKS if r.tested else ONE_REPETITION}", ""]
        yhead = [h for _, h in yard]
        # a loss's yardsticks are in that loss: with different losses, one table per loss
        groups = r.loss_groups() if metric == "test_loss" else [(None, r.methods)]
        if r.xa is None:
            for loss, methods in groups:
                rows = [
                    [k if k is not None else "—"]
                    + [r.cell(m, metric, k, None, flag) for m in methods]
                    + [r.yardstick(c, None, among=methods) for c, _ in yard]
                    for k in r.ks or [None]
                ]
                L += loss_caption(loss, methods)
                L += [md_table(["k", *[label(m) for m in methods], *yhead], rows), ""]
            continue
        for k in r.ks or [None]:
            if k is not None:
                L += [f"Budget k = {k}:", ""]
            for loss, methods in groups:
                rows = [
                    [x]
                    + [r.cell(m, metric, k, x, flag) for m in methods]
                    + [r.yardstick(c, x, among=methods) for c, _ in yard]
                    for x in r.xs
                ]
                L += loss_caption(loss, methods)
                L += [md_table([r.xa, *[label(m) for m in methods], *yhead], rows), ""]
    return L


def loss_caption(loss: str | None, methods: list[str]) -> list[str]:
    """The line above one loss's table (``Loss `hinge`, max(0,1−yp): Doubly SGD, ...``); none
    when every learner shares the loss (one table)."""
    if loss is None:
        return []
    spec = LOSSES.get(loss)
    formula = f", {spec.label}" if spec is not None else ""
    return [f"Loss `{loss}`{formula}: {', '.join(label(m) for m in methods)}.", ""]
