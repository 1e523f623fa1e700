"""Figures from a results directory (``summary.csv``, ``curves.csv``, ``config.yaml``).

- ``figure1``: selected test NMSE (``mean (f(x) − y)² / var(y_test)``, docs/protocol.md §8)
  against the experiment's x axis, one panel per budget (``dsgd_k``), 95% t-interval bands; the
  online references (the exact-kernel oracle) as lines in their own styles, the batch references
  (kernel ridge) as levels; NMSE = 1, the mean predictor, as a labelled grey dash-dotted line;
  a learner's Algorithm-2 test NMSE (what a user without the kernel gets, on the first
  ``n_test_estimated`` test points) dotted in its colour.
- ``curves``: running mean online loss against round ``t`` (mean over repetitions, band
  95% t-interval), rows = budgets, columns = at most three x-axis values; the mean predictor's
  test loss for scale. Batch references have no online pass and are not drawn.
- ``budget_sweep`` (only with two or more budgets): test NMSE against the budget target, with
  the same NMSE = 1 line, Algorithm-2 lines and the references as levels.

- ``frontier`` (results with the cost columns ``evals_total``, ``kernel_evals_total``): the
  cost–NMSE frontier — total evaluations per cell (ψ-evaluations of training, validation and
  test plus closed-form kernel values, log scale) against the selected setting's test NMSE
  (mean, 95% CI), one curve per learner across budgets; points that use the closed-form kernel
  hollow and labelled "(kernel)", kernel-free ones filled; in exact runs Shrinking Gradient's
  kernel-free point too (:func:`frontier_points`); NMSE = 1 as the reference line.
- ``m_test`` (results with ``test_nmse_estimated_m<m>`` columns): Algorithm-2 test NMSE against
  ``m_test``, with the exact test NMSE and the mean predictor as lines.

Test-loss panels are in NMSE (results written before ``test_nmse`` existed: in test loss, with
the mean predictor's loss as the yardstick); in a classification run (±1 labels, rows with a
``test_error``) ``figure1``, ``budget_sweep`` and ``frontier`` are in test error rate instead,
whatever loss each learner learns with, with the majority class of the training labels
(``test_error_const``) as the labelled grey dash-dotted line (docs/protocol.md §8.3); every
y axis is logarithmic when the drawn values span more than a factor of 20
(:func:`ilnrun.plotkit.use_log`). The x axis is the first ``dataset`` key (config order) with
more than one value in ``summary.csv``; failing that ``dsgd_k``; failing that a single
categorical point. Dataset keys other than the x axis that also vary split the panels further.
Figures are built on :class:`matplotlib.figure.Figure` directly, so no pyplot or global backend
state is touched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from .datasets import DATASETS
from .learners import LEARNERS, competitors
from .plotkit import band as _band
from .plotkit import empty as _empty
from .plotkit import finish as _finish
from .plotkit import fmt as _fmt
from .plotkit import freeze_layout, level, nmse_one, stretches, styles, yscale
from .plotkit import grid as _grid
from .plotkit import positions as _positions
from .plotkit import span as _span
from .plotkit import spread as _spread
from .plotkit import use_log as _use_log
from .results import save_figure_atomic
from .stats import t975

BUDGET_AXIS = "budget: Doubly SGD features per round k"


def axis_label(key: str) -> str:
    """The label of a dataset key (declared with its parameter) or of the budget axis."""
    if key == "dsgd_k":
        return BUDGET_AXIS
    for ds in DATASETS.values():
        for p in ds.params:
            if p.name == key and p.label:
                return p.label
    return key


UNITS = {"evaluations": "feature evaluations", "samples": "feature samples"}
TEST_LOSS = "test loss ½(f(x)−y)² (mean, 95% CI)"  # results without test_nmse
# one-line axis labels: a multi-line label makes the constrained layout depend on the order
# of the formats saved (PDF/SVG bytes would differ between calls)
TEST_NMSE = "test NMSE (mean, 95% CI)"  # NMSE = 1 is labelled in the legend
NMSE_DEF = "test NMSE = mean (f(x)−y)² / var(y_test)"
# a classification run's panels (±1 labels)
TEST_ERROR = "test error rate, fraction misclassified (mean, 95% CI)"
ERROR_DEF = "test error rate = mean [sign f(x) ≠ y]"
MAJORITY_LABEL = "majority class (of the training labels, predicted everywhere)"
WHAT = {"test_nmse": NMSE_DEF, "test_loss": "test loss", "test_error": ERROR_DEF}
ONLINE = "running mean online loss"
SAVE_METADATA = {"pdf": {"CreationDate": None}, "svg": {"Date": None}, "png": {}}
MAX_COLS = 3


def planned_figures(
    results_dir: Path, notes: list[str] | None = None
) -> dict[str, Callable[[], Figure]]:
    """The figures the results of ``results_dir`` give, by name, each a function that draws it:
    ``figure1``, ``curves``, (with >= 2 budgets) ``budget_sweep``, and where the results allow
    ``regret``, ``frontier`` and ``m_test``. Why a figure the results could have had is not
    planned is appended to ``notes``. One place decides which figures exist: what
    :func:`plot_results` draws and what a report lists without drawing."""
    results_dir = Path(results_dir)
    data = _Data.load(results_dir)
    if data.summary.empty:  # every cell diverged or timed out: no point, no curve
        from .readers import ResultsError

        raise ResultsError(
            f"{results_dir}: nothing to draw: no setting of any learner has a finished cell "
            "(summary.csv: n = 0 everywhere; every cell diverged or timed out). Under "
            "limits.cell_timeout_s, rerun with a higher limit and --extend"
        )
    figures: dict[str, Callable[[], Figure]] = {
        "figure1": lambda: _figure1(data),
        "curves": lambda: _curves(data),
    }
    if data.summary.loc[data.budgeted, "dsgd_k"].nunique() >= 2:
        figures["budget_sweep"] = lambda: _budget_sweep(data)
    if data.x == "T" and data.summary.get("regret_mean", pd.Series(dtype=float)).notna().any():
        figures["regret"] = lambda: _regret(data)
    runs = _runs(results_dir)
    why = frontier_missing(runs) if runs is not None else "frontier not drawn: no runs.csv"
    if why is None:
        figures["frontier"] = lambda: _frontier(data, runs)
    elif notes is not None:
        notes.append(why)
    if runs is not None and m_test_sweep(runs):
        figures["m_test"] = lambda: _m_test(data, runs)
    return figures


def plot_results(
    results_dir: Path,
    formats: list[str],
    notes: list[str] | None = None,
    out_dir: Path | None = None,
) -> list[Path]:
    """Draw every figure of :func:`planned_figures` into ``out_dir`` (default ``results_dir``)
    in every format of ``formats`` ("png", "pdf", "svg"); return the paths."""
    results_dir = Path(results_dir)
    out_dir = results_dir if out_dir is None else Path(out_dir)
    figures = planned_figures(results_dir, notes)
    written: list[Path] = []
    with matplotlib.rc_context({"svg.hashsalt": "ilnrun", "pdf.compression": 6}):
        for name, draw in figures.items():
            fig = draw()
            freeze_layout(fig)
            for fmt in formats:
                path = out_dir / f"{name}.{fmt}"
                save_figure_atomic(
                    fig, path, format=fmt, dpi=150, metadata=SAVE_METADATA.get(fmt, {})
                )
                written.append(path)
            fig.clear()
    return written


class _Data:
    """The tables of one results directory and the derived axes."""

    def __init__(self, cfg: dict[str, Any], summary: pd.DataFrame, curves: pd.DataFrame) -> None:
        self.cfg = cfg
        keys = [k for k in cfg.get("dataset", {}) if k != "kind" and k in summary.columns]
        summary = summary[summary["n"].fillna(0) > 0].reset_index(drop=True)
        # the test-loss panels' metric: NMSE (1 = the mean predictor); older results: the loss;
        # a classification run (±1 labels: a test error rate): the test error rate, whatever
        # loss each learner learns with (one unit for all; the majority class its yardstick)
        nmse = "test_nmse_mean" in summary
        self.classifies = "test_error_mean" in summary and bool(
            summary["test_error_mean"].notna().any()
        )
        self.metric = "test_error" if self.classifies else "test_nmse" if nmse else "test_loss"
        self.estimated = f"{self.metric}_estimated"  # (no test_error_estimated is written)
        # with one repetition no interval is drawn, and no label promises one (as the report)
        self.one_repetition = summary.empty or summary["n"].max() < 2
        label = TEST_ERROR if self.classifies else TEST_NMSE if nmse else TEST_LOSS
        self.ylabel = self.interval_text(label)
        for col in (f"{self.metric}_mean", f"{self.metric}_ci95"):  # absent: nothing selected
            if col not in summary:
                summary[col] = np.nan
        self.summary = summary
        self.curves = curves
        self.style = styles()
        present = set(summary["method"])
        self.compared = [m for m in competitors() if m in present]
        refs = [m for m in self.style if self.style[m]["reference"] and m in present]
        # online references are drawn as curves; batch references (no online pass) as levels
        self.references = [m for m in refs if not self.style[m]["batch"]]
        self.batch = [m for m in refs if self.style[m]["batch"]]
        self.budgeted = self.summary["method"].isin(self.compared)
        varying = [k for k in keys if self.summary[k].nunique(dropna=False) > 1]
        if varying:
            self.x: str | None = varying[0]
        elif self.summary.loc[self.budgeted, "dsgd_k"].nunique() > 1:
            self.x = "dsgd_k"
        else:
            self.x = None
        self.others = [k for k in varying if k != self.x]  # further panel splits
        first = self.summary.head(1)
        self.constant = {k: first[k].iloc[0] for k in keys if k not in varying and len(first)}

    @classmethod
    def load(cls, d: Path) -> _Data:
        from .readers import CURVES_COLUMNS, SUMMARY_COLUMNS, read_config, read_table

        cfg = read_config(d)
        summary = read_table(d, "summary.csv", SUMMARY_COLUMNS)
        curves = read_table(d, "curves.csv", CURVES_COLUMNS, empty_ok=True)
        return cls(cfg, summary, curves)

    def interval_text(self, text: str) -> str:
        """``text`` (a label or title naming the mean and its 95% interval) as it reads for
        these results: "one repetition" in place of the interval where every setting has one."""
        if not self.one_repetition:
            return text
        for interval in ("mean over repetitions, 95% CI", "mean, 95% CI"):
            text = text.replace(interval, "one repetition")
        return text

    @property
    def name(self) -> str:
        return str(self.cfg.get("name", "experiment"))

    def budgets(self) -> list[int]:
        """The distinct ``dsgd_k`` of the budgeted learners, ascending."""
        return sorted(int(k) for k in self.summary.loc[self.budgeted, "dsgd_k"].dropna().unique())

    def facets(self, df: pd.DataFrame) -> list[dict[str, Any]]:
        """Distinct combinations of the non-x varying dataset keys in ``df``."""
        if not self.others:
            return [{}]
        rows = df[self.others].drop_duplicates().sort_values(self.others)
        return [dict(zip(self.others, r, strict=True)) for r in rows.itertuples(index=False)]

    def x_values(self) -> list[Any]:
        """The distinct x-axis values, sorted (a single ``None`` when there is no x axis)."""
        if self.x is None:
            return [None]
        return sorted(self.summary[self.x].dropna().unique().tolist())

    def xlabel(self) -> str:
        if self.x is None:
            return "dataset setting"
        return axis_label(self.x)

    def x_text(self, value: Any) -> str:
        """``D=60``-style label of one x value (the constant setting when there is no x axis)."""
        if self.x is None:
            return ", ".join(f"{k}={_fmt(v)}" for k, v in self.constant.items() if k in ("D", "T"))
        return f"{self.x}={_fmt(value)}"

    def header(self, what: str) -> str:
        """Suptitle: experiment name, ``what``, T and the number of repetitions."""
        s = self.summary
        if s.empty:
            return f"{self.name}: {what} (nothing selected: every setting diverged)"
        parts = [f"T={_span(s['T'])}"] if "T" in s.columns else []
        n = _span(s["n"])
        parts.append(f"n={n} repetition{'' if n == '1' else 's'}")
        return f"{self.name}: {what} ({', '.join(parts)})"


def _select(df: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    """Rows of ``df`` whose columns equal ``where`` (NaN never matches)."""
    mask = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        mask &= (df[k] == v).to_numpy()
    return df[mask]


def _facet_text(facet: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in facet.items())


def _budget_text(rows: pd.DataFrame, k: int) -> str:
    """E.g. ``budget k=2: 40,200 feature evaluations per pass`` and ``(m=101, r=201)`` on a
    second line."""
    unit = _unit(rows)
    targets = rows["budget_target"].dropna().unique()
    if len(targets) != 1:  # the target depends on T, which varies inside the panel
        lo, hi = rows["budget_target"].min(), rows["budget_target"].max()
        return f"budget k={k}: {int(lo):,}–{int(hi):,}\n{unit} per pass"
    sizes = []  # every budgeted learner's own size, where it is not k itself
    for method in rows["method"].unique():
        size = LEARNERS[method].budget
        if size is None or size.name not in rows:
            continue
        vals = rows.loc[rows["method"] == method, size.name].dropna().unique()
        if len(vals) == 1 and int(vals[0]) != k:
            sizes.append(f"{size.name}={_fmt(vals[0])}")
    tail = f"\n({', '.join(sizes)})" if sizes else ""
    return f"budget k={k}: {int(targets[0]):,} {unit} per pass{tail}"


def _unit(rows: pd.DataFrame) -> str:
    """The budget unit ("feature evaluations" or "feature samples") of ``budget_match``."""
    match = rows["budget_match"].dropna() if "budget_match" in rows.columns else pd.Series()
    return UNITS.get(str(match.iloc[0]), "features") if len(match) else "features"


def _figure1(data: _Data) -> Figure:
    """Test NMSE against the x axis, one panel per (budget, other varying dataset keys)."""
    s = data.summary
    if data.x == "dsgd_k":
        panels = [(None, f) for f in data.facets(s)]
    else:
        panels = [(k, f) for k in data.budgets() for f in data.facets(s)] or [
            (None, f) for f in data.facets(s)
        ]
    nfacets = len(data.facets(s))
    fig, axes = _grid(len(panels), nfacets if 1 < nfacets <= MAX_COLS else MAX_COLS)
    xs = data.x_values()
    pos, ticklabels = _positions(xs)
    log = _use_log(_drawn(data, s))
    for ax, (k, facet) in zip(axes, panels, strict=True):
        rows = _select(s, facet)
        budget_rows = rows[rows["method"].isin(data.compared)]
        if k is not None:
            budget_rows = budget_rows[budget_rows["dsgd_k"] == k]
        drawn = False
        for method in data.compared:
            r = budget_rows[budget_rows["method"] == method]
            drawn |= _plot_vs_x(ax, data, r, method, xs, pos, log)
        for method in data.compared:
            r = budget_rows[budget_rows["method"] == method]
            _plot_vs_x(ax, data, r, method, xs, pos, log, estimated=True)
        for ref in data.references:
            oracle = rows[rows["method"] == ref]
            if data.x == "dsgd_k" and len(oracle):  # a reference does not depend on the budget
                oracle = pd.concat([oracle.iloc[[0]]] * len(xs)).assign(dsgd_k=xs)
            drawn |= _plot_vs_x(ax, data, oracle, ref, xs, pos, log)
        for ref in data.batch:
            drawn |= _levels_vs_x(ax, data, rows[rows["method"] == ref], ref, xs, pos, log)
        _yardstick_vs_x(ax, data, rows, xs, pos)
        if k is not None:
            title = _budget_text(budget_rows, k)
        elif budget_rows["budget_target"].notna().any():
            title = f"budgets matched on {_unit(budget_rows)} per training pass"
        else:  # e.g. Shrinking Gradient's theory preset: m and eta from T
            title = "no matched budget: every learner sets its own size"
        if facet:
            title = f"{title}\n{_facet_text(facet)}"
        ax.set_title(title, fontsize=9.5)
        ax.set_xlabel(data.xlabel())
        ax.set_ylabel(data.ylabel)
        if data.x is None:
            ax.set_xticks([0.0], [data.x_text(None) or "single setting"])
            ax.set_xlim(-1, 1)
        else:
            if ticklabels is None and _use_log(pos):
                ax.set_xscale("log")  # e.g. T = 200 ... 20 000: equal ratios, equal spacing
                ax.xaxis.set_minor_locator(NullLocator())
            if ticklabels is not None or len(xs) <= 8:
                ax.set_xticks(pos, ticklabels or [_fmt(v) for v in xs])
        yscale(ax, log)
        ax.grid(alpha=0.3)
        if not drawn:
            _empty(ax)
    what = WHAT[data.metric]
    _finish(fig, axes, data.header(f"{what} vs {data.xlabel()}"))
    return fig


def _estimated_style(data: _Data, method: str) -> dict[str, Any]:
    """The learner's colour, dotted, labelled as its Algorithm-2 test loss with ``m_test``."""
    ev = data.cfg.get("evaluation", {})
    n_est, n_test = ev.get("n_test_estimated", "all"), data.cfg.get("dataset", {}).get("n_test")
    if n_est == "all":
        points = "all test points"
    elif isinstance(n_test, int):
        points = f"first {min(n_est, n_test)} test points"
    else:  # e.g. n_test: rest — the number of test points depends on the table
        points = f"first {n_est} test points, or all if fewer"
    return {
        **data.style[method],
        "linestyle": ":",
        "label": f"{data.style[method]['label']}, Algorithm-2 test estimates "
        f"(m_test={ev.get('m_test')}, {points})",
    }


MEAN_STYLE = {  # the yardstick of results without test_nmse (their test-loss panels)
    "label": "mean predictor (training-label mean)",
    "color": "grey",
    "marker": None,
    "linestyle": "-.",
    "reference": True,
}


def _yardstick_vs_x(
    ax: Axes, data: _Data, rows: pd.DataFrame, xs: list[Any], pos: np.ndarray
) -> None:
    """The mean predictor: NMSE = 1 on NMSE panels; else the best constant predictor's test
    loss (data only: one value per x), a grey dash-dotted line."""
    col = "test_error_const_mean" if data.classifies else "test_loss_const_mean"
    if data.metric == "test_nmse" or data.x is None or data.x == "dsgd_k":
        _yardstick_level(ax, data, rows)
        return
    if col not in rows or not rows[col].notna().any():
        return
    per_x = rows.dropna(subset=[col]).groupby(data.x)[col].first()
    x = np.array([pos[xs.index(v)] for v in per_x.index if v in xs])
    label = MAJORITY_LABEL if data.classifies else MEAN_STYLE["label"]
    ax.plot(x, per_x.to_numpy(), color="grey", linestyle="-.", linewidth=1.3, label=label)


def _yardstick_level(ax: Axes, data: _Data, rows: pd.DataFrame) -> None:
    """The mean predictor as one level: NMSE = 1, or the best constant's test loss; in a
    classification run the majority class's test error rate."""
    if data.classifies:
        if "test_error_const_mean" in rows and rows["test_error_const_mean"].notna().any():
            v = rows["test_error_const_mean"].dropna().iloc[0]
            ax.axhline(v, color="grey", linestyle="-.", linewidth=1.3, label=MAJORITY_LABEL)
    elif data.metric == "test_nmse":
        nmse_one(ax)
    elif "test_loss_const_mean" in rows and rows["test_loss_const_mean"].notna().any():
        v = rows["test_loss_const_mean"].dropna().iloc[0]
        ax.axhline(v, color="grey", linestyle="-.", linewidth=1.3, label=MEAN_STYLE["label"])


def _drawn(data: _Data, s: pd.DataFrame) -> np.ndarray:
    """Every value a test-loss panel draws (learners, Algorithm-2 estimates, the yardstick):
    the range that decides the log scale."""
    const = {"test_loss": ["test_loss_const_mean"], "test_error": ["test_error_const_mean"]}.get(
        data.metric, []
    )
    cols = [c for c in (f"{data.metric}_mean", f"{data.estimated}_mean", *const) if c in s]
    values = s[cols].to_numpy(dtype=float).ravel()
    return np.append(values, 1.0) if data.metric == "test_nmse" else values


def _with_values(rows: pd.DataFrame, col: str) -> pd.DataFrame:
    """The rows with a value in column ``col`` (none when there is no such column)."""
    return rows[rows[col].notna()] if col in rows else rows.iloc[0:0]


def _plot_vs_x(
    ax: Axes,
    data: _Data,
    rows: pd.DataFrame,
    method: str,
    xs: list[Any],
    pos: np.ndarray,
    log: bool,
    estimated: bool = False,
) -> bool:
    """Plot ``rows``' test NMSE (or loss; with ``estimated`` the Algorithm-2 one, dotted) at the
    positions of their x values; False if nothing to draw."""
    metric = data.estimated if estimated else data.metric
    col = f"{metric}_mean"
    rows = _with_values(rows, col)
    if rows.empty:
        return False
    style = _estimated_style(data, method) if estimated else data.style[method]
    if data.x is None:  # one categorical point: methods side by side
        x = np.array([data.style[method]["dodge"]])
        rows = rows.iloc[[0]]
    else:
        rows = rows.sort_values(data.x)
        x = np.array([pos[xs.index(v)] for v in rows[data.x]])
    _band(
        ax,
        x,
        rows[col].to_numpy(),
        rows[f"{metric}_ci95"].to_numpy(),
        style,
        markers=not estimated,
        log=log,
    )
    return True


def _levels_vs_x(
    ax: Axes,
    data: _Data,
    rows: pd.DataFrame,
    method: str,
    xs: list[Any],
    pos: np.ndarray,
    log: bool,
) -> bool:
    """A batch reference: a level (with its band) across the panel when it does not depend on
    the x axis, else one level per x value over that value's stretch of the axis."""
    col = f"{data.metric}_mean"
    rows = _with_values(rows, col)
    if rows.empty:
        return False
    style = data.style[method]
    if data.x in (None, "dsgd_k"):
        level(ax, rows[col].iloc[0], rows[f"{data.metric}_ci95"].iloc[0], style, log=log)
        return True
    stretch = stretches(pos, _use_log(pos))  # the x axis is logarithmic by the same rule
    for v, mean, half in zip(rows[data.x], rows[col], rows[f"{data.metric}_ci95"], strict=True):
        level(ax, mean, half, style, log=log, x=stretch[xs.index(v)])
    return True


def _curves(data: _Data) -> Figure:
    """Running mean online loss against round t; rows = budgets, columns = x values. Batch
    references have no online pass: they are not drawn."""
    c = data.curves
    budgets: list[int | None] = list(data.budgets()) or [None]
    cols: list[Any] = [None] if data.x in (None, "dsgd_k") else _spread(data.x_values(), 3)
    cells = [(k, f, v) for k in budgets for f in data.facets(data.summary) for v in cols]
    fig, axes = _grid(len(cells), len(cols) if len(cols) > 1 else MAX_COLS, width=4.4, height=3.2)
    stats = _curve_stats(c, data) if len(c) else pd.DataFrame()
    log = len(stats) > 0 and _use_log(stats["mean"])
    for ax, (k, facet, v) in zip(axes, cells, strict=True):
        where = dict(facet)
        if v is not None:
            where[data.x] = v
        sel = _select(stats, where) if len(stats) else stats
        drawn = False
        for method in (*data.compared, *data.references):
            r = sel[sel["method"] == method] if len(sel) else sel
            if method in data.compared and k is not None:
                r = r[r["dsgd_k"] == k]
            if r.empty:
                continue
            _band(
                ax,
                r["t"].to_numpy(),
                r["mean"].to_numpy(),
                r["half"].to_numpy(),
                data.style[method],
                markers=False,
                log=log,
            )
            drawn = True
        ref = _select(data.summary, where)
        if drawn and "test_loss_const_mean" in ref and ref["test_loss_const_mean"].notna().any():
            ax.axhline(  # for scale: the mean predictor's test loss at this setting
                ref["test_loss_const_mean"].dropna().iloc[0],
                color="grey",
                linestyle="-.",
                linewidth=1.3,
                label="mean predictor's test loss (training-label mean), for scale",
            )
        budget_rows = ref[ref["method"].isin(data.compared)]
        if k is not None:
            budget_rows = budget_rows[budget_rows["dsgd_k"] == k]
        parts = [_budget_text(budget_rows, k).split("\n")[0] if k is not None else ""]
        parts.append(", ".join(p for p in (_facet_text(facet), data.x_text(v)) if p and v))
        ax.set_title("\n".join(p for p in parts if p), fontsize=9)
        ax.set_xlabel("round t")
        ax.set_ylabel(ONLINE)
        yscale(ax, log)
        ax.grid(alpha=0.3)
        if not drawn:
            _empty(ax)
    skipped = ", ".join(data.style[m]["label"] for m in data.batch)
    what = data.interval_text(
        "learning curves: running mean of ½(f_t(x_t)−y_t)² (mean over repetitions, 95% CI)"
    )
    if skipped:
        what += f"; {skipped}: batch, no online pass, not drawn"
    _finish(fig, axes, data.header(what))
    return fig


def _curve_stats(curves: pd.DataFrame, data: _Data) -> pd.DataFrame:
    """Mean and 95% t-interval half-width ``t_{0.975, n-1} sd/√n`` of ``online_loss`` over
    repetitions, per round (:mod:`ilnrun.stats`)."""
    keys = ["method", "dsgd_k", *data.others, *([data.x] if data.x not in (None, "dsgd_k") else [])]
    g = curves.groupby([*keys, "t"], dropna=False, sort=True)["online_loss"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    t = np.array([t975(int(n) - 1) for n in out["count"]])
    out["half"] = np.nan_to_num(t * out["std"].fillna(0) / np.sqrt(out["count"]))
    return out


def _budget_sweep(data: _Data) -> Figure:
    """Test NMSE against the budget target (log x), one panel per dataset setting (at most 6);
    the references, which take no budget, as levels."""
    s = data.summary
    settings = _panel_settings(data, s)
    fig, axes = _grid(len(settings), MAX_COLS)
    log = _use_log(_drawn(data, s))
    unit = _unit(s[data.budgeted])
    for ax, where in zip(axes, settings, strict=True):
        rows = _select(s, where)
        drawn = False
        for estimated in (False, True):
            metric = data.estimated if estimated else data.metric
            for method in data.compared:
                r = rows[rows["method"] == method].sort_values("budget_target")
                if f"{metric}_mean" not in r or not r[f"{metric}_mean"].notna().any():
                    continue
                r = r[r[f"{metric}_mean"].notna()]
                _band(
                    ax,
                    r["budget_target"].to_numpy(dtype=float),
                    r[f"{metric}_mean"].to_numpy(),
                    r[f"{metric}_ci95"].to_numpy(),
                    _estimated_style(data, method) if estimated else data.style[method],
                    markers=not estimated,
                    log=log,
                )
                drawn = True
        _yardstick_level(ax, data, rows)
        for ref in (*data.references, *data.batch):
            oracle = rows[rows["method"] == ref]
            if oracle.empty or not np.isfinite(oracle[f"{data.metric}_mean"].iloc[0]):
                continue
            level(
                ax,
                oracle[f"{data.metric}_mean"].iloc[0],
                oracle[f"{data.metric}_ci95"].iloc[0],
                data.style[ref],
                log=log,
            )
            drawn = True
        ax.set_xscale("log")
        targets = sorted(rows["budget_target"].dropna().unique())
        if 0 < len(targets) <= 8:
            ax.set_xticks(targets, [f"{int(t):,}" for t in targets])
            ax.xaxis.set_minor_locator(NullLocator())
        yscale(ax, log)
        ax.set_title(_facet_text(where) or data.name, fontsize=9.5)
        ax.set_xlabel(f"budget: {unit} per training pass")
        ax.set_ylabel(data.ylabel)
        ax.grid(alpha=0.3)
        if not drawn:
            _empty(ax)
    what = WHAT[data.metric]
    _finish(fig, axes, data.header(f"{what} vs budget ({unit} per training pass)"))
    return fig


def _regret(data: _Data) -> Figure:
    """Theorem 1: regret against the best predictor in the B-ball vs T (selected settings), and
    regret / √T, which the theorem bounds. Linear y axes: the regret may be negative."""
    s = data.summary[data.summary["regret_mean"].notna()]
    fig, axes = _grid(2, 2, width=4.8, height=3.8)
    for ax, scaled in zip(axes, (False, True), strict=True):
        for method in (*data.compared, *data.references):
            r = s[s["method"] == method].sort_values("T")
            if r.empty:
                continue
            x = r["T"].to_numpy(dtype=float)
            norm = np.sqrt(x) if scaled else 1.0
            _band(
                ax,
                x,
                r["regret_mean"].to_numpy() / norm,
                r["regret_ci95"].to_numpy() / norm,
                data.style[method],
                nonnegative=False,
            )
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(axis_label("T"))
        ax.set_ylabel("regret / √T" if scaled else "regret vs best f in the B-ball")
        title = "bounded if regret = O(√T)" if scaled else data.interval_text("mean, 95% CI")
        ax.set_title(title, fontsize=9.5)
        ax.grid(alpha=0.3, which="both")
    _finish(fig, axes, data.header("regret against the best predictor with |f| ≤ B"))
    return fig


# ----------------------------------------------------------------------------------------------
# cost against NMSE (docs/protocol.md §9.4)

COST = ("evals_total", "kernel_evals_total")
COST_AXIS = "total evaluations per cell (ψ + kernel values)"
COST_DEF = (
    "total evaluations per cell (ψ-evaluations of training, validation and test + closed-form "
    "kernel values) against test NMSE of the selected setting"
)
COST_DEF_ERROR = COST_DEF.replace("test NMSE", "test error rate")
SWEEP = re.compile(r"^test_nmse_estimated_m(\d+)$")


def _runs(d: Path) -> pd.DataFrame | None:
    """``runs.csv`` of the results directory, or ``None`` when it has none."""
    from .readers import RUNS_COLUMNS, has_table, read_table

    if not has_table(d, "runs.csv"):  # plain or packed (runs.csv.gz)
        return None
    return read_table(d, "runs.csv", RUNS_COLUMNS)


def _decade_label(v: float, _pos: int | None = None) -> str:
    """A log-axis tick ``v = a·10^e`` (``a`` in 1, 2, 5) as ``$a\\times10^{e}$`` (``$10^{e}$``
    for ``a = 1``)."""
    if v <= 0:
        return ""
    e = int(np.floor(np.log10(v) + 1e-9))
    a = round(v / 10.0**e)
    return f"$10^{{{e}}}$" if a == 1 else f"${a}\\times10^{{{e}}}$"


def frontier_missing(runs: pd.DataFrame) -> str | None:
    """Why ``frontier`` cannot be drawn from ``runs`` (``None``: it can): results written
    before the cost columns existed."""
    missing = [c for c in (*COST, "test_nmse") if c not in runs]
    if not missing:
        return None
    return (
        f"frontier not drawn: runs.csv has no {', '.join(missing)} (results written before "
        "every evaluation was counted; rerun the config to get them)"
    )


def m_test_sweep(runs: pd.DataFrame) -> list[tuple[int, str]]:
    """``(m, column)`` of every ``test_nmse_estimated_m<m>`` column with a value, by m."""
    out = []
    for c in runs.columns:
        if (hit := SWEEP.match(c)) and runs[c].notna().any():
            out.append((int(hit.group(1)), c))
    return sorted(out)


def _panel_settings(data: _Data, df: pd.DataFrame) -> list[dict[str, Any]]:
    """The dataset settings of the panels of a figure with the budget on its x axis: every
    combination of the x axis (unless it is the budget) and the other varying keys, at most 6."""
    split = [*([data.x] if data.x not in (None, "dsgd_k") else []), *data.others]
    if not split:
        return [{}]
    rows = df[split].drop_duplicates().sort_values(split).itertuples(index=False)
    return _spread([dict(zip(split, r, strict=True)) for r in rows], 6)


def _point(
    where: dict, rows: pd.DataFrame, x: pd.Series, y: str, kernel: bool, free_point: bool
) -> dict[str, Any]:
    """One frontier point: ``where`` (panel, learner, budget), :func:`_mean_point` of the rows,
    and whether it used the closed-form kernel / is a kernel-free estimate."""
    mx, my, ci, n = _mean_point(rows, x, y)
    return {**where, "x": mx, "y": my, "ci": ci, "n": n, "kernel": kernel, "free_point": free_point}


def _mean_point(rows: pd.DataFrame, x: pd.Series, y: str) -> tuple[float, float, float, int]:
    """(mean x, mean y, 95% half-width of y, n) over the rows with a finite ``y``."""
    from .stats import mean_ci

    ok = np.isfinite(rows[y].to_numpy(dtype=float)) & np.isfinite(x.to_numpy(dtype=float))
    st = mean_ci(rows.loc[ok, y].to_numpy(dtype=float))
    return float(x[ok].mean()) if ok.any() else math.nan, st["mean"], st["ci95"], st["n"]


def _free_cost(rows: pd.DataFrame) -> pd.Series:
    """Shrinking Gradient's kernel-free cost in an exact run: training plus Algorithm 2 on every
    validation and test point, ``train_evals + test_evals_free · (n_val + n_test)``."""
    n = pd.to_numeric(rows.get("n_val"), errors="coerce") + pd.to_numeric(
        rows.get("n_test"), errors="coerce"
    )
    return rows["train_evals"] + rows["test_evals_free"] * n


def frontier_points(data: _Data, runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Every point of ``frontier``: per panel setting (:func:`_panel_settings`), learner and
    budget, the selected setting's mean total evaluations ``evals_total + kernel_evals_total``
    and mean test NMSE (a classification run: test error rate) with its 95% interval;
    ``kernel``: whether the scored predictor used
    closed-form kernel values. In an exact run a kernel-expansion learner (Shrinking Gradient)
    adds its kernel-free point: its setting selected on ``val_loss_estimated``
    (``selected_estimated``), ``test_nmse_estimated`` at ``train_evals + test_evals_free ·
    (n_val + n_test)`` (Algorithm 2 at validation and test time)."""
    out = []
    runs = runs[runs["method"].isin(data.style)]
    for panel, where in enumerate(_panel_settings(data, runs)):
        rows = _select(runs, where)
        for method in rows["method"].unique():
            g = rows[rows["method"] == method]
            ks = sorted(g["dsgd_k"].dropna().unique()) if g["dsgd_k"].notna().any() else [None]
            for k in ks:
                h = g if k is None else g[g["dsgd_k"] == k]
                sel = h[h["selected"]]
                if sel.empty:
                    continue
                where = dict(panel=panel, method=method, k=k)
                kernel = bool((sel["kernel_evals_total"].fillna(0) > 0).any())
                cost = sel["evals_total"] + sel["kernel_evals_total"]
                out.append(_point(where, sel, cost, data.metric, kernel, free_point=False))
                if not kernel or "test_evals_free" not in sel or data.estimated not in sel:
                    continue
                est = h[h["selected_estimated"].astype(bool)] if "selected_estimated" in h else sel
                if est["test_evals_free"].notna().any():
                    cost = _free_cost(est)
                    out.append(_point(where, est, cost, data.estimated, False, True))
    return [p for p in out if math.isfinite(p["x"]) and math.isfinite(p["y"]) and p["x"] > 0]


def _frontier(data: _Data, runs: pd.DataFrame) -> Figure:
    """Total evaluations per cell against test NMSE, one curve per learner across budgets
    (:func:`frontier_points`), one panel per dataset setting."""
    settings = _panel_settings(data, runs[runs["method"].isin(data.style)])
    points = pd.DataFrame(frontier_points(data, runs))
    fig, axes = _grid(len(settings), MAX_COLS)
    levels = _majority_levels(data, runs, settings) if data.classifies else [1.0] * len(settings)
    log = len(points) > 0 and _use_log(np.append(points["y"].to_numpy(), levels))
    for panel, (ax, where) in enumerate(zip(axes, settings, strict=True)):
        p = points[points["panel"] == panel] if len(points) else points
        for (method, free_point), g in (
            p.groupby(["method", "free_point"], sort=False) if len(p) else []
        ):
            _frontier_curve(ax, data, method, bool(free_point), g.sort_values("x"), log)
        if len(p) and data.classifies:
            if math.isfinite(levels[panel]):
                ax.axhline(
                    levels[panel], color="grey", linestyle="-.", linewidth=1.3, label=MAJORITY_LABEL
                )
        elif len(p):
            nmse_one(ax)
        ax.set_xscale("log")
        # labels at 1, 2 and 5 of each decade (matplotlib's own minor labels run into each
        # other over a narrow range); the other minor ticks keep the grid
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(_decade_label))
        ax.xaxis.set_minor_formatter(NullFormatter())
        yscale(ax, log)
        ax.set_title(_facet_text(where) or data.name, fontsize=9.5)
        ax.set_xlabel(COST_AXIS)
        ax.set_ylabel(data.ylabel if data.classifies else data.interval_text(TEST_NMSE))
        ax.grid(alpha=0.3, which="both")
        if p.empty:
            _empty(ax)
    any_kernel = len(points) > 0 and bool(points["kernel"].any())
    hollow = "; hollow = with the closed-form kernel" if any_kernel else ""
    what, cost = ("test-error", COST_DEF_ERROR) if data.classifies else ("NMSE", COST_DEF)
    _finish(fig, axes, data.header(f"cost–{what} frontier: {cost}{hollow}"))
    return fig


def _majority_levels(data: _Data, runs: pd.DataFrame, settings: list[dict]) -> list[float]:
    """The majority class's mean test error rate (``test_error_const`` over the selected rows)
    in each frontier panel of a classification run (NaN where no row has it)."""
    out = []
    for where in settings:
        rows = _select(runs, where)
        col = rows.loc[rows["selected"].astype(bool), "test_error_const"] if len(rows) else []
        v = pd.to_numeric(pd.Series(col), errors="coerce").dropna()
        out.append(float(v.mean()) if len(v) else math.nan)
    return out


def _frontier_curve(
    ax: Axes, data: _Data, method: str, free_point: bool, g: pd.DataFrame, log: bool
) -> None:
    """One learner's frontier points (one per budget) joined by a line: hollow markers and
    "(kernel)" in the label where the scored predictor used the closed-form kernel."""
    style = dict(data.style[method])
    kernel = bool(g["kernel"].any())
    if free_point:
        style["label"] += ", without the kernel (Algorithm 2 at validation and test)"
        style["linestyle"] = ":"
    elif kernel:
        style["label"] += " (kernel)"
    y, ci = g["y"].to_numpy(dtype=float), np.nan_to_num(g["ci"].to_numpy(dtype=float))
    lo = np.where(y - ci > 0, ci, y - y / 10 if log else y)  # a bar never crosses 0
    ax.errorbar(
        g["x"].to_numpy(dtype=float),
        y,
        yerr=[lo, ci],
        color=style["color"],
        linestyle=style["linestyle"],
        marker=style["marker"],
        markersize=6,
        markerfacecolor="none" if kernel else style["color"],
        capsize=3,
        linewidth=1.4,
        label=style["label"],
    )


def _m_test(data: _Data, runs: pd.DataFrame) -> Figure:
    """Algorithm-2 test NMSE against m_test (log x) of every kernel-expansion learner's selected
    setting, one curve per budget, one panel per dataset setting; its exact test NMSE (exact
    runs) as a level in the same colour, dashed; NMSE = 1."""
    sweep = m_test_sweep(runs)
    ms = np.array([m for m, _ in sweep], dtype=float)
    runs = runs[runs["selected"] & runs["method"].isin(data.style)]
    settings = _panel_settings(data, runs)
    fig, axes = _grid(len(settings), MAX_COLS)
    exact = "eval_kernel" not in runs or (runs["eval_kernel"].fillna("exact") == "exact").all()
    values = runs[[c for _, c in sweep] + (["test_nmse"] if exact else [])].to_numpy(float)
    log = _use_log(np.append(values.ravel(), 1.0))
    for ax, where in zip(axes, settings, strict=True):
        rows = _select(runs, where)
        drawn = False
        for method in rows["method"].unique():
            g = rows[rows["method"] == method]
            if not g[[c for _, c in sweep]].notna().any().any():
                continue
            ks = sorted(g["dsgd_k"].dropna().unique()) if g["dsgd_k"].notna().any() else [None]
            for j, k in enumerate(ks):
                h = g if k is None else g[g["dsgd_k"] == k]
                st = [_mean_point(h, pd.Series(m, index=h.index), c) for m, c in sweep]
                mean = np.array([s[1] for s in st])
                half = np.array([s[2] for s in st])
                style = dict(data.style[method])
                at = f" (k={int(k)})" if k is not None else ""
                style["label"] += f", Algorithm-2 test NMSE{at}"
                style["linestyle"] = ("-", "--", "-.", ":")[j % 4]
                ok = np.isfinite(mean)
                _band(ax, ms[ok], mean[ok], half[ok], style, log=log)
                drawn = True
                if exact and "test_nmse" in h and np.isfinite(h["test_nmse"]).any():
                    v = float(h["test_nmse"][np.isfinite(h["test_nmse"])].mean())
                    ax.axhline(
                        v,
                        color=style["color"],
                        linestyle=(0, (2, 2)),
                        linewidth=1.1,
                        label=f"{data.style[method]['label']}, exact test NMSE (closed-form "
                        f"kernel){at}",
                    )
        nmse_one(ax)
        ax.set_xscale("log")
        ax.set_xticks(ms, [f"{int(m):,}" for m in ms])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("m_test (Algorithm-2 samples per test point)")
        ax.set_ylabel(data.interval_text(TEST_NMSE))
        ax.set_title(_facet_text(where) or data.name, fontsize=9.5)
        ax.grid(alpha=0.3, which="both")
        if not drawn:
            _empty(ax)
        yscale(ax, log)
    _finish(fig, axes, data.header("Algorithm-2 test NMSE against m_test (selected settings)"))
    return fig
