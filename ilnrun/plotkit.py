"""Building blocks of the figures (:mod:`ilnrun.plots`): every learner's style, the panel grid,
bands, the log-scale rule, the NMSE reference line and the shared legend.

Styles: the compared learners take colours and markers from cycles, solid lines; every reference
learner gets its own colour, line style and marker (:data:`REF_STYLES`, then combinations of
colours and line styles of coprime periods, so no two references of a registry share a style).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .learners import LEARNERS, competitors

COLOR_CYCLE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")
MARKER_CYCLE = ("o", "s", "^", "v", "P", "X", "*")
# reference learners: colours outside COLOR_CYCLE and the grey of the yardstick lines
REF_COLORS = ("black", "#17becf", "#bcbd22", "#6a3d9a", "#b15928")
REF_LINES = ("--", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1.5)), (0, (8, 3)))
REF_MARKERS = ("D", "*", "h", "p", "d", "8", "H")
# NMSE = 1: predicting the test-label mean (the yardstick of every test-loss panel)
NMSE_ONE = "NMSE = 1: the mean predictor (predicting the test-label mean)"
LOG_RATIO = 20.0  # a log axis when the drawn values span more than this factor


def reference_style(j: int) -> tuple[str, Any, str]:
    """Colour, line style and marker of the ``j``-th reference learner: distinct for every
    ``j < lcm(5, 4) = 20`` (colours and line styles cycle with coprime periods)."""
    return (
        REF_COLORS[j % len(REF_COLORS)],
        REF_LINES[j % len(REF_LINES)],
        REF_MARKERS[j % len(REF_MARKERS)],
    )


def styles() -> dict[str, dict[str, Any]]:
    """Label, colour, marker, line style, horizontal offset and kind (``reference``, ``batch``)
    of every registered learner."""
    out: dict[str, dict[str, Any]] = {}
    compared = competitors()
    refs = [n for n in LEARNERS if n not in compared]
    n = len(LEARNERS)
    for i, (name, spec) in enumerate(LEARNERS.items()):
        ref = spec.role == "reference"
        if ref:
            color, line, marker = reference_style(refs.index(name))
        else:
            j = compared.index(name)
            color, line = COLOR_CYCLE[j % len(COLOR_CYCLE)], "-"
            marker = MARKER_CYCLE[j % len(MARKER_CYCLE)]
        out[name] = {
            "label": spec.label,
            "color": color,
            "marker": marker,
            "linestyle": line,
            "dodge": 0.08 * (i - (n - 1) / 2),
            "reference": ref,
            "batch": bool(getattr(spec, "batch", False)),
        }
    return out


def fmt(v: Any) -> str:
    """Compact text of a table value (integers without a trailing ``.0``)."""
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def span(col: pd.Series) -> str:
    """``40`` or ``40–80`` for the values of a numeric column."""
    lo, hi = col.min(), col.max()
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"


def spread(values: list[Any], cap: int) -> list[Any]:
    """At most ``cap`` evenly spaced elements of ``values`` (first and last included)."""
    if len(values) <= cap:
        return values
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, cap)).astype(int))
    return [values[i] for i in idx]


MIN_WIDTH = 8.0  # inches: room for the suptitle and the legend over a single panel
LEGEND_MARGIN = 0.2  # inches of the figure's width left beside the legend


def grid(n: int, ncols: int, width: float = 4.6, height: float = 3.4) -> tuple[Figure, list[Axes]]:
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


def positions(values: Sequence[Any]) -> tuple[np.ndarray, list[str] | None]:
    """Numeric x positions of ``values``, and tick labels when they are categorical."""
    arr = np.asarray(values, dtype=object)
    numeric = all(
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
        for v in arr
    )
    if numeric:
        return arr.astype(float), None
    return np.arange(len(arr), dtype=float), [fmt(v) for v in arr]


def band(
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
    """A line with a shaded band ``mean ± half``; a single point is drawn with an error bar
    instead."""
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


def level(
    ax: Axes,
    mean: float,
    half: float,
    style: dict[str, Any],
    *,
    log: bool = False,
    x: tuple[float, float] | None = None,
) -> None:
    """A batch reference's test loss as a horizontal level with its 95% band: across the panel,
    or (``x = (left, right)``) over one x value's stretch of it."""
    half = float(np.nan_to_num(half))
    lo = mean - half if mean - half > 0 else (mean / 10 if log else 0.0)
    kw = {"color": style["color"], "linestyle": style["linestyle"], "linewidth": 1.8}
    if x is None:
        ax.axhline(mean, label=style["label"], **kw)
        ax.axhspan(lo, mean + half, color=style["color"], alpha=0.08, linewidth=0)
        return
    ax.hlines(mean, x[0], x[1], label=style["label"], **kw)
    ax.fill_between(x, lo, mean + half, color=style["color"], alpha=0.08, linewidth=0)


def use_log(values: Sequence[float] | np.ndarray, ratio: float = LOG_RATIO) -> bool:
    """Log scale when all values are positive and the largest is more than ``ratio`` times the
    smallest (the rule of every figure: a range the eye cannot read on a linear axis)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(len(v) and v.min() > 0 and v.max() / v.min() > ratio)


def nmse_one(ax: Axes) -> None:
    """The yardstick of an NMSE panel: NMSE = 1, the test-label mean predicted everywhere."""
    ax.axhline(1.0, color="grey", linestyle="-.", linewidth=1.3, label=NMSE_ONE)


def finish(fig: Figure, axes: list[Axes], title: str) -> None:
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
    if not order:
        return
    # long labels: about 4.6 in each column; fewer columns while the legend is wider than the
    # figure (the saved figure would cut its sides, line and marker samples first), the figure
    # taller by the rows this adds (the panels keep their height), and a figure widened to a
    # one-column legend that is still wider
    renderer = fig._get_renderer()
    room = fig.bbox.width - LEGEND_MARGIN * fig.dpi
    first_height = None
    for ncol in range(min(len(order), max(2, int(width / 4.6))), 0, -1):
        legend = fig.legend(
            [handles[k] for k in order],
            order,
            loc="outside lower center",
            ncol=ncol,
            fontsize="medium" if width >= 9 else "small",
        )
        extent = legend.get_window_extent(renderer)
        first_height = extent.height if first_height is None else first_height
        if extent.width <= room or ncol == 1:
            break
        legend.remove()
    fig.set_figheight(fig.get_figheight() + (extent.height - first_height) / fig.dpi)
    if extent.width > room:
        fig.set_figwidth(width + (extent.width - room) / fig.dpi)


def freeze_layout(fig: Figure) -> None:
    """Lay the figure out once (constrained layout, at the figure's own dpi) and keep those
    positions for every format saved: otherwise each save lays it out again with its own
    renderer, and a PDF or SVG would depend on which formats were saved before it."""
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


def yscale(ax: Axes, log: bool) -> None:
    """Log y axis (``log``) with plain-number tick labels."""
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def stretches(pos: np.ndarray, log: bool) -> list[tuple[float, float]]:
    """The stretch of axis around each x position: 35% of the way to each neighbour (in log
    units on a log axis), so levels at neighbouring x values never touch."""
    p = np.log(pos) if log else np.asarray(pos, dtype=float)
    gaps = np.diff(p) if len(p) > 1 else np.array([1.0])
    left = p - 0.35 * np.concatenate([[gaps[0]], gaps])
    right = p + 0.35 * np.concatenate([gaps, [gaps[-1]]])
    if log:
        left, right = np.exp(left), np.exp(right)
    return list(zip(left.tolist(), right.tolist(), strict=True))


def empty(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
