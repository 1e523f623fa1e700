"""Cells, seeds and parallel execution (DESIGN §4, §6).

- Seeds: one root seed per experiment. A dataset instance is drawn from
  ``SeedSequence(seed, spawn_key=H(dataset setting, repetition))`` — every learner and every
  hyperparameter setting of a repetition sees the same data — and each cell's learner from
  ``SeedSequence(seed, spawn_key=H(cell))``, where ``H`` is a SHA-256 of the cell's canonical JSON.
  Nothing depends on the number of workers, the backend or the order in which cells run.
- Execution: cells go through joblib (``loky`` processes, or dask through joblib's dask backend);
  each worker caches the last few dataset instances (and their kernel blocks), and cells sharing an
  instance are dispatched consecutively.
- Every finished cell is appended to ``cells.jsonl`` by the parent the moment it arrives
  (:mod:`ilnrun.results`), so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import math
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from .budget import derive
from .config import Cell, digest
from .data import Dataset, build_dataset
from .features import FeatureMap, build_feature_map
from .learners import LEARNERS
from .learners.base import FeatureExpansion, FitResult, KernelExpansion
from .learners.shrinking_gradient import theory_preset
from .schedules import step_sizes
from .theory import best_in_ball_loss, lemma5_ratio, sg_exact_online_predictions

HYPER_COLUMNS = ("eta", "schedule", "decay", "B", "sampler", "nu", "lam", "preset", "c")


def seed_sequence(root: int, key: dict) -> np.random.SeedSequence:
    """``SeedSequence(root, spawn_key=H(key))`` with ``H`` the first 128 bits of SHA-256."""
    h = digest(key)
    return np.random.SeedSequence(
        root, spawn_key=tuple(int(h[i : i + 8], 16) for i in range(0, 32, 8))
    )


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
    rng = np.random.default_rng(seed_sequence(cfg["seed"], cell.data_key))
    data = build_dataset(cell.data, rng, cfg["feature_map"])
    inst = Instance(data, build_feature_map(cfg["feature_map"], data.X_train))
    _CACHE[key] = inst
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return inst


def _half_sq(pred: np.ndarray, y: np.ndarray) -> float:
    return float(0.5 * np.mean((pred - y) ** 2))


def evaluate(res: FitResult, inst: Instance, evaluation: dict, rng: np.random.Generator) -> dict:
    """Validation and test losses of a learned predictor (DESIGN §4).

    Kernel expansions (Shrinking Gradient, kernel OGD) are evaluated exactly with the closed-form
    kernel when the map has one (``eval_mode = exact``), else with ``m_test`` Algorithm-2 samples;
    Shrinking Gradient also gets ``test_loss_estimated`` (Algorithm 2 with ``m_test`` samples, what
    a user without the kernel gets; on the first ``n_test_estimated`` test points) and
    ``test_loss_avg`` (the averaged predictor, Corollary 1).
    Feature expansions (Doubly SGD, Fixed-Random) are evaluated exactly on their own features.
    """
    out = {
        k: math.nan
        for k in ("val_loss", "test_loss", "test_loss_avg", "test_loss_estimated", "test_nmse")
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
        if res.averaged is not None:  # Shrinking Gradient: what Algorithm 2 at test time gives
            est = (
                test[:n_est]
                if out["eval_mode"] == "estimated"
                else p.predict_estimated(d.X_train, d.X_test[:n_est], fmap, m_test, rng)
            )
            out["test_loss_estimated"] = _half_sq(est, d.y_test[:n_est])
    out["val_loss"] = _half_sq(val, d.y_val)
    out["test_loss"] = _half_sq(test, d.y_test)
    out["test_nmse"] = float(np.mean((test - d.y_test) ** 2) / np.var(d.y_test))
    return out


def reference_losses(data: Dataset) -> dict:
    """Test loss of the zero predictor, ``½ mean y²`` (the starting point of every learner)."""
    return {"test_loss_zero": _half_sq(np.zeros_like(data.y_test), data.y_test)}


def curve_points(T: int, n: int) -> np.ndarray:
    """Rounds (1-based) at which a learning curve is kept: ``n`` evenly spaced, always ``T``."""
    return np.unique(np.linspace(1, T, min(n, T)).round().astype(int))


def theory_diagnostics(cfg: dict, cell: Cell, res: FitResult, inst: Instance, hyper: dict) -> dict:
    """Shrinking Gradient's Lemma 5 ratio (``<= 1`` iff the bound held all along the pass) and,
    when ``evaluation.regret_B`` is set, the regret of kernel-expansion learners against the best
    ``f`` in the RKHS ball of that radius (Theorem 1), with ``f_t`` evaluated exactly."""
    out: dict = {"lemma5_max_ratio": math.nan}
    if cell.method == "shrinking_gradient":
        etas = step_sizes(hyper["schedule"], hyper["eta"], len(inst.data.y_train), hyper["decay"])
        out["lemma5_max_ratio"] = lemma5_ratio(res.extras["alpha_l1"], etas, hyper["B"])
    radius = cfg["evaluation"]["regret_B"]
    if radius is None:
        return out
    out.update(best_loss_B=math.nan, regret=math.nan, regret_estimated=math.nan)
    if res.diverged or res.timed_out or not isinstance(res.predictor, KernelExpansion):
        return out
    y = inst.data.y_train
    K = inst.kernel_to_train("train")
    key = ("best_in_ball", radius)
    if key not in inst.cache:
        inst.cache[key] = best_in_ball_loss(K, y, radius)
    best = inst.cache[key]
    if "alpha_new" in res.extras:  # Shrinking Gradient: exact f_t(x_t), not the estimate E_t
        f = sg_exact_online_predictions(K, res.extras["alpha_new"], res.extras["shrinks_before"])
        exact = float(0.5 * np.sum((f - y) ** 2))
    else:  # kernel OGD predicts exactly
        exact = float(np.sum(res.losses))
    out.update(
        best_loss_B=best, regret=exact - best, regret_estimated=float(np.sum(res.losses)) - best
    )
    return out


def learner_arguments(cell: Cell, budget, T: int) -> dict:
    """The keyword arguments of the cell's ``fit``: its hyperparameters, the budget size it takes
    (``m``, ``k`` or ``r``), or Theorem 1's ``eta`` and ``m`` under the ``theory`` preset."""
    hyper = {k: v for k, v in cell.hyper.items() if k not in ("preset", "c")}
    if cell.hyper.get("preset") == "theory":
        hyper["eta"], hyper["m"] = theory_preset(cell.hyper["B"], T, cell.hyper["c"])
        hyper["schedule"] = "constant"
    elif budget is not None:
        param = LEARNERS[cell.method].budget_param
        hyper[param] = getattr(budget, param)
    return hyper


def run_cell(cfg: dict, cell: Cell) -> dict:
    """Run one cell: build (or reuse) its data, fit its learner, evaluate; return a record."""
    inst = instance(cfg, cell)
    info = LEARNERS[cell.method]
    T = len(inst.data.y_train)
    budget = derive(cfg["budget"]["match"], cell.dsgd_k, T) if cell.dsgd_k else None
    hyper = learner_arguments(cell, budget, T)
    fit_ss, eval_ss = seed_sequence(cfg["seed"], cell.key).spawn(2)
    limit = cfg["limits"]["cell_timeout_s"]
    t0 = perf_counter()
    if limit is not None:
        hyper["deadline"] = t0 + limit
    res = info.fit(
        inst.data.X_train, inst.data.y_train, inst.fmap, np.random.default_rng(fit_ss), **hyper
    )
    wall = perf_counter() - t0
    ev = evaluate(res, inst, cfg["evaluation"], np.random.default_rng(eval_ss))
    eval_s = perf_counter() - t0 - wall

    row: dict = {"experiment": cfg["name"], "cell_id": cell.id, "method": cell.method}
    row.update({k: v for k, v in cell.data.items() if k != "kind"})
    row.update({f"fmap_{k}": v for k, v in inst.fmap.describe().items() if k != "kind"})
    row.update(
        repetition=cell.rep,
        seed=cfg["seed"],
        setting=",".join(f"{k}={v}" for k, v in cell.hyper.items() if v is not None),
    )
    row.update({k: hyper.get(k, cell.hyper.get(k)) for k in HYPER_COLUMNS})
    row.update(
        dsgd_k=cell.dsgd_k,
        budget_match=cfg["budget"]["match"] if budget else None,
        budget_target=budget.target if budget else None,
        m=hyper.get("m"),
        k=hyper.get("k"),
        r=hyper.get("r"),
    )
    row.update(res.counters)
    row.update(online_loss=float(np.mean(res.losses)) if not res.diverged else math.inf)
    row.update(ev)
    row.update(reference_losses(inst.data))
    row.update(theory_diagnostics(cfg, cell, res, inst, hyper))
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
    if "alpha_l1" in res.extras:  # Shrinking Gradient: |alpha^(t+1)|_1 after round t
        curve["alpha_l1"] = res.extras["alpha_l1"][t - 1].tolist()
    return {"id": cell.id, "row": row, "curve": curve}


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


def execute(cfg: dict, pending: list[Cell], jobs: int, backend: str, on_record) -> None:
    """Run ``pending`` cells with joblib and hand each record to ``on_record`` as it finishes."""
    from joblib import Parallel, delayed, parallel_config

    if not pending:
        return
    tasks = (delayed(run_cell)(cfg, c) for c in pending)
    if jobs == 1 and backend == "loky":
        for c in pending:
            on_record(run_cell(cfg, c))
        return
    with parallel_config(backend=backend, n_jobs=jobs):
        for rec in Parallel(return_as="generator_unordered")(tasks):
            on_record(rec)
