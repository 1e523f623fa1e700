"""The figures of the results directory (of a packed one: drawn by the report,
:attr:`ReportData.figure_dir`), copied next to the report; how to read the cost–NMSE frontier
(of a classification run: the cost–test-error frontier, every panel in test error rate with
the majority class as its line), or why it is not drawn."""

from __future__ import annotations

from ...results import copy_atomic
from ..data import ReportData
from .tables import spread

FIGURES = ("figure1", "budget_sweep", "regret", "curves", "frontier", "m_test")
# the figures this section shows (``m_test`` is shown by its own section)
SHOWN = FIGURES[:5]

FRONTIER = (
    "How to read `frontier.png`: each point is one learner at one budget; x is what one cell "
    "cost in total (ψ-evaluations of training, validation and test, plus closed-form kernel "
    "values; log scale), y the test NMSE of the selected setting ({spread}). Down and to the "
    "left is better: at equal cost the lower curve reaches the lower NMSE. Hollow points, "
    "labelled “(kernel)”, were scored with the closed-form kernel, which a user without the "
    "kernel cannot do (its values counted as evaluations); filled points are kernel-free. In "
    "an exact run the proposed learner's kernel-free predictor is drawn dotted: selected on "
    "its Algorithm-2 validation loss, its Algorithm-2 test NMSE at the cost of training plus "
    "Algorithm 2 on every validation and test point (`train_evals + test_evals_free · (n_val "
    "+ n_test)`). Points above the grey NMSE = 1 line do no better than predicting the "
    "test-label mean."
)


FRONTIER_ERROR = (
    "How to read `frontier.png`: each point is one learner at one budget; x is what one cell "
    "cost in total (ψ-evaluations of training, validation and test, plus closed-form kernel "
    "values; log scale), y the test error rate of the setting selected on the learner's own "
    "validation loss ({spread}). Down and to the left is better. Hollow points, labelled "
    "“(kernel)”, were scored with the closed-form kernel, which a user without the kernel "
    "cannot do; filled points are kernel-free. The grey dash-dotted line is the majority class "
    "of the training labels predicted everywhere: a point on or above it classifies no better "
    "than the labels' majority."
)
ERROR_FIGURES = (
    "The labels are ±1: `figure1.png`{sweep} and `frontier.png` show the **test error rate** "
    "(the fraction of test points misclassified, {spread}) of each learner's setting selected "
    "on its own validation loss, whatever loss it learns with; the grey dash-dotted line is the "
    "majority class of the training labels predicted everywhere (`test_error_const`). The "
    "learning curves (`curves.png`) stay in each learner's own loss."
)


def copy_figure(r: ReportData, stem: str) -> str | None:
    """Copy ``<stem>.png`` of the results (:attr:`ReportData.figure_dir`) next to the report;
    its name, or ``None`` when the results hold no such figure (never a directory, never
    through a link). Listed without drawing (:attr:`ReportData.figure_names`): its name if the
    results give that figure, and nothing is copied."""
    if r.figure_names is not None:
        return f"{stem}.png" if stem in r.figure_names else None
    src = r.figure_dir / f"{stem}.png"
    if not src.is_file() or src.is_symlink():
        return None
    if src.resolve() != (r.out_dir / src.name).resolve():
        copy_atomic(src, r.out_dir / src.name)
    return src.name


def render(r: ReportData) -> list[str]:
    names = [n for stem in SHOWN if (n := copy_figure(r, stem)) is not None]
    if not names:
        return []
    L = ["## Figures", ""]
    if r.classifies:
        sweep = ", `budget_sweep.png`" if "budget_sweep.png" in names else ""
        L += [ERROR_FIGURES.format(sweep=sweep, spread=spread(r)), ""]
    for n in names:
        L += [f"![{n}]({n})", ""]
        if n == "frontier.png":
            text = FRONTIER_ERROR if r.classifies else FRONTIER
            L += [text.format(spread=spread(r)), ""]
    if "frontier.png" not in names:
        from ...plots import frontier_missing

        why = frontier_missing(r.runs)
        if why is not None:
            L += [f"_The cost–NMSE {why}._", ""]
    return L
