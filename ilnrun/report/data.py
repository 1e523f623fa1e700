"""What every report section reads: the tables of one results directory, read once, and the
row selections and paired comparisons the sections share (docs/architecture.md §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config.keys import EDGES_OK
from ..learners import LEARNERS, competitors
from ..stats import (
    against_mean_counted,
    beats_mean,
    counted_verdict,
    difference_word,
    holm,
    mean_ci,
    paired_difference,
    paired_error_difference,
    paired_ratio,
    ratio_word,
    significant,
    verdict_word,
)


def fmt(mean: float | None, ci: float | None, digits: int = 4) -> str:
    """``mean ± ci`` for a table cell; ``—`` for no value, ``diverged`` for an infinite one."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    if math.isinf(mean):
        return "diverged"
    s = f"{mean:.{digits}g}"
    if ci is not None and not (isinstance(ci, float) and math.isnan(ci)):
        s += f" ± {ci:.2g}"
    return s


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def label(method: str) -> str:
    spec = LEARNERS.get(method)
    return spec.label if spec is not None else method


def short(method: str) -> str:
    spec = LEARNERS.get(method)
    return spec.short if spec is not None else method


def x_axis(cfg: dict) -> str | None:
    """The first dataset parameter given as a list (the experiment's x axis), if any."""
    from ..config.grid import axes

    for k in axes(cfg):
        if len(cfg["dataset"][k]) > 1:
            return k
    return None


# the selected rows of the last few runs tables :func:`pick` saw, by ``id`` (the table is kept
# with them, so that an id is not reused while it is here)
_SELECTED: dict[int, tuple[pd.DataFrame, pd.DataFrame]] = {}


def selected_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``runs`` whose setting was selected on validation (in table order), computed
    once per table: a report picks from them thousands of times, and a run with wide grids has
    50 and more settings per selected one."""
    hit = _SELECTED.get(id(runs))
    if hit is not None and hit[0] is runs:
        return hit[1]
    if len(_SELECTED) >= 8:
        _SELECTED.pop(next(iter(_SELECTED)))
    sel = runs[runs["selected"].to_numpy(dtype=bool, na_value=False)]
    _SELECTED[id(runs)] = (runs, sel)
    return sel


def _match(runs: pd.DataFrame, method: str, keys: dict) -> np.ndarray:
    """The mask of ``method``'s rows matching ``keys`` (one mask over the columns compared, then
    one take of the wide table: filtering it step by step copied every column at each step)."""
    mask = (runs["method"] == method).to_numpy(dtype=bool, na_value=False)
    for k, v in keys.items():
        mask = mask & (runs[k] == v).to_numpy(dtype=bool, na_value=False)
    return mask


def pick(runs: pd.DataFrame, method: str, keys: dict, by: str | None) -> pd.DataFrame:
    """Rows of ``method`` matching ``keys`` for one hyperparameter setting: the one selected on
    validation loss (``by=None``), or the one with the lowest mean ``by`` over repetitions
    among the settings none of whose repetitions diverged or timed out (as selection does)."""
    if by is None:
        sel = selected_rows(runs)
        return sel[_match(sel, method, keys)]
    g = runs[_match(runs, method, keys)]
    failed = (g["diverged"] | g["timed_out"]).groupby(g["setting"]).any()
    ok = g[g["setting"].isin(failed.index[~failed])]
    if ok.empty:
        return ok
    return ok[ok["setting"] == ok.groupby("setting")[by].mean().idxmin()]


def paired_loss_ratio(
    runs: pd.DataFrame, a: str, b: str, keys: dict, metric: str = "test_loss", by: str | None = None
) -> dict:
    """``metric(a) / metric(b)`` paired by repetition (settings chosen by :func:`pick`, rows
    matching ``keys``): the geometric mean of the per-repetition ratios with its 95% interval
    and the paired t-test of the mean log ratio (:func:`ilnrun.stats.paired_ratio`). On the
    same test points ``test_loss(a) / test_loss(b) = test_nmse(a) / test_nmse(b)`` (both divide
    by the same ``var(y_test)``), so a test-loss ratio is the NMSE ratio."""
    la = pick(runs, a, keys, by).set_index("repetition")[metric]
    lb = pick(runs, b, keys, by).set_index("repetition")[metric]
    return paired_ratio(la, lb)


def paired_error(runs: pd.DataFrame, a: str, b: str, keys: dict) -> dict:
    """``test_error(a) − test_error(b)`` paired by repetition, both at the settings selected on
    their own validation loss (:func:`pick`, rows matching ``keys``): the mean difference with
    its 95% interval and the paired t-test (:func:`ilnrun.stats.paired_error_difference`)."""
    ea = pick(runs, a, keys, None).set_index("repetition")["test_error"]
    eb = pick(runs, b, keys, None).set_index("repetition")["test_error"]
    return paired_error_difference(ea, eb)


def against(
    runs: pd.DataFrame, method: str, keys: dict, metric: str = "test_loss", const: str = ""
) -> dict:
    """Mean and 95% CI of ``metric − const`` over the repetitions of ``method``'s selected
    setting (both columns of the same rows: paired by construction). ``const`` defaults to
    the best constant predictor's loss on the points ``metric`` was measured on."""
    const = const or CONST_OF.get(metric, "test_loss_const")
    rows = pick(runs, method, keys, None).set_index("repetition")
    if metric not in rows or const not in rows:
        return {"n": 0, "mean": math.nan, "ci": math.nan}
    return paired_difference(rows[metric], rows[const])


# What a report says, once, in place of every interval and verdict when its results hold fewer
# than two repetitions: a Student-t interval and a paired test need two values at least.
ONE_REPETITION = "One repetition: no interval or verdict can be computed."

# the best-constant loss on the same test points as a test loss
CONST_OF = {
    "test_loss": "test_loss_const",
    "test_loss_estimated": "test_loss_const_subset",
    "test_error": "test_error_const",
}

# The two protocols of a verdict (docs/protocol.md §7.3). ``KERNEL``: the proposed learner
# selected and scored as the run's tables do — with the closed-form kernel in an exact run;
# ``FREE``: selected on its Algorithm-2 validation loss and scored on its Algorithm-2 test loss,
# against the learners that need no kernel on their own features. Each view is the same
# selection and paired comparison (:func:`pick`, :func:`paired`) on the runs table of its mode
# (:meth:`ReportData.view`).
KERNEL, FREE = "kernel", "free"
MODE_TITLE = {KERNEL: "with the closed-form kernel", FREE: "without the kernel"}
# The machine-readable line of every report written since its headline lines name their
# protocol (followed by the run's ``evaluation.kernel`` and `` -->``): ``ilnrun index`` copies
# such a headline as it is, and words the lines of a report without it
# (:mod:`ilnrun.report.legacy`).
PROTOCOL_MARK = "<!-- ilnrun report: headline lines name their protocol; evaluation.kernel: "

# (metric, selection rule for pick(), description) of the claims checked
COMPARISONS = (
    ("test_loss", None, "test loss (settings selected on validation loss)"),
    ("online_loss", None, "online loss (same settings)"),
    ("online_loss", "online_loss", "online loss (each learner's best setting for online loss)"),
)


# The comparison of test error rates of a classification run (±1 labels): (metric, selection
# rule, description), made in the run's own protocol only (docs/protocol.md §7.4)
ERROR_COMPARISON = (
    "test_error",
    None,
    "test error rate (settings selected on each learner's own validation loss)",
)


def m_test_text(m_test: Any) -> str:
    """``evaluation.m_test`` in words: ``m_test = 1000``, ``m_test by Theorem 1.3's rule``,
    ``m_test = 0.5·T``, ``m_test = the training m``."""
    if isinstance(m_test, dict) and "per_T" in m_test:
        return f"m_test = {m_test['per_T']:g}·T"
    if m_test == "theorem1":
        return "m_test by Theorem 1.3's rule (⌈c B⁴ T log(BT)⌉)"
    if m_test == "train":
        return "m_test = the training m"
    return f"m_test = {m_test}"


def setting_values(setting: str) -> dict[str, str]:
    """A ``setting`` string (``key=value`` pairs joined by commas) as a mapping."""
    out: dict[str, str] = {}
    last = None
    for part in setting.split(","):
        if "=" in part:
            last, value = part.split("=", 1)
            out[last] = value
        elif last is not None:  # a value that held a comma
            out[last] += "," + part
    return out


def _numeric_grids(grid: dict) -> dict[str, list]:
    """The numeric values of each hyperparameter given as a grid of three or more numbers (with
    two values every choice is an edge: nothing learned)."""
    out = {}
    for key, values in grid.items():
        if isinstance(values, list):
            nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(nums) >= 3:
                out[key] = nums
    return out


@dataclass(frozen=True)
class Edge:
    """A selected value at the smallest or largest point of a parameter's grid: ``param``,
    its ``value``, the ``side`` (``smallest`` / ``largest``) and the x values ``xs`` at which
    it was selected (``[None]`` without an x axis)."""

    param: str
    value: float
    side: str
    xs: list

    @property
    def flag(self) -> str:
        """``eta=0.03 (smallest of the grid)``."""
        return f"{self.param}={self.value:g} ({self.side} of the grid)"


def grid_edges(grid: dict, summary: pd.DataFrame, xa: str | None) -> list[Edge]:
    """Every numeric hyperparameter of a learner's resolved section ``grid`` whose selected
    value in the ``summary`` rows (one learner, one budget; one row per dataset setting, ``xa``
    its x axis) is the smallest or largest of a grid of three or more values: the best value
    may lie outside the grid (docs/protocol.md §5.1). Values are read from the selected
    ``setting`` as written in the grid (under ``eta_scale: sqrt_T`` in units of 1/√T)."""
    numeric = _numeric_grids(grid)
    if not numeric:
        return []
    s = summary
    xs = s[xa] if xa else [None] * len(s)
    # the values as written (the setting), else the hyperparameter columns
    written = s["setting"] if "setting" in s else [None] * len(s)
    settings = [
        (x, setting_values(st) if isinstance(st, str) else dict(row))
        for x, st, (_, row) in zip(xs, written, s.iterrows(), strict=True)
        if isinstance(st, str) or "setting" not in s
    ]
    out = []
    for key, nums in numeric.items():
        for v in sorted({min(nums), max(nums)}):
            at = [x for x, h in settings if _same(h.get(key), v)]
            if at:
                out.append(Edge(key, v, "smallest" if v == min(nums) else "largest", at))
    return out


def _same(text: Any, v: float) -> bool:
    """Whether a setting's value ``text`` (a string or a number) is the number ``v``."""
    try:
        return text is not None and float(text) == float(v)
    except (TypeError, ValueError):
        return False


class ReportData:
    """The resolved config, ``meta.json``, ``runs.csv`` and ``summary.csv`` of a results
    directory, the experiment's axes, and the comparisons the sections share."""

    def __init__(self, results_dir: Path, out_dir: Path) -> None:
        self.results_dir, self.out_dir = Path(results_dir), Path(out_dir)
        from ..readers import (
            RUNS_COLUMNS,
            SUMMARY_COLUMNS,
            is_packed,
            read_config,
            read_meta,
            read_table,
        )

        d = self.results_dir
        # a packed folder (``ilnrun pack``) holds no figures: the report draws them elsewhere
        self.packed = is_packed(d)
        self.figure_dir = d  # where the figures section finds the PNGs (build_report)
        # the figures' names when they are listed without being drawn (build_report(draw=False))
        self.figure_names: set[str] | None = None
        self.cfg = read_config(d)
        self.meta = read_meta(d)
        self.runs = read_table(d, "runs.csv", RUNS_COLUMNS)
        self.summary = read_table(d, "summary.csv", SUMMARY_COLUMNS)
        # a learner without parameters has the empty setting, which the CSV reads back as NaN
        if "setting" in self.runs:
            self.runs["setting"] = self.runs["setting"].astype(object).fillna("")
        self.xa = x_axis(self.cfg)
        self.ks = [int(k) for k in sorted(self.summary["dsgd_k"].dropna().unique())]
        present = set(self.summary["method"])
        self.methods = [m for m in LEARNERS if m in present]
        self.compared = [m for m in competitors() if m in present]
        self.proposed = [m for m in self.compared if LEARNERS[m].role == "proposed"]
        self.batch = [m for m in self.methods if LEARNERS[m].batch]
        self.xs = sorted(self.summary[self.xa].dropna().unique()) if self.xa else [None]
        # the repetitions the results hold (a run may have been stopped before the config's)
        reps = self.runs["repetition"].nunique() if "repetition" in self.runs else 0
        self.repetitions = int(reps) or int(self.cfg.get("repetitions", 1))
        self._views: dict[str, pd.DataFrame | None] = {}
        self._vs_mean: dict[tuple, dict] = {}  # vs_mean's answers
        self._summary_rows: dict[tuple, pd.DataFrame] = {}  # summary_rows' answers

    @property
    def eval_kernel(self) -> str:
        """The run's protocol, ``exact`` or ``free`` (``evaluation.kernel``; the rows'
        ``eval_kernel``; results written before the key existed: ``exact``)."""
        if "eval_kernel" in self.runs and self.runs["eval_kernel"].notna().any():
            return str(self.runs["eval_kernel"].dropna().iloc[0])
        return str(self.cfg["evaluation"].get("kernel", "exact"))

    @property
    def run_protocol(self) -> str:
        """The run's own tables in words (:data:`MODE_TITLE`): ``with the closed-form kernel``
        for an exact run, ``without the kernel`` for a kernel-free one."""
        return MODE_TITLE[FREE if self.eval_kernel == "free" else KERNEL]

    @property
    def free_points_differ(self) -> bool:
        """Whether the without-kernel comparison scores the proposed learner and the feature
        learners on different test points: an exact run written before ``test_loss_subset``
        existed, whose Algorithm-2 loss is on the first ``n_test_estimated`` points only."""
        n_est = self.cfg["evaluation"].get("n_test_estimated", "all")
        if self.eval_kernel != "exact" or "test_loss_subset" in self.runs or n_est == "all":
            return False
        if "n_test" not in self.runs:
            return True
        n_test = pd.to_numeric(self.runs["n_test"], errors="coerce")  # e.g. 'rest' of a table
        return not (n_test.notna().all() and (n_test <= int(n_est)).all())

    def view(self, mode: str | None = None) -> pd.DataFrame | None:
        """The runs table a verdict of protocol ``mode`` reads; ``None``: the run's own rows.

        - ``KERNEL``: the rows as written by an exact run; ``None`` when the run was kernel-free
          (``evaluation.kernel: free``: nothing was evaluated with the kernel).
        - ``FREE``: the learners that do not need the kernel; under ``free`` their rows as
          written; in an exact run, the proposed learners' rows with ``selected`` ←
          ``selected_estimated`` (selection on ``val_loss_estimated``), ``test_loss`` ←
          ``test_loss_estimated`` and ``test_loss_const`` ← ``test_loss_const_subset`` (its
          points), the feature learners' ``test_loss`` ← ``test_loss_subset`` on the same
          points where the rows have it (else their loss on all test points:
          :attr:`free_points_differ`). ``None`` when no proposed learner has an Algorithm-2
          validation loss (results written before it existed)."""
        if mode is None:
            return self.runs
        if mode not in self._views:
            self._views[mode] = self._make_view(mode)
        return self._views[mode]

    def _make_view(self, mode: str) -> pd.DataFrame | None:
        runs, free = self.runs, self.eval_kernel == "free"
        if mode == KERNEL:
            return None if free else runs
        runs = runs[~runs["method"].map(lambda m: m in LEARNERS and LEARNERS[m].needs_kernel)]
        if free:
            return runs
        own = runs["method"].map(lambda m: m in LEARNERS and LEARNERS[m].estimated_validation)
        if (
            "val_loss_estimated" not in runs
            or "selected_estimated" not in runs
            or not runs.loc[own & runs["method"].isin(self.proposed), "val_loss_estimated"]
            .notna()
            .any()
        ):
            return None
        runs = runs.copy()
        runs.loc[own, "selected"] = runs.loc[own, "selected_estimated"].astype(bool)
        runs.loc[own, "test_loss"] = runs.loc[own, "test_loss_estimated"]
        if "test_nmse_estimated" in runs:
            runs.loc[own, "test_nmse"] = runs.loc[own, "test_nmse_estimated"]
        subset = "test_loss_const_subset" in runs
        if subset:
            runs.loc[own, "test_loss_const"] = runs.loc[own, "test_loss_const_subset"]
        if "test_loss_subset" in runs and subset:
            runs.loc[~own, "test_loss"] = runs.loc[~own, "test_loss_subset"]
            runs.loc[~own, "test_loss_const"] = runs.loc[~own, "test_loss_const_subset"]
            runs.loc[~own, "test_nmse"] = math.nan  # its NMSE on these points is not written
        elif "test_loss_const" in runs and not subset:
            runs.loc[own, "test_loss_const"] = math.nan  # no yardstick on its points
        return runs

    def compared_in(self, mode: str | None) -> list[str]:
        """The compared learners a verdict of ``mode`` has: under ``FREE`` none that needs the
        kernel."""
        if mode != FREE:
            return self.compared
        return [m for m in self.compared if not LEARNERS[m].needs_kernel]

    @property
    def tested(self) -> bool:
        """Whether intervals and verdicts can be computed: two repetitions or more (with one,
        every section prints the means without intervals, marks or verdict words, and says
        why: :data:`ONE_REPETITION`)."""
        return self.repetitions >= 2

    def select_modes(self) -> dict[str, str]:
        """What each learner is selected on (``exact`` / ``estimated``, docs/protocol.md
        §5.2), from the results' ``evaluation.select_on``."""
        from ..results import select_modes

        return select_modes(self.cfg["evaluation"].get("select_on", "exact"), self.methods)

    def keys(self, k: int | None, x: Any) -> dict:
        """Row filter for one budget and one x-axis value."""
        out = {} if k is None else {"dsgd_k": k}
        return out | ({self.xa: x} if self.xa and x is not None else {})

    def budgeted(self, method: str) -> bool:
        """Whether ``method``'s selected settings are per budget: a compared learner with a
        budget axis, unless none of its settings takes the budget (the ``theory`` preset)."""
        if method not in self.compared or not getattr(self, "ks", True):
            return False
        return bool(self.summary.loc[self.summary["method"] == method, "dsgd_k"].notna().any())

    def summary_rows(self, method: str, k: int | None, x: Any) -> pd.DataFrame:
        """The summary's rows of ``method`` at budget ``k`` and x value ``x`` (each computed
        once: the tables ask for them many times)."""
        key = (method, k, repr(x))
        if key not in self._summary_rows:
            s = self.summary[self.summary["method"] == method]
            if self.budgeted(method) and k is not None:
                s = s[s["dsgd_k"] == k]
            if self.xa and x is not None:
                s = s[s[self.xa] == x]
            self._summary_rows[key] = s
        return self._summary_rows[key]

    def cell(self, method: str, metric: str, k: int | None, x: Any, flag: bool = False) -> str:
        """``mean ± ci`` of a selected setting; ``all settings diverged`` when the group has no
        selected setting; with ``flag`` the mark of :meth:`mean_flag` appended."""
        s = self.summary_rows(method, k, x)
        if len(s) and int(s["n"].fillna(0).iloc[0]) == 0:
            return "all settings diverged"
        if not len(s) or f"{metric}_mean" not in s:
            return "—"
        out = fmt(s[f"{metric}_mean"].iloc[0], s[f"{metric}_ci95"].iloc[0])
        versus = "test_loss" if metric == "test_nmse" else metric  # same comparison
        return out + (self.mean_flag(method, k, x, versus) if flag else "")

    @property
    def losses(self) -> dict[str, str]:
        """Each learner's loss (``runs.csv``'s ``loss`` column; the square loss for results
        written before it existed), in learner order."""
        if "loss" not in self.runs:
            return dict.fromkeys(self.methods, "square")
        first = self.runs.groupby("method", sort=False)["loss"].first()
        return {m: str(first.get(m, "square")) for m in self.methods}

    def loss_groups(self) -> list[tuple[str | None, list[str]]]:
        """``(loss, learners)`` per loss, in learner order, when the learners learn with
        different losses (:meth:`mixed_losses`): the tables whose yardsticks are losses give
        each loss its own (its best constant's and the zero predictor's loss, in that loss);
        ``[(None, every learner)]`` when they share one loss."""
        if not self.mixed_losses():
            return [(None, self.methods)]
        groups: dict[str, list[str]] = {}
        for m, loss in self.losses.items():
            groups.setdefault(loss, []).append(m)
        return [(loss, ms) for loss, ms in groups.items()]

    def mixed_losses(self) -> str | None:
        """A sentence when the learners learn with different losses (their losses are then in
        different units: compare them by ``test_error``), else ``None``."""
        losses = self.losses
        if len(set(losses.values())) < 2:
            return None
        each = ", ".join(f"{label(m)}: {v}" for m, v in losses.items())
        return (
            f"The learners learn with different losses ({each}): their test and online losses, "
            "the loss ratios of the verdicts and the loss yardsticks are in different units; "
            "the test error rate (`test_error`) compares them on one scale."
        )

    @property
    def classifies(self) -> bool:
        """Whether the run classifies: its rows carry a test error rate (±1 labels, or a loss of
        ±1 labels; docs/protocol.md §12). Only then do the report's test-error tables,
        figures and verdicts appear (a regression report is unchanged)."""
        return "test_error" in self.runs and bool(self.runs["test_error"].notna().any())

    @property
    def error_mode(self) -> str:
        """The protocol of the test-error verdict: the run's own (``KERNEL`` for an exact run,
        ``FREE`` for a kernel-free one). An exact run records the proposed learner's test error
        with the closed-form kernel only (no Algorithm-2 error column), so no test-error
        verdict is made without the kernel there."""
        return FREE if self.eval_kernel == "free" else KERNEL

    @property
    def has_const(self) -> bool:
        """Whether the results carry the best-constant yardstick (written since it exists)."""
        return "test_loss_const" in self.runs

    def vs_mean(
        self, method: str, k: int | None, x: Any, metric: str = "test_loss", mode: str | None = None
    ) -> dict:
        """Paired ``metric − best constant`` of ``method``'s selected setting at (k, x), on the
        runs of protocol ``mode`` (:meth:`view`); computed once per question (a report asks
        each several times: tables, flags, verdicts)."""
        key = (method, k, repr(x), metric, mode)
        if key not in self._vs_mean:
            keys = self.keys(k if self.budgeted(method) else None, x)
            self._vs_mean[key] = against(self.view(mode), method, keys, metric)
        return self._vs_mean[key]

    def mean_flag(self, method: str, k: int | None, x: Any, metric: str = "test_loss") -> str:
        """``''`` when the selected setting beats the mean predictor significantly (paired, 95%),
        `` ‡`` when it is significantly worse, `` †`` otherwise (not distinguishable)."""
        if not self.has_const or not self.tested:
            return ""
        p = self.vs_mean(method, k, x, metric)
        if p["n"] == 0 or beats_mean(p):
            return ""
        return " ‡" if significant(p) else " †"

    def mean_rows(
        self, metric: str = "test_loss", mode: str | None = None
    ) -> list[tuple[str, int | None, list, str]]:
        """(learner, budget, paired results per x, plain verdict) of 'the learner's ``metric``
        is below the best constant predictor's', for every learner that has the metric, on the
        runs of protocol ``mode`` (:meth:`view`; none when that view cannot be made)."""
        out = []
        runs = self.view(mode)
        if not self.has_const or runs is None:
            return out
        for m in self.methods:
            rows = runs[runs["method"] == m]
            if metric not in rows or not rows[metric].notna().any():
                continue  # a metric this learner does not have (diverged losses are inf)
            for k in self.ks if self.budgeted(m) else [None]:
                ps = [self.vs_mean(m, k, x, metric, mode) for x in self.xs]
                words = [verdict_word(p, short(m)) for p in ps]
                out.append((m, k, ps, against_mean_counted(words, self.xa)))
        return out

    def edges(self, method: str, k: int | None) -> list[str]:
        """``key=value`` of every numeric hyperparameter whose selected value (at any dataset
        setting) is the smallest or largest of a grid of three or more values: the best
        value may lie outside the grid."""
        return [flag for flag, _ in self.edges_at(method, k)]

    def edges_at(self, method: str, k: int | None) -> list[tuple[str, list]]:
        """:meth:`edges` with the x values (e.g. each ``T`` of a T sweep) at which each flagged
        value was selected (docs/protocol.md §5.1)."""
        return [(e.flag, e.xs) for e in self.grid_edges(method, k)]

    def grid_edges(self, method: str, k: int | None) -> list[Edge]:
        """:func:`grid_edges` of ``method``'s selected settings at budget ``k``."""
        grid = self.cfg["methods"].get(method, {})
        if not _numeric_grids(grid):
            return []
        s = self.summary[self.summary["method"] == method]
        if k is not None and self.budgeted(method):
            s = s[s["dsgd_k"] == k]
        return grid_edges(grid, s, self.xa)

    def edges_ok(self, method: str) -> dict[str, str]:
        """``methods.<method>.edges_ok``: why a selection at the edge of a parameter's grid is
        acceptable, per parameter (empty when the config gives no reason)."""
        return dict(self.cfg["methods"].get(method, {}).get(EDGES_OK) or {})

    def verdict_plan(self) -> list[tuple[str, str, str | None]]:
        """``(mode, metric, by)`` of every verdict table the report shows: comparisons 1 and 2
        of :data:`COMPARISONS` in each protocol whose view can be made, comparison 3 (no
        kernel chooses or scores it) once, in the last of them."""
        made = [m for m in (KERNEL, FREE) if self.view(m) is not None]
        plan = [
            (mode, metric, by)
            for mode in made
            for metric, by, _ in COMPARISONS
            if by is None or mode == made[-1]
        ]
        if self.classifies and self.view(self.error_mode) is not None:
            plan.append((self.error_mode, ERROR_COMPARISON[0], ERROR_COMPARISON[1]))
        return plan

    def _ratio_rows(
        self, metric: str, by: str | None, mode: str | None
    ) -> list[tuple[str, str, int | None, list[dict]]]:
        """(subject, other, budget, :func:`paired_loss_ratio` per x) of one verdict table; of
        the test-error table, :func:`paired_error` per x."""
        out: list = []
        runs = self.view(mode)
        if runs is None:
            return out
        for subject in self.proposed:
            for other in self.compared_in(mode):
                if other == subject:
                    continue
                for k in self.ks or [None]:
                    keys = [self.keys(k, x) for x in self.xs]
                    if metric == "test_error":
                        ps = [paired_error(runs, subject, other, kk) for kk in keys]
                    else:
                        ps = [
                            paired_loss_ratio(runs, subject, other, kk, metric, by) for kk in keys
                        ]
                    out.append((subject, other, k, ps))
        return out

    def verdict_family(self) -> dict[tuple[str, str, str | None], list]:
        """The rows of every table of :meth:`verdict_plan`, each cell's paired ratio with
        ``p_holm``: its t-test p-value adjusted by Holm–Bonferroni over every tested cell of
        every verdict table of the report (:func:`ilnrun.stats.holm`; cells with fewer than two
        finite pairs are not tested and not counted). Computed once."""
        if not hasattr(self, "_family"):
            family = {key: self._ratio_rows(key[1], key[2], key[0]) for key in self.verdict_plan()}
            cells = [p for rows in family.values() for *_, ps in rows for p in ps]
            for p, adj in zip(cells, holm([p["p"] for p in cells]), strict=True):
                p["p_holm"] = adj
            self._family = family
        return self._family

    @property
    def n_comparisons(self) -> int:
        """How many paired tests the report's verdict tables make (the ``m`` of Holm)."""
        return sum(
            not math.isnan(p["p"])
            for rows in self.verdict_family().values()
            for *_, ps in rows
            for p in ps
        )

    def verdict_rows(
        self, metric: str, by: str | None = None, mode: str | None = None
    ) -> list[tuple[str, str, int | None, list[dict], str]]:
        """(subject, other learner, budget, paired ratios per x value, verdict) for the claim
        'the proposed learner has a lower ``metric`` than each competitor', on the runs of
        protocol ``mode`` (:meth:`view`; no rows when that view cannot be made). Each cell is
        the per-repetition ratio ``metric(subject) / metric(other)`` (:func:`paired_loss_ratio`),
        its word from the Holm-adjusted p over the report's family (:meth:`verdict_family`;
        a table outside :meth:`verdict_plan` is adjusted on its own) and
        :data:`~ilnrun.stats.MIN_REPETITIONS` (:func:`ilnrun.stats.ratio_word`)."""
        key = (mode, metric, by)
        family = self.verdict_family()
        if key in family:
            rows = family[key]
        else:
            rows = self._ratio_rows(metric, by, mode)
            cells = [p for *_, ps in rows for p in ps]
            for p, adj in zip(cells, holm([p["p"] for p in cells]), strict=True):
                p["p_holm"] = adj
        word = difference_word if metric == "test_error" else ratio_word
        return [
            (s, o, k, ps, counted_verdict([word(p, short(s)) for p in ps], self.xa))
            for s, o, k, ps in rows
        ]

    def mean_metric(
        self, method: str, k: int | None, x: Any, mode: str | None = None, column: str = "test_nmse"
    ) -> float:
        """The mean ``column`` (``test_nmse``, or ``test_error`` in a classification run) over
        repetitions of ``method``'s selected setting at (k, x) in the runs of protocol ``mode``
        (:meth:`view`; for the proposed learner without the kernel its Algorithm-2 estimate); a
        learner whose column that view does not carry (a feature learner scored on the
        Algorithm-2 points) by its rows as written: its selection is the same in both views.
        ``inf`` when a repetition diverged, NaN without rows."""
        keys = self.keys(k if self.budgeted(method) else None, x)
        for runs in (self.view(mode), self.runs):
            rows = pick(runs, method, keys, None) if runs is not None else None
            if rows is not None and column in rows and rows[column].notna().any():
                return float(rows[column].mean())
        return math.nan

    def mean_nmse(self, method: str, k: int | None, x: Any, mode: str | None = None) -> float:
        """:meth:`mean_metric` of ``test_nmse``."""
        return self.mean_metric(method, k, x, mode, "test_nmse")

    def best_competitor(
        self, subject: str, k: int | None, x: Any, mode: str, column: str = "test_nmse"
    ) -> tuple[str, float] | None:
        """The competitor of ``subject`` in the verdicts of ``mode`` (:meth:`compared_in`) with
        the lowest mean ``column`` (:meth:`mean_metric`: test NMSE, or test error rate) of its
        validation-selected setting at budget ``k`` and x value ``x``, with that mean; ``None``
        when no competitor has one."""
        means = {
            o: v
            for o in self.compared_in(mode)
            if o != subject and not math.isnan(v := self.mean_metric(o, k, x, mode, column))
        }
        if not means:
            return None
        best = min(means, key=means.__getitem__)  # the first of equals, in registry order
        return best, means[best]

    def gap(self, method: str, ref: str, k: int | None, x: Any) -> dict:
        """``method``'s test NMSE as a multiple of the batch reference ``ref``'s, both at their
        selected settings, paired by repetition (:func:`ilnrun.stats.paired_ratio`)."""
        a = pick(self.runs, method, self.keys(k if self.budgeted(method) else None, x), None)
        b = pick(self.runs, ref, self.keys(None, x), None)
        return paired_ratio(
            a.set_index("repetition")["test_nmse"], b.set_index("repetition")["test_nmse"]
        )

    def gap_error(self, method: str, ref: str, k: int | None, x: Any) -> dict:
        """``method``'s test error rate minus the batch reference ``ref``'s, both at their
        settings selected on their own validation loss, paired by repetition
        (:func:`ilnrun.stats.paired_error_difference`): the gap to the batch fit of a
        classification run, in the one unit every loss shares (docs/protocol.md §8.2)."""
        a = pick(self.runs, method, self.keys(k if self.budgeted(method) else None, x), None)
        b = pick(self.runs, ref, self.keys(None, x), None)
        return paired_error_difference(
            a.set_index("repetition")["test_error"], b.set_index("repetition")["test_error"]
        )

    @property
    def gap_metric(self) -> str:
        """What the gap to the batch fit compares: ``test_error`` in a classification run
        (:attr:`classifies`; learners and references with different losses have no common
        NMSE, a hinge or logistic learner none at all), else ``test_nmse``."""
        return "test_error" if self.classifies else "test_nmse"

    def gap_rows(self) -> list[tuple[str, str, int | None, list[dict]]]:
        """(batch reference, online learner, budget, paired comparisons per x value) for every
        learner that is not batch, when a batch reference ran: NMSE ratios (:meth:`gap`), or in
        a classification run differences of test error rates (:meth:`gap_error`)."""
        gap = self.gap_error if self.gap_metric == "test_error" else self.gap
        out = []
        for ref in self.batch:
            for m in self.methods:
                if m in self.batch:
                    continue
                for k in self.ks if self.budgeted(m) else [None]:
                    out.append((ref, m, k, [gap(m, ref, k, x) for x in self.xs]))
        return out

    def best_batch(self) -> str | None:
        """The batch reference with the lowest mean test error rate of its selected settings
        (averaged over the x values; the first of equals, in registry order): the one the
        headline of a classification run measures the gap to. ``None`` without one."""
        means = {}
        for ref in self.batch:
            vals = [
                float(s["test_error_mean"].iloc[0])
                for x in self.xs
                if len(s := self.summary_rows(ref, None, x)) and "test_error_mean" in s
            ]
            vals = [v for v in vals if math.isfinite(v)]
            if vals:
                means[ref] = sum(vals) / len(vals)
        return min(means, key=means.__getitem__) if means else None

    def yardstick(
        self, metric: str, x: Any, method: str | None = None, among: list[str] | None = None
    ) -> str:
        """A yardstick as ``mean ± ci`` at one x value: a data-only one (``test_loss_const``,
        ``test_loss_const_subset``) from the first learner that has it there (of ``among``,
        the learners of one loss, when given: a loss's yardstick is in that loss), or
        ``method``'s own (a batch reference's ``test_nmse``)."""
        for m in (among if among is not None else self.methods) if method is None else [method]:
            s = self.summary_rows(m, None, x)
            if len(s) and f"{metric}_mean" in s and s["n"].fillna(0).iloc[0] > 0:
                return fmt(s[f"{metric}_mean"].iloc[0], s[f"{metric}_ci95"].iloc[0])
        return "—"

    def per_T(self, g: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
        """Mean and 95% t-interval half-width over repetitions of ``metrics``, per T."""
        rows = []
        for T, h in g.groupby("T"):
            row = {"T": T}
            for metric in metrics:
                st = mean_ci(h[metric].to_numpy(float))
                row[f"{metric}_mean"], row[f"{metric}_ci95"] = st["mean"], st["ci95"]
            rows.append(row)
        return pd.DataFrame(rows)

    def regret_raw(self) -> list[tuple[str, str, pd.DataFrame]]:
        """The rows behind :meth:`regret_groups` (one per repetition and T), same groups."""
        out = []
        if "regret" not in self.runs:
            return out
        runs = self.runs[self.runs["regret"].notna()]
        for m in self.methods:
            r = runs[runs["method"] == m]
            if m in self.proposed:
                groups = list(r.groupby("setting", sort=False))
            else:
                groups = [("setting selected on validation loss per T", r[r["selected"]])]
            out += [(m, setting, g) for setting, g in groups if len(g)]
        return out

    def regret_groups(self) -> list[tuple[str, str, pd.DataFrame]]:
        """Per-T regret statistics (mean, 95% CI over repetitions): every grid setting of the
        proposed learner, and the validation-selected setting of the others."""
        metrics = ("regret", "regret_estimated", "best_loss_B")
        return [(m, setting, self.per_T(g, metrics)) for m, setting, g in self.regret_raw()]
