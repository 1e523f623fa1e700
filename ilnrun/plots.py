"""Figures from a results directory (``summary.csv``, ``curves.csv``, ``config.yaml``).

- ``figure1``: selected test loss against the experiment's x axis, one panel per budget
  (``dsgd_k``), 95% t-interval bands, the exact-kernel oracle dashed in every panel, the mean
  predictor (training-label mean, docs/protocol.md §8) as a grey dash-dotted line, and a
  learner's Algorithm-2 test loss (what a user without the kernel gets) dotted in its colour.
- ``curves``: running mean online loss against round ``t`` (mean over repetitions, band
  95% t-interval), rows = budgets, columns = at most three x-axis values.
- ``budget_sweep`` (only with two or more budgets): test loss against the budget target, with
  the same mean-predictor and Algorithm-2 lines.

The x axis is the first ``dataset`` key (config order) with more than one value in
``summary.csv``; failing that ``dsgd_k``; failing that a single categorical point. Dataset keys
other than the x axis that also vary split the panels further. Figures are built on
:class:`matplotlib.figure.Figure` directly, so no pyplot or global backend state is touched.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from .data import DATASETS
from .learners import LEARNERS, competitors
from .results import save_figure_atomic
from .stats import t975

# Learners are drawn in registry order: the compared learners take colours and markers from
# these cycles, reference learners are black and dashed.
COLOR_CYCLE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")
MARKER_CYCLE = ("o", "s", "^", "v", "P", "X", "*")
# reference learners: black dashed, then dark grey dash-dot-dotted
REF_COLORS = ("black", "#555555")
REF_MARKERS = ("D", "*")
REF_LINES = ("--", (0, (6, 2, 1, 2, 1, 2)))
BUDGET_AXIS = "budget: Doubly SGD features per round k"


def styles() -> dict[str, dict[str, Any]]:
    """Label, colour, marker, line style and horizontal offset of every registered learner."""
    out: dict[str, dict[str, Any]] = {}
    compared = competitors()
    refs = [n for n in LEARNERS if n not in compared]
    n = len(LEARNERS)
    for i, (name, spec) in enumerate(LEARNERS.items()):
        ref = spec.role == "reference"
        j = compared.index(name) if not ref else refs.index(name)
        out[name] = {
            "label": spec.label,
            "color": REF_COLORS[j % 2] if ref else COLOR_CYCLE[j % len(COLOR_CYCLE)],
            "marker": REF_MARKERS[j % 2] if ref else MARKER_CYCLE[j % len(MARKER_CYCLE)],
            "linestyle": REF_LINES[j % 2] if ref else "-",
            "dodge": 0.08 * (i - (n - 1) / 2),
            "reference": ref,
        }
    return out


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
TEST_LOSS = "test loss ½(f(x)−y)² (mean, 95% CI)"
SAVE_METADATA = {"pdf": {"CreationDate": None}, "svg": {"Date": None}, "png": {}}
MAX_COLS = 3
MIN_WIDTH = 8.0  # inches: room for the suptitle and the legend over a single panel


def plot_results(results_dir: Path, formats: list[str]) -> list[Path]:
    """Write ``figure1``, ``curves`` and (with >= 2 budgets) ``budget_sweep`` into
    ``results_dir`` in every format of ``formats`` ("png", "pdf", "svg"); return the paths."""
    results_dir = Path(results_dir)
    data = _Data.load(results_dir)
    figures = {"figure1": _figure1(data), "curves": _curves(data)}
    if data.summary.loc[data.budgeted, "dsgd_k"].nunique() >= 2:
        figures["budget_sweep"] = _budget_sweep(data)
    if data.x == "T" and data.summary.get("regret_mean", pd.Series(dtype=float)).notna().any():
        figures["regret"] = _regret(data)
    written: list[Path] = []
    with matplotlib.rc_context({"svg.hashsalt": "ilnrun", "pdf.compression": 6}):
        for name, fig in figures.items():
            for fmt in formats:
                path = results_dir / f"{name}.{fmt}"
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
        for col in ("test_loss_mean", "test_loss_ci95"):  # absent when nothing was selected
            if col not in summary:
                summary[col] = np.nan
        self.summary = summary
        self.curves = curves
        self.style = styles()
        self.compared = [m for m in competitors() if m in set(summary["method"])]
        self.references = [
            m for m in self.style if self.style[m]["reference"] and m in set(summary["method"])
        ]
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
        parts.append(f"n={_span(s['n'])} repetitions")
        return f"{self.name}: {what} ({', '.join(parts)})"


def _fmt(v: Any) -> str:
    """Compact text of a table value (integers without a trailing ``.0``)."""
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _span(col: pd.Series) -> str:
    """``40`` or ``40–80`` for the values of a numeric column."""
    lo, hi = col.min(), col.max()
    return _fmt(lo) if lo == hi else f"{_fmt(lo)}–{_fmt(hi)}"


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


def _grid(n: int, ncols: int, width: float = 4.6, height: float = 3.4) -> tuple[Figure, list[Axes]]:
    """A figure with ``n`` panels in rows of at most ``ncols``; unused cells are hidden."""
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig = Figure(
        figsize=(max(width * ncols, MIN_WIDTH), height * nrows + 0.9), layout="constrained"
    )
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _positions(values: Sequence[Any]) -> tuple[np.ndarray, list[str] | None]:
    """Numeric x positions of ``values``, and tick labels when they are categorical."""
    arr = np.asarray(values, dtype=object)
    numeric = all(
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
        for v in arr
    )
    if numeric:
        return arr.astype(float), None
    return np.arange(len(arr), dtype=float), [_fmt(v) for v in arr]


def _band(
    ax: Axes,
    x: np.ndarray,
    mean: np.ndarray,
    half: np.ndarray,
    style: dict[str, Any],
    *,
    markers: bool = True,
    log: bool = False,
    nonnegative: bool = True,
) -> None:
    """A line (dashed black for the oracle) with a shaded band ``mean ± half``; a single point
    is drawn with an error bar instead."""
    half = np.nan_to_num(np.asarray(half, dtype=float))
    lo, hi = mean - half, mean + half
    # losses are >= 0: a band reaching below zero stops at 0 (at a tenth of the mean on log axes)
    if nonnegative:
        lo = np.where(lo > 0, lo, mean / 10 if log else 0.0)
    line = {
        "color": style["color"],
        "label": style["label"],
        "linestyle": style["linestyle"],
        "marker": style["marker"] if markers else None,
        "markersize": 5,
        "linewidth": 1.6,
    }
    if len(x) == 1:
        ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], capsize=4, **line)
        return
    ax.plot(x, mean, **line)
    ax.fill_between(x, lo, hi, color=style["color"], alpha=0.07 if style["reference"] else 0.15)


def _use_log(values: Sequence[float] | np.ndarray) -> bool:
    """Log scale when all values are positive and span more than a factor of 10."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(len(v) and v.min() > 0 and v.max() / v.min() > 10)


def _finish(fig: Figure, axes: list[Axes], title: str) -> None:
    """Suptitle (wrapped to the figure width) and one legend for the whole figure, below the
    panels (never over the data)."""
    width = fig.get_figwidth()
    fig.suptitle(textwrap.fill(title, width=int(width * 11)))
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    known = [s["label"] for s in styles().values()]
    order = [k for k in known if k in handles] + [k for k in handles if k not in known]
    if order:
        ncol = min(len(order), max(2, int(width / 4.6)))  # long labels: about 4.6 in each
        fig.legend(
            [handles[k] for k in order],
            order,
            loc="outside lower center",
            ncol=ncol,
            fontsize="medium" if width >= 9 else "small",
        )


def _empty(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")


def _figure1(data: _Data) -> Figure:
    """Test loss against the x axis, one panel per (budget, other varying dataset keys)."""
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
    log = _use_log(_drawn_losses(s))
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
            _plot_vs_x(ax, data, r, method, xs, pos, log, metric=ESTIMATED)
        for ref in data.references:
            oracle = rows[rows["method"] == ref]
            if data.x == "dsgd_k" and len(oracle):  # a reference does not depend on the budget
                oracle = pd.concat([oracle.iloc[[0]]] * len(xs)).assign(dsgd_k=xs)
            drawn |= _plot_vs_x(ax, data, oracle, ref, xs, pos, log)
        _mean_line_vs_x(ax, data, rows, xs, pos)
        if k is not None:
            title = _budget_text(budget_rows, k)
        else:
            title = f"budgets matched on {_unit(budget_rows)} per training pass"
        if facet:
            title = f"{title}\n{_facet_text(facet)}"
        ax.set_title(title, fontsize=9.5)
        ax.set_xlabel(data.xlabel())
        ax.set_ylabel(TEST_LOSS)
        if data.x is None:
            ax.set_xticks([0.0], [data.x_text(None) or "single setting"])
            ax.set_xlim(-1, 1)
        else:
            if ticklabels is None and _use_log(pos) and pos.max() / pos.min() > 20:
                ax.set_xscale("log")  # e.g. T = 200 ... 20 000: equal ratios, equal spacing
                ax.xaxis.set_minor_locator(NullLocator())
            if ticklabels is not None or len(xs) <= 8:
                ax.set_xticks(pos, ticklabels or [_fmt(v) for v in xs])
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        if not drawn:
            _empty(ax)
    _finish(fig, axes, data.header(f"test loss vs {data.xlabel()}"))
    return fig


def _estimated_style(data: _Data, method: str) -> dict[str, Any]:
    """The learner's colour, dotted, labelled as its Algorithm-2 test loss with ``m_test``."""
    m_test = data.cfg.get("evaluation", {}).get("m_test")
    return {
        **data.style[method],
        "linestyle": ":",
        "label": f"{data.style[method]['label']}, Algorithm-2 test estimates (m_test={m_test})",
    }


MEAN_STYLE = {
    "label": "mean predictor (training-label mean)",
    "color": "grey",
    "marker": None,
    "linestyle": "-.",
    "reference": True,
}


def _mean_line_vs_x(
    ax: Axes, data: _Data, rows: pd.DataFrame, xs: list[Any], pos: np.ndarray
) -> None:
    """The best constant predictor's test loss (data only: one value per x), a grey line."""
    col = "test_loss_const_mean"
    if col not in rows or not rows[col].notna().any():
        return
    if data.x is None or data.x == "dsgd_k":
        v = rows[col].dropna().iloc[0]
        ax.axhline(v, color="grey", linestyle="-.", linewidth=1.3, label=MEAN_STYLE["label"])
        return
    per_x = rows.dropna(subset=[col]).groupby(data.x)[col].first()
    x = np.array([pos[xs.index(v)] for v in per_x.index if v in xs])
    ax.plot(
        x, per_x.to_numpy(), color="grey", linestyle="-.", linewidth=1.3, label=MEAN_STYLE["label"]
    )


ESTIMATED = "test_loss_estimated"


def _drawn_losses(s: pd.DataFrame) -> np.ndarray:
    """Every loss a test-loss panel draws (learners, Algorithm-2 estimates, mean predictor)."""
    cols = [c for c in ("test_loss_mean", f"{ESTIMATED}_mean", "test_loss_const_mean") if c in s]
    return s[cols].to_numpy(dtype=float).ravel()


def _plot_vs_x(
    ax: Axes,
    data: _Data,
    rows: pd.DataFrame,
    method: str,
    xs: list[Any],
    pos: np.ndarray,
    log: bool,
    metric: str = "test_loss",
) -> bool:
    """Plot ``rows``' ``metric`` (the test loss, or with ``metric=ESTIMATED`` the Algorithm-2
    test loss, dotted) at the positions of their x values; False if nothing to draw."""
    col = f"{metric}_mean"
    if col in rows:
        rows = rows[rows[col].notna()]
    if rows.empty or col not in rows:
        return False
    style = data.style[method] if metric == "test_loss" else _estimated_style(data, method)
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
        markers=metric == "test_loss",
        log=log,
    )
    return True


def _spread(values: list[Any], cap: int) -> list[Any]:
    """At most ``cap`` evenly spaced elements of ``values`` (first and last included)."""
    if len(values) <= cap:
        return values
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, cap)).astype(int))
    return [values[i] for i in idx]


def _curves(data: _Data) -> Figure:
    """Running mean online loss against round t; rows = budgets, columns = x values."""
    c = data.curves
    budgets: list[int | None] = list(data.budgets()) or [None]
    cols: list[Any] = [None] if data.x in (None, "dsgd_k") else _spread(data.x_values(), 3)
    cells = [(k, f, v) for k in budgets for f in data.facets(data.summary) for v in cols]
    fig, axes = _grid(len(cells), len(cols) if len(cols) > 1 else MAX_COLS, width=4.4, height=3.0)
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
                label=MEAN_STYLE["label"],
            )
        parts = [f"budget k={k}" if k is not None else "", _facet_text(facet)]
        if v is not None:
            parts.append(data.x_text(v))
        ax.set_title(", ".join(p for p in parts if p), fontsize=9.5)
        ax.set_xlabel("round t")
        ax.set_ylabel("running mean online loss")
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        if not drawn:
            _empty(ax)
    _finish(fig, axes, data.header("learning curves (mean over repetitions, 95% t-interval)"))
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
    """Test loss against the budget target (log x), one panel per dataset setting (at most 6)."""
    s = data.summary
    split = [*([data.x] if data.x not in (None, "dsgd_k") else []), *data.others]
    settings = (
        [
            dict(zip(split, r, strict=True))
            for r in s[split].drop_duplicates().sort_values(split).itertuples(index=False)
        ]
        if split
        else [{}]
    )
    settings = _spread(settings, 6)
    fig, axes = _grid(len(settings), MAX_COLS)
    log = _use_log(_drawn_losses(s))
    unit = _unit(s[data.budgeted])
    for ax, where in zip(axes, settings, strict=True):
        rows = _select(s, where)
        drawn = False
        for method in data.compared:
            r = rows[rows["method"] == method].sort_values("budget_target")
            if r.empty:
                continue
            _band(
                ax,
                r["budget_target"].to_numpy(dtype=float),
                r["test_loss_mean"].to_numpy(),
                r["test_loss_ci95"].to_numpy(),
                data.style[method],
                log=log,
            )
            drawn = True
        for method in data.compared:
            r = rows[rows["method"] == method].sort_values("budget_target")
            if f"{ESTIMATED}_mean" in r and r[f"{ESTIMATED}_mean"].notna().any():
                r = r[r[f"{ESTIMATED}_mean"].notna()]
                _band(
                    ax,
                    r["budget_target"].to_numpy(dtype=float),
                    r[f"{ESTIMATED}_mean"].to_numpy(),
                    r[f"{ESTIMATED}_ci95"].to_numpy(),
                    _estimated_style(data, method),
                    markers=False,
                    log=log,
                )
        if "test_loss_const_mean" in rows and rows["test_loss_const_mean"].notna().any():
            ax.axhline(
                rows["test_loss_const_mean"].dropna().iloc[0],
                color="grey",
                linestyle="-.",
                linewidth=1.3,
                label=MEAN_STYLE["label"],
            )
        for ref in data.references:
            oracle = rows[rows["method"] == ref]
            if oracle.empty:
                continue
            mean, half = (
                oracle["test_loss_mean"].iloc[0],
                np.nan_to_num(oracle["test_loss_ci95"].iloc[0]),
            )
            ax.axhline(
                mean, color="black", linestyle="--", linewidth=1.6, label=data.style[ref]["label"]
            )
            ax.axhspan(
                max(mean - half, mean / 10 if log else 0.0),
                mean + half,
                color="black",
                alpha=0.06,
                linewidth=0,
            )
            drawn = True
        ax.set_xscale("log")
        targets = sorted(rows["budget_target"].dropna().unique())
        if 0 < len(targets) <= 8:
            ax.set_xticks(targets, [f"{int(t):,}" for t in targets])
            ax.xaxis.set_minor_locator(NullLocator())
        if log:
            ax.set_yscale("log")
        ax.set_title(_facet_text(where) or data.name, fontsize=9.5)
        ax.set_xlabel(f"{unit} per training pass")
        ax.set_ylabel(TEST_LOSS)
        ax.grid(alpha=0.3)
        if not drawn:
            _empty(ax)
    _finish(fig, axes, data.header(f"test loss vs budget ({unit} per training pass)"))
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
        ax.set_title("bounded if regret = O(√T)" if scaled else "mean, 95% CI", fontsize=9.5)
        ax.grid(alpha=0.3, which="both")
    _finish(fig, axes, data.header("regret against the best predictor with |f| ≤ B"))
    return fig
