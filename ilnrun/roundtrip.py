"""One cell, from the command line to Python and back: :func:`load` (docs/estimators.md §5).

    >>> import ilnrun
    >>> res = ilnrun.load("results/figure1")          # what `ilnrun run` wrote
    >>> res.runs, res.summary, res.curves             # the tables, as run_experiment returns them
    >>> c = res.cell(res.runs.cell_id[0])              # one cell, by its id in runs.csv
    >>> c.setting, c.size, c.X_train, c.y_test         # its setting, budget size, splits
    >>> est = c.estimator().fit(c.X_train, c.y_train)  # the cell's own learner and seed
    >>> est.online_losses_.mean() == c.row.online_loss
    True

**Reading.** The results directory is read by the readers ``ilnrun report`` and ``ilnrun
plot`` use (:class:`ilnrun.report.data.ReportData` for ``config.yaml``, ``meta.json``,
``runs.csv``, ``summary.csv``; the figures' reader for ``curves.csv``) and the cell log by
:class:`ilnrun.results.CellLog`; a directory that is not ilnrun's, or whose files cannot be read
as ilnrun's, is refused with :class:`LoadError` naming the directory and the reason.

**Identity.** The stored resolved config is validated again by this version: a data file whose
content changed (its SHA-256 under ``inputs`` differs) or that is gone, a config that no longer
validates, or cell ids that this version no longer derives are refused. A cell's record in
``cells.jsonl`` must carry the digest this version computes for it (key, seed, feature map,
budget convention, evaluation, engine, data by content, :func:`ilnrun.config.record_digest`), and
the splits rebuilt from the config and the cell's data seed ``SeedSequence(seed,
spawn_key=H(dataset setting, repetition))`` must give the row's data-only yardsticks
(``test_loss_zero``, ``test_loss_const``, ``test_nmse_const``) bit for bit; otherwise
:class:`LoadError` says what differs (each yardstick: recorded, rebuilt, relative difference)
and why it may (the numeric environment ``meta.json`` records against this one, the BLAS
threads, the dataset code). Every file read must lie in the directory (a symbolic link out of it
is refused).

**Threads.** The splits are rebuilt, the estimator fits and predicts, and :meth:`reproduce`
evaluates with every native thread pool pinned to one thread
(:func:`ilnrun.numeric_env.one_thread`), as ``ilnrun run`` computes a cell: a session allowing
more BLAS threads would sum large products in another order.

**Reproduction.** :meth:`LoadedCell.estimator` is
:func:`ilnrun.estimators.make_estimator` with the cell's learner, resolved setting, the
experiment's feature-map section, the cell's budget size and the cell's seed sequence
``SeedSequence(seed, spawn_key=H(cell key))`` (the pass draws from its child 0, Algorithm-2
predictions from its child 1, as the cell does), with ``center_y=False, scale_y=False`` (the
splits are already scaled) and the experiment's ``m_test`` (and ``estimate_draws``); for a
cell of a loss on ±1 labels
(``loss: hinge``, ...) the learner's classifier, whose classes ``-1, +1`` are the labels as they
are (``decision_function`` gives the cell's predictions). Its ``fit(X_train, y_train)`` is the
cell's pass: ``mean(online_losses_)`` is the row's ``online_loss`` bit for bit, and with
:meth:`LoadedCell.reproduce` every number of the row (validation and test losses, Algorithm-2
loss, yardsticks, counters, diagnostics, regret) is recomputed by the cell's own evaluation from
the fitted estimator and equals the row bit for bit. A loss computed from ``est.predict(X_test)``
equals the row's bit for bit too while ``len(X_test) * T`` is at most
:data:`ilnrun.estimators.KERNEL_BLOCK` (4 194 304) and ``T`` at most 20 000; beyond, it equals
it to rounding (relative 1e-12) only: ``est.predict`` evaluates the kernel expansion
``sum_i alpha_i k(x_i, x)`` in row blocks of at most ``KERNEL_BLOCK`` kernel entries, while the
cell forms the whole block ``k(X_test, X_train)`` at once (and past ``T`` = 20 000 uses the
map's primal form), so the matrix-vector products sum in another order.
Not reproducible: a cell that timed out (the estimator has no deadline) and a cell of the jax
engine whose learner has a jax pass (its numbers are the jax pass's; the estimator runs numpy).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import config as C
from . import numeric_env
from .cell import Instance, finish, loss_of, m_test, make_instance, plan, reference_losses
from .config.grid import seed_sequence
from .learners import LEARNERS
from .results import CellLog, ManifestError, read_manifest
from .safe_yaml import bounded_repr

__all__ = ["LoadError", "LoadedCell", "LoadedResults", "load"]

# columns of a row that are measurements of the machine, not numbers of the cell
TIMING_COLUMNS = ("wall_s", "eval_s")
# columns runs.csv adds to a cell's row (the selection)
TABLE_COLUMNS = ("selected",)
# the data-only yardsticks that fingerprint a cell's splits
DATA_FINGERPRINT = ("test_loss_zero", "test_loss_const", "test_nmse_const")
# the files load() reads: none may be a symbolic link out of the results directory
READ_FILES = ("config.yaml", "meta.json", "runs.csv", "summary.csv", "curves.csv", "cells.jsonl")
# characters of a cell id a message shows
ID_SHOWN = 80


class LoadError(ValueError):
    """A results directory (or a cell of it) that cannot be loaded or reproduced; the message
    names the directory and says why."""


def load(results_dir: str | Path) -> LoadedResults:
    """The results of ``ilnrun run`` (or :func:`ilnrun.run_experiment` with ``out``) in
    ``results_dir``: the tables ``runs``, ``summary``, ``curves``, the resolved ``config`` and
    :meth:`LoadedResults.cell`. Raises :class:`LoadError` (module docstring)."""
    if not isinstance(results_dir, (str, os.PathLike)) or not str(results_dir).strip():
        raise LoadError(  # '' would be the current directory, as `--out ''` would
            f"a results directory is a path (not empty or blank), not {_shown_id(results_dir)}"
        )
    d = Path(results_dir)
    try:
        is_dir = d.is_dir()
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        why = getattr(exc, "strerror", None) or _reason(exc)
        raise LoadError(f"{_shown_id(str(d))} cannot be read: {why}") from None
    if not is_dir:
        raise LoadError(f"{d} is not a directory; give the --out directory of `ilnrun run`")
    try:
        owned = read_manifest(d)
    except ManifestError as exc:
        raise LoadError(f"{d}: {exc}; it cannot be identified as ilnrun's results") from None
    _refuse_links_out(d)
    need = ("config.yaml", "runs.csv", "summary.csv", "cells.jsonl")
    missing = [n for n in need if not (d / n).is_file() or (owned is not None and n not in owned)]
    if missing:
        raise LoadError(
            f"{d} holds no complete ilnrun results (missing: {', '.join(missing)}); "
            "run `ilnrun run --out` there first"
        )
    try:
        from .plots import _Data
        from .report.data import ReportData

        rd = ReportData(d, d)  # reads only
        curves = _Data.load(d).curves
    except Exception as exc:  # every reader's refusal, whatever its type
        raise LoadError(f"{d} cannot be read as ilnrun results: {_reason(exc)}") from None
    if "cell_id" not in rd.runs.columns:
        raise LoadError(f"{d}/runs.csv has no cell_id column: it is not a runs.csv ilnrun wrote")
    exp = _resolve_again(d, rd.cfg)
    return LoadedResults(d, exp, rd.meta, rd.runs, rd.summary, curves)


def _refuse_links_out(d: Path) -> None:
    """Refuse a file of :data:`READ_FILES` that is a symbolic link whose target lies outside
    ``d``: load() reads what the results directory holds, never a file elsewhere."""
    from .readers import linked_outside

    try:
        d.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise LoadError(f"{d} cannot be resolved: {_reason(exc)}") from None
    for name in READ_FILES:
        target = linked_outside(d / name)
        if target is not None:
            raise LoadError(
                f"{d / name} is a symbolic link to {target!r}, outside the results directory "
                f"{d}; load() reads only files inside it (copy the file there instead)"
            )


def _shown_id(cell_id: object) -> str:
    """A cell id as a message shows it: its repr, the first :data:`ID_SHOWN` characters of a
    longer one with its length."""
    text = repr(cell_id)
    if len(text) <= ID_SHOWN:
        return text
    return f"{text[:ID_SHOWN]}… ({len(cell_id) if isinstance(cell_id, str) else len(text)} chars)"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _resolve_again(d: Path, stored: dict) -> C.Experiment:
    """The stored resolved config validated by this version; its data files must still hold
    the content they held (``inputs``)."""
    try:
        exp = C.resolve(stored, default_name=str(stored.get("name", "experiment")))
    except C.ConfigError as exc:
        raise LoadError(
            f"{d}/config.yaml no longer validates, so its cells cannot be rebuilt:\n{exc}"
        ) from None
    except Exception as exc:
        raise LoadError(f"{d}/config.yaml cannot be resolved: {_reason(exc)}") from None
    old, new = stored.get("inputs") or {}, exp.as_dict().get("inputs") or {}
    for path, info in old.items():
        now = new.get(path)
        sha = info.get("sha256") if isinstance(info, dict) else None
        if now is None or now.get("sha256") != sha:
            raise LoadError(
                f"the data changed since the run in {d}: {path} "
                f"{'is gone' if now is None else 'holds other content'} "
                f"(recorded SHA-256 {str(sha)[:16]}…, now "
                f"{'—' if now is None else str(now.get('sha256'))[:16] + '…'}); "
                "the cells' splits cannot be rebuilt as the learners saw them"
            )
    return exp


@dataclass
class LoadedResults:
    """A results directory read back: ``runs``, ``summary``, ``curves`` (the tables
    :func:`ilnrun.run_experiment` returns; a parameterless learner's empty ``setting`` reads as
    ``''``, not NaN), ``config`` (the resolved :class:`~ilnrun.config.Experiment`; ``as_dict()``
    is ``config.yaml``), ``meta`` (``meta.json``) and :meth:`cell`."""

    out_dir: Path
    config: C.Experiment
    meta: dict
    runs: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    _cells: dict = field(default_factory=dict, repr=False)

    def cell(self, cell_id: str) -> LoadedCell:
        """The cell of ``runs.csv`` whose ``cell_id`` is ``cell_id`` (:class:`LoadedCell`).

        Its splits are rebuilt with every native thread pool pinned to one thread, as ``ilnrun
        run`` builds them (:func:`ilnrun.numeric_env.one_thread`)."""
        if not isinstance(cell_id, str):
            raise LoadError(
                f"a cell id is a string (the cell_id column of {self.out_dir}/runs.csv), not "
                f"{type(cell_id).__name__}: {_shown_id(cell_id)}"
            )
        if not self._cells:
            self._cells = {c.id: c for c in C.cells(self.config)}
        rows = self.runs[self.runs["cell_id"] == cell_id]
        if rows.empty:
            raise LoadError(
                f"no cell {_shown_id(cell_id)} in {self.out_dir}/runs.csv (cell ids are its "
                "cell_id column)"
            )
        cell = self._cells.get(cell_id)
        if cell is None:
            raise LoadError(
                f"cell {_shown_id(cell_id)} of {self.out_dir} is not a cell of its config as this "
                "version derives it (the results come from another version or were edited)"
            )
        log = CellLog(self.out_dir)
        try:
            mine = log.read(digests={cell_id: C.record_digest(self.config, cell)})
        except OSError as exc:
            raise LoadError(f"{log.path} cannot be read: {_reason(exc)}") from None
        if cell_id in log.altered_ids:
            raise LoadError(
                f"the record of cell {cell_id!r} in {log.path} was skipped: its values changed "
                "since it was written (its values_sha256 is missing or does not match); "
                "resuming the run with `ilnrun run` computes the cell again"
            )
        if cell_id not in mine:
            raise LoadError(
                f"{log.path} holds no record of cell {cell_id!r} with the digest this config "
                "gives it (other seed, feature map, data, evaluation or engine): its numbers "
                "cannot be reproduced from this config"
            )
        row = rows.iloc[0]
        with numeric_env.one_thread():  # as the command line builds a cell's data
            inst = make_instance(self.config.seed, self.config.feature_map, cell)
            _check_fingerprint(
                self.out_dir, cell_id, inst, row, self.config, self.meta, len(self.runs), cell
            )
        return LoadedCell(self.config, cell, row, inst)


def _check_fingerprint(
    d: Path,
    cell_id: str,
    inst: Instance,
    row: pd.Series,
    exp: C.Experiment,
    meta: dict,
    n_cells: int,
    cell: C.Cell,
) -> None:
    """The rebuilt splits give the row's data-only yardsticks (those of the cell's loss,
    :func:`ilnrun.cell.loss_of`) bit for bit; otherwise
    :class:`LoadError` names every yardstick that differs (recorded, rebuilt, relative
    difference) and the likely causes (:func:`_fingerprint_causes`)."""
    n_est = exp.evaluation.n_estimated(len(inst.data.y_test))
    ref = reference_losses(inst.data, n_est, loss_of(cell))
    diffs = [
        f"{key}: recorded {_number(row[key])}, rebuilt {_number(ref[key])} (relative "
        f"difference {_relative(row[key], ref[key])})"
        for key in DATA_FINGERPRINT
        if key in row.index and not _same(ref[key], row[key])
    ]
    if diffs:
        raise LoadError(
            f"the data rebuilt for cell {cell_id!r} differ from the data of the run in {d}: "
            + "; ".join(diffs)
            + ". "
            + _fingerprint_causes(meta, n_cells)
        )


def _number(v: Any) -> str:
    """A value as a message shows it: a number by its shortest round-trip repr."""
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        return bounded_repr(v, 60)


def _relative(a: Any, b: Any) -> str:
    """``|a - b| / max(|a|, |b|)`` of two numbers, as text (``—`` when not numbers)."""
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return "—"
    scale = max(abs(x), abs(y))
    if not (math.isfinite(x) and math.isfinite(y)) or scale == 0.0:
        return "—"
    return f"{abs(x - y) / scale:.2g}"


def _fingerprint_causes(meta: dict, cells: int) -> str:
    """Why rebuilt data can differ from a run's: the numeric environments ``meta.json``
    records for the directory's ``cells`` finished cells (:mod:`ilnrun.numeric_env`) against
    this one, the BLAS threads now; then a changed dataset code or source."""
    meta = meta if isinstance(meta, dict) else {}
    recorded = [
        e.get("environment")
        for e, _ in numeric_env.computed_under(meta.get("numeric_environments"), cells)
    ] or [meta.get("numeric_environment")]
    threads = numeric_env.blas_threads()
    pinned = (
        f"BLAS ran {threads} thread(s) while rebuilding (the command line pins 1 per cell)"
        if threads is not None
        else "threadpoolctl lists no BLAS library, so its threads are unknown"
    )
    now = numeric_env.collect()
    changed = [numeric_env.changes(env, now) for env in recorded if isinstance(env, dict)]
    changed = [c for c in changed if c]
    if changed:
        env = (
            "the numeric environment differs from the one meta.json records ("
            + "; ".join(changed[0])
            + "): another CPU, BLAS kernel or library version sums in another order"
        )
    elif not all(isinstance(env, dict) for env in recorded):
        env = (
            "meta.json records no numeric environment for (some of) its cells (written by an "
            "earlier ilnrun), so another CPU, BLAS kernel or library version cannot be ruled out"
        )
    else:
        env = "meta.json records this numeric environment (CPU, BLAS kernel, library versions)"
    return (
        f"Possible causes: {env}; {pinned}; or the dataset code or its source changed since the run"
    )


def _same(a: Any, b: Any) -> bool:
    """Equal as the row stores them (NaN equals NaN, ``<NA>`` equals ``None``/NaN)."""
    if a is None or (not isinstance(a, str) and pd.isna(a)):
        return b is None or (not isinstance(b, str) and bool(pd.isna(b)))
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        return bool(a) == bool(b)
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float, np.number)):
        a, b = float(a), float(b)
        return a == b or (math.isnan(a) and math.isnan(b))
    return str(a) == str(b)


@dataclass
class LoadedCell:
    """One cell of a results directory: ``row`` (its row of ``runs.csv``), ``method``,
    ``setting`` (its resolved hyperparameters; ``None`` for one the setting does not use),
    ``data_setting`` (its dataset setting), ``repetition``, ``size`` (the budget size its
    learner was given, ``None`` for a setting that takes none), the splits ``X_train``,
    ``y_train``, ``X_val``, ``y_val``, ``X_test``, ``y_test`` as the learner saw them (rebuilt
    and checked, module docstring), ``feature_map`` (the cell's map, built on ``X_train``),
    :meth:`estimator` and :meth:`reproduce`."""

    config: C.Experiment
    key: C.Cell
    row: pd.Series
    instance: Instance

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def method(self) -> str:
        return self.key.method

    @property
    def setting(self) -> dict:
        return dict(self.key.hyper)

    @property
    def data_setting(self) -> dict:
        return dict(self.key.data)

    @property
    def repetition(self) -> int:
        return self.key.rep

    @property
    def size(self) -> int | None:
        p = plan(self.config.budget, self.key, self.instance)
        if p.spec.budget is None or not p.spec.takes_budget(self.key.hyper):
            return None
        return p.size() if self.key.per_round is not None else None

    @property
    def seed(self) -> np.random.SeedSequence:
        """The cell's seed sequence ``SeedSequence(seed, spawn_key=H(cell key))``."""
        return seed_sequence(self.config.seed, self.key.seed_key)

    @property
    def feature_map(self):
        return self.instance.fmap

    def __getattr__(self, name: str) -> np.ndarray:
        if name[:2] in ("X_", "y_") and name[2:] in ("train", "val", "test"):
            return getattr(self.instance.data, name)
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    def splits(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{"train": (X, y), "val": (X, y), "test": (X, y)}``."""
        return {s: self.instance.data.split(s) for s in ("train", "val", "test")}

    def estimator(self, **params: Any):
        """The cell's estimator, unfitted (module docstring); ``params`` override estimator
        parameters (``predict_mode="estimated"``, ``random_state``, ...). Its ``fit``,
        ``partial_fit`` and ``predict`` (hence ``score``) run with every native thread pool
        pinned to one thread, as ``ilnrun run`` runs a cell
        (:func:`ilnrun.numeric_env.one_thread`; a ``clone`` keeps it)."""
        from .estimators import estimator_kind, make_estimator

        exp = self.config
        # a cell of a loss on ±1 labels is a classifier's (its labels are the classes -1, +1,
        # seen as they are); another a regressor's, its labels already centred and scaled
        kind = estimator_kind(self.key.hyper)
        kw: dict[str, Any] = {"center_y": False, "scale_y": False} if kind == "regressor" else {}
        kw["m_test"] = m_test(exp.evaluation, plan(exp.budget, self.key, self.instance))
        kw["estimate_draws"] = exp.evaluation.estimate_draws  # Algorithm 2's random stream
        kw["random_state"] = self.seed
        kw.update(params)
        return make_estimator(
            self.method,
            self.key.hyper,
            exp.feature_map.as_dict(),
            size=self.size,
            one_thread=True,  # fit and predict pin native threads as the command line does
            kind=kind,
            **kw,
        )

    def reproduce(self, est: Any = None) -> pd.Series:
        """The cell's row recomputed from a fitted estimator (by default ``estimator()`` fitted
        on ``X_train, y_train``) by the cell's own evaluation (:func:`ilnrun.cell.finish`): the
        same index as :attr:`row`; every number but ``wall_s`` / ``eval_s`` equals the row's bit
        for bit. Refuses a timed-out cell and a cell run by a jax pass."""
        if bool(self.row.get("timed_out", False)):
            raise LoadError(
                f"cell {self.id!r} timed out (limits.cell_timeout_s); the estimator has no "
                "deadline, so its pass cannot be reproduced"
            )
        if self.config.engine == "jax" and "jax" in LEARNERS[self.method].engines:
            raise LoadError(
                f"cell {self.id!r} ran {self.method}'s jax pass (engine jax); the estimator runs "
                "the numpy pass, whose numbers equal the jax pass's in distribution only "
                "(rerun the config with --engine numpy to reproduce cells bit for bit)"
            )
        if est is None:
            est = self.estimator().fit(self.X_train, self.y_train)
        res = getattr(est, "fit_result_", None)
        if res is None:
            raise LoadError("reproduce() takes an estimator fitted with fit(X_train, y_train)")
        p = plan(self.config.budget, self.key, self.instance)
        with numeric_env.one_thread():  # the cell's evaluation, as the command line runs it
            row = finish(self.config, p, self.instance, res, None, 0.0)["row"]
        return pd.Series({k: row.get(k, self.row[k]) for k in self.row.index})

    def differences(self, est: Any = None) -> dict[str, tuple[Any, Any]]:
        """``{column: (row's value, reproduced value)}`` for every column of the row that
        :meth:`reproduce` does not give back exactly (timings and the selection excluded):
        empty when the cell is reproduced bit for bit."""
        again = self.reproduce(est)
        skip = set(TIMING_COLUMNS) | set(TABLE_COLUMNS)
        return {
            k: (self.row[k], again[k])
            for k in self.row.index
            if k not in skip and not _same(self.row[k], again[k])
        }
