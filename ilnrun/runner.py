"""Running one cell, and running many in parallel (docs/architecture.md §3; docs/protocol.md).

- Seeds: one root seed per experiment. A dataset instance is drawn from
  ``SeedSequence(seed, spawn_key=H(dataset setting, repetition))`` — every learner and every
  hyperparameter setting of a repetition sees the same data — and each cell's learner from
  ``SeedSequence(seed, spawn_key=H(cell))`` (:func:`ilnrun.config.grid.seed_sequence`).
  Nothing depends on the number of workers, the backend or the order in which cells run.
- A cell: its learner's spec turns the setting into ``fit`` keywords, the learner makes its pass,
  the learned predictor is evaluated (:func:`evaluate`), the spec adds its diagnostics, and a row
  of ``runs.csv`` comes back with the learning curve.
- Execution: cells go through joblib (``loky`` processes, or dask through joblib's dask backend);
  each worker caches the last few dataset instances (and their kernel blocks), and cells sharing an
  instance are dispatched consecutively.
- Threads: BLAS and every other native thread pool run one thread inside a cell, whether the cell
  runs in-process (``--jobs 1``) or in a worker, so the numbers are bit-identical for any
  ``--jobs`` and backend. Loky workers exit when the parent process dies.
- Numbers never crash a run: an overflow, a division by zero or a math / linear-algebra domain
  error in a learner's pass, in the evaluation or in the diagnostics, and any non-finite
  validation or test loss, marks the cell ``diverged`` (``diverged_reason`` says where) with
  infinite losses; the run goes on.
- Every finished cell is appended to ``cells.jsonl`` by the parent the moment it arrives
  (:mod:`ilnrun.results`), so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from time import perf_counter

import numpy as np

from .budget import derive
from .config import Cell, digest, record_digest
from .config.grid import seed_sequence
from .data import Dataset, build_dataset
from .engines import engine_of
from .features import FeatureMap, build_feature_map
from .learners import LEARNERS, hyper_columns, size_columns
from .learners.base import FeatureExpansion, FitResult, KernelExpansion, LearnerSpec, new_counters
from .theory import best_in_ball_loss

__all__ = ["seed_sequence", "run_cell", "execute", "evaluate", "Progress"]


@dataclass
class Instance:
    """A dataset instance, its feature map and a cache (kernel blocks ``k(X_split, X_train)``,
    best-in-ball losses) shared by the cells that use the instance."""

    data: Dataset
    fmap: FeatureMap
    cache: dict = field(default_factory=dict)

    def kernel_to_train(self, split: str) -> np.ndarray:
        if split not in self.cache:
            X, _ = self.data.split(split)
            self.cache[split] = self.fmap.kernel(X, self.data.X_train)
        return self.cache[split]


_CACHE: OrderedDict[str, Instance] = OrderedDict()
_CACHE_SIZE = 2


def instance(cfg: dict, cell: Cell) -> Instance:
    """The dataset instance of ``cell`` (built once per worker, then cached)."""
    key = digest({"seed": cfg["seed"], "fmap": cfg["feature_map"], **cell.data_key})
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    inst = _CACHE[key] = make_instance(cfg, cell)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return inst


def make_instance(cfg: dict, cell: Cell) -> Instance:
    """Build the dataset instance of ``cell`` and its feature map (no cache)."""
    rng = np.random.default_rng(seed_sequence(cfg["seed"], cell.data_key))
    data = build_dataset(cell.data, rng, cfg["feature_map"])
    return Instance(data, build_feature_map(cfg["feature_map"], data.X_train))


def _half_sq(pred: np.ndarray, y: np.ndarray) -> float:
    return float(0.5 * np.mean((pred - y) ** 2))


def evaluate(res: FitResult, inst: Instance, evaluation: dict, rng: np.random.Generator) -> dict:
    """Validation and test losses of a learned predictor (docs/protocol.md).

    Kernel expansions (``f = sum_i alpha_i k(x_i, .)``) are evaluated exactly with the closed-form
    kernel when the map has one (``eval_mode = exact``), else with ``m_test`` Algorithm-2 samples;
    a learner that also returns an averaged predictor (Shrinking Gradient, Corollary 1) gets
    ``test_loss_avg`` and ``test_loss_estimated`` (Algorithm 2 with ``m_test`` samples, what a
    user without the kernel gets; on the first ``n_test_estimated`` test points).
    Feature expansions (``f = sum_j c_j psi(., w_j)``) are evaluated exactly on their own
    features.
    """
    out = {
        k: math.nan
        for k in (
            "val_loss",
            "test_loss",
            "test_loss_avg",
            "test_loss_estimated",
            "test_nmse",
            "test_nmse_estimated",
        )
    }
    out.update(test_evals=0, eval_mode="exact")
    d, fmap = inst.data, inst.fmap
    m_test = evaluation["m_test"]
    n_est = evaluation["n_test_estimated"]
    n_est = len(d.y_test) if n_est == "all" else min(n_est, len(d.y_test))
    if res.diverged:
        out.update(val_loss=math.inf, test_loss=math.inf, test_nmse=math.inf)
        return out
    p = res.predictor
    if isinstance(p, FeatureExpansion):
        val, test = p.predict(d.X_val), p.predict(d.X_test)
        out["test_evals"] = p.evals_per_point()
    else:
        assert isinstance(p, KernelExpansion)
        if fmap.has_kernel:
            val = p.predict_exact(inst.kernel_to_train("val"))
            test = p.predict_exact(inst.kernel_to_train("test"))
            if res.averaged is not None:
                out["test_loss_avg"] = _half_sq(
                    res.averaged.predict_exact(inst.kernel_to_train("test")), d.y_test
                )
            out["test_evals"] = p.exact_evals_per_point()
        else:
            out["eval_mode"] = "estimated"
            val = p.predict_estimated(d.X_train, d.X_val, fmap, m_test, rng)
            test = p.predict_estimated(d.X_train, d.X_test, fmap, m_test, rng)
            out["test_evals"] = 2 * m_test
        if res.averaged is not None:  # what Algorithm 2 at test time gives
            est = (
                test[:n_est]
                if out["eval_mode"] == "estimated"
                else p.predict_estimated(d.X_train, d.X_test[:n_est], fmap, m_test, rng)
            )
            out["test_loss_estimated"] = _half_sq(est, d.y_test[:n_est])
            var = float(np.var(d.y_test[:n_est]))
            out["test_nmse_estimated"] = 2 * out["test_loss_estimated"] / var if var else math.nan
    out["val_loss"] = _half_sq(val, d.y_val)
    out["test_loss"] = _half_sq(test, d.y_test)
    out["test_nmse"] = float(np.mean((test - d.y_test) ** 2) / np.var(d.y_test))
    return out


def reference_losses(data: Dataset, evaluation: dict | None = None) -> dict:
    """The yardsticks of every cell (docs/protocol.md §8), from the data alone:

    - ``test_loss_zero``: the zero predictor, ``½ mean y_test²`` (where every learner starts);
    - ``test_loss_const``: the best constant predictor a learner could know, the training-label
      mean ``ȳ_train`` predicted everywhere, ``½ mean (ȳ_train − y_test)²``;
    - ``test_nmse_const``: its NMSE, ``mean (ȳ_train − y_test)² / var(y_test)`` (just above 1:
      1 is the test-label mean, which no learner can know);
    - ``test_loss_const_subset``: the same constant on the first ``n_test_estimated`` test points,
      the points of ``test_loss_estimated`` (so the two pair exactly).
    """
    y, ybar = data.y_test, float(np.mean(data.y_train))
    const = np.full_like(y, ybar)
    var = float(np.var(y))
    out = {
        "test_loss_zero": _half_sq(np.zeros_like(y), y),
        "test_loss_const": _half_sq(const, y),
        "test_nmse_const": float(np.mean((const - y) ** 2) / var) if var > 0 else math.nan,
    }
    if evaluation is not None:
        n_est = evaluation["n_test_estimated"]
        n_est = len(y) if n_est == "all" else min(n_est, len(y))
        out["test_loss_const_subset"] = _half_sq(const[:n_est], y[:n_est])
    return out


# A test loss more than this many times the zero predictor's marks the cell diverged
# (docs/protocol.md §4): a learner that starts at f = 0 and ends a hundred times worse than
# where it started has not learned, whatever its pass reported.
DIVERGED_FACTOR = 100.0


def blown_up(test_loss: float, test_loss_zero: float) -> bool:
    """The divergence rule on test losses: ``test_loss > DIVERGED_FACTOR · test_loss_zero``
    (never true when the zero predictor's loss is 0 or not finite)."""
    return (
        math.isfinite(test_loss_zero)
        and test_loss_zero > 0
        and test_loss > DIVERGED_FACTOR * test_loss_zero
    )


def curve_points(T: int, n: int) -> np.ndarray:
    """Rounds (1-based) at which a learning curve is kept: ``n`` evenly spaced, always ``T``."""
    return np.unique(np.linspace(1, T, min(n, T)).round().astype(int))


def regret(spec: LearnerSpec, cfg: dict, res: FitResult, inst: Instance) -> dict[str, float]:
    """With ``evaluation.regret_B`` set: the regret against the best ``f`` in the RKHS ball of
    that radius (Theorem 1), for learners whose spec can evaluate their online predictions
    exactly (``exact_online_loss``); ``regret_estimated`` uses the pass's own predictions."""
    radius = cfg["evaluation"]["regret_B"]
    if radius is None:
        return {}
    out = {"best_loss_B": math.nan, "regret": math.nan, "regret_estimated": math.nan}
    if spec.exact_online_loss is None or res.diverged or res.timed_out:
        return out
    y = inst.data.y_train
    K = inst.kernel_to_train("train")
    key = ("best_in_ball", radius)
    if key not in inst.cache:
        inst.cache[key] = best_in_ball_loss(K, y, radius)
    best = inst.cache[key]
    exact = spec.exact_online_loss(res, K, y)
    out.update(
        best_loss_B=best, regret=exact - best, regret_estimated=float(np.sum(res.losses)) - best
    )
    return out


def diagnostics(
    spec: LearnerSpec, cfg: dict, res: FitResult, inst: Instance, args: dict, T: int
) -> dict:
    """The learner's own diagnostics (its spec's hook) and the regret (:func:`regret`)."""
    out = spec.diagnostics(res, args, T) if spec.diagnostics is not None else {}
    return {**out, **regret(spec, cfg, res, inst)}


def run_cell(cfg: dict, cell: Cell) -> dict:
    """Run one cell: build (or reuse) its data, fit its learner, evaluate; return a record."""
    inst = instance(cfg, cell)
    spec, T, budget, args = plan_cell(cfg, cell, inst)
    fit_ss, eval_ss = seed_sequence(cfg["seed"], cell.key).spawn(2)
    limit = cfg["limits"]["cell_timeout_s"]
    t0 = perf_counter()
    deadline = {} if limit is None else {"deadline": t0 + limit}
    res, reason = _guarded(
        "fit",
        spec.fit,
        inst.data.X_train,
        inst.data.y_train,
        inst.fmap,
        np.random.default_rng(fit_ss),
        **args,
        **deadline,
    )
    wall = perf_counter() - t0
    return finish_cell(cfg, cell, inst, (spec, T, budget, args), res, reason, wall, eval_ss)


def plan_cell(cfg: dict, cell: Cell, inst: Instance) -> tuple:
    """``(spec, T, budget, args)``: the cell's learner, rounds, matched budget (or ``None``) and
    ``fit`` keywords."""
    spec = LEARNERS[cell.method]
    T = len(inst.data.y_train)
    budget = derive(cfg["budget"]["match"], cell.dsgd_k, T) if cell.dsgd_k else None
    size = budget.size(spec.budget.name) if budget is not None else None
    return spec, T, budget, spec.fit_arguments(cell.hyper, size, T)


def finish_cell(
    cfg: dict,
    cell: Cell,
    inst: Instance,
    plan: tuple,
    res: FitResult | None,
    reason: str | None,
    wall: float,
    eval_ss: np.random.SeedSequence,
) -> dict:
    """Evaluate a finished pass (``res``; ``None`` with ``reason`` when it raised) and build the
    cell's record: its row of ``runs.csv``, its learning curve and its digest. Shared by every
    engine (the evaluation is numpy's, on the returned predictors)."""
    spec, T, budget, args = plan
    t0 = perf_counter()
    res = res or FitResult(None, np.zeros(0), new_counters(), diverged=True)
    ev = None
    if reason is None:
        eval_rng = np.random.default_rng(eval_ss)
        ev, reason = _guarded("evaluation", evaluate, res, inst, cfg["evaluation"], eval_rng)
    ev = ev or evaluate(replace(res, diverged=True), inst, cfg["evaluation"], None)
    eval_s = perf_counter() - t0

    row: dict = {"experiment": cfg["name"], "cell_id": cell.id, "method": cell.method}
    row.update({k: v for k, v in cell.data.items() if k != "kind"})
    row.update({f"fmap_{k}": v for k, v in inst.fmap.describe().items() if k != "kind"})
    row.update(
        repetition=cell.rep,
        seed=cfg["seed"],
        engine=engine_of(cfg),
        setting=",".join(f"{k}={v}" for k, v in cell.hyper.items() if v is not None),
    )
    row.update({k: args.get(k, cell.hyper.get(k)) for k in hyper_columns()})
    row.update(
        dsgd_k=cell.dsgd_k,
        budget_match=cfg["budget"]["match"] if budget else None,
        budget_target=budget.target if budget else None,
    )
    row.update({k: args.get(k) for k in size_columns()})
    row.update(res.counters)
    row.update(online_loss=float(np.mean(res.losses)) if not res.diverged else math.inf)
    row.update(ev)
    row.update(reference_losses(inst.data, cfg["evaluation"]))
    if res.predictor is not None:  # None: the pass raised
        diag, why = _guarded("diagnostics", diagnostics, spec, cfg, res, inst, args, T)
        row.update(diag or {})
        reason = reason or why
    row.update(
        diverged=bool(res.diverged),
        timed_out=bool(res.timed_out),
        rounds=len(res.losses),
        wall_s=wall,
        eval_s=eval_s,
    )

    t = curve_points(T, cfg["evaluation"]["curve_points"])
    t = t[t <= len(res.losses)]
    running = np.cumsum(res.losses)[t - 1] / t
    curve = {"t": t.tolist(), "online_loss": running.tolist()}
    if spec.curve is not None and res.predictor is not None:
        curve.update(spec.curve(res, t))
    _mark_diverged(row, res, reason)
    return {"id": cell.id, "row": row, "curve": curve, "digest": record_digest(cfg, cell)}


NUMERIC_ERRORS = (
    OverflowError,
    FloatingPointError,
    ZeroDivisionError,
    ValueError,
    np.linalg.LinAlgError,
)


def _guarded(stage: str, fn, *args, **kwargs) -> tuple:
    """``(fn(*args, **kwargs), None)``, or ``(None, reason)`` when it raises a numeric error."""
    try:
        return fn(*args, **kwargs), None
    except NUMERIC_ERRORS as exc:
        what = {"OverflowError": "overflow", "ZeroDivisionError": "division by zero"}.get(
            type(exc).__name__, type(exc).__name__
        )
        return None, f"{what} in {stage}: {str(exc)[:80]}"


def _mark_diverged(row: dict, res: FitResult, reason: str | None) -> None:
    """Set ``diverged`` and ``diverged_reason``: a numeric error (``reason``), the learner's own
    divergence stop, a non-finite validation / test loss, or a test loss above
    ``DIVERGED_FACTOR`` times the zero predictor's (:func:`blown_up`); a diverged cell's losses
    are infinite."""
    if reason is None and res.diverged:
        reason = "diverged in fit"
    for key in ("val_loss", "test_loss"):
        if reason is None and not math.isfinite(row[key]):
            reason = f"{'nan' if math.isnan(row[key]) else 'infinite'} {key} in evaluation"
    if reason is None and blown_up(row["test_loss"], row.get("test_loss_zero", math.nan)):
        reason = (
            f"test loss {row['test_loss']:.3g} > {DIVERGED_FACTOR:g} × the zero predictor's "
            f"{row['test_loss_zero']:.3g}"
        )
    row["diverged_reason"] = reason
    if reason is not None:
        row.update(
            diverged=True,
            val_loss=math.inf,
            test_loss=math.inf,
            test_nmse=math.inf,
            online_loss=math.inf,
        )


# ----------------------------------------------------------------------------------------------
# execution


class Progress:
    """Cells done / total, elapsed and ETA on stderr: a live bar on a terminal, a plain line every
    ~5% otherwise, nothing when quiet."""

    def __init__(self, total: int, done: int = 0, quiet: bool = False) -> None:
        self.total, self.done, self.quiet = total, done, quiet
        self.start_done = done
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.next_pct = 0

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.quiet or self.total == 0:
            return
        pct = 100 * self.done // self.total
        if not self.tty and pct < self.next_pct and self.done < self.total:
            return
        self.next_pct = pct + 5
        elapsed = time.monotonic() - self.t0
        rate = (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        msg = (
            f"{self.done}/{self.total} cells ({pct}%) elapsed {elapsed:.0f}s eta {eta:.0f}s"
            if math.isfinite(eta)
            else f"{self.done}/{self.total} cells"
        )
        if self.tty:
            bar = "#" * (30 * self.done // self.total)
            sys.stderr.write(f"\r[{bar:<30}] {msg}   ")
            if self.done >= self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()


_WATCHED_PID: int | None = None


def _watch_parent(parent: int | None = None) -> None:
    """In a worker process: exit as soon as the parent process ``parent`` (the run's process,
    passed from it) is gone — a daemon thread polls ``os.getppid()``, which changes when the
    parent dies; a worker that starts after its parent died exits at once. Started once per
    process."""
    global _WATCHED_PID
    if os.getpid() == _WATCHED_PID:
        return
    _WATCHED_PID = os.getpid()
    parent = os.getppid() if parent is None else parent
    if os.getppid() != parent:  # orphaned while starting up
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="ilnrun-parent-watchdog", daemon=True).start()


_CONTROLLER: tuple[tuple[int, int], object] | None = None


def one_thread():
    """A context in which every native thread pool (BLAS, OpenMP) runs one thread.

    Listing the loaded native libraries costs ~10 ms, so the list is kept and made again only
    when the process has imported new modules since (which is when new libraries can appear):
    entering the context then costs ~0.1 ms per cell."""
    global _CONTROLLER
    state = (os.getpid(), len(sys.modules))
    if _CONTROLLER is None or _CONTROLLER[0] != state:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
        _CONTROLLER = ((os.getpid(), len(sys.modules)), controller)
    return _CONTROLLER[1].limit(limits=1)


def worker_cell(cfg: dict, cell: Cell, watch_parent: int | None = None) -> dict:
    """:func:`run_cell` in a worker: native thread pools pinned to one thread (as in-process);
    with ``watch_parent`` (the parent's pid) the worker exits when its parent dies."""
    if watch_parent is not None:
        _watch_parent(watch_parent)
    with one_thread():
        return run_cell(cfg, cell)


def execute(cfg: dict, pending: list[Cell], jobs: int, backend: str, on_record) -> None:
    """Run ``pending`` cells with joblib and hand each record to ``on_record`` as it finishes.
    Every cell runs with native thread pools pinned to one thread (bit-identical numbers for
    any ``jobs`` and backend)."""
    from joblib import Parallel, delayed, parallel_config

    if not pending:
        return
    if engine_of(cfg) == "jax":  # lockstep batches in this process (ilnrun.engines)
        from .engines.jax_runner import execute_jax

        return execute_jax(cfg, pending, on_record)
    if jobs == 1 and backend == "loky":
        with one_thread():
            for c in pending:
                on_record(run_cell(cfg, c))
        return
    watch = backend == "loky"
    parent = os.getpid() if watch else None
    tasks = (delayed(worker_cell)(cfg, c, parent) for c in pending)
    # loky: one thread per worker, and the parent watchdog from the worker's start (before it
    # runs a cell), as well as at its first cell
    limits = (
        {"inner_max_num_threads": 1, "initializer": _watch_parent, "initargs": (parent,)}
        if watch
        else {}
    )
    from .tempdirs import joblib_temp_folder

    with (
        joblib_temp_folder() as tmp,
        parallel_config(backend=backend, n_jobs=jobs, temp_folder=tmp, **limits),
    ):
        for rec in Parallel(return_as="generator_unordered")(tasks):
            on_record(rec)
