"""What one cell is and computes, whatever engine runs it (docs/architecture.md §3).

A cell is one (dataset setting, repetition, learner, setting[, budget]) of the grid
(:class:`ilnrun.config.Cell`). This module holds everything about a cell that does not depend on
how cells are executed:

- its **instance**: the dataset drawn from ``SeedSequence(seed, spawn_key=H(dataset setting,
  repetition))`` (every learner and setting of a repetition sees the same data) and its feature
  map (:func:`make_instance`, with a small per-process cache in :func:`instance`);
- its **plan** (:class:`CellPlan`): the learner's spec, the rounds ``T``, the matched budget and
  the ``fit`` keywords the spec derives from the setting;
- its **seeds** (:func:`seeds`): the training and evaluation children of
  ``SeedSequence(seed, spawn_key=H(cell))``;
- the **numeric guard** (:func:`guarded`): an overflow, a division by zero or a math /
  linear-algebra domain error marks the cell ``diverged`` (``diverged_reason`` says where) with
  infinite losses; the run goes on (docs/protocol.md §4);
- the **numpy pass** (:func:`fit_numpy`), then :func:`finish`: evaluation (:func:`evaluate`),
  the data-only yardsticks (:func:`reference_losses`), the learner's diagnostics and the regret
  (:func:`diagnostics`), the divergence rules (:func:`blown_up`) and the record (row of
  ``runs.csv``, learning curve, digest).

Engines (:mod:`ilnrun.engines`) stand on this module: each produces a ``FitResult`` per cell and
hands it to :func:`finish`.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import numpy as np

from .budget import Budget, derive, setting_size
from .config import (
    BudgetConfig,
    Cell,
    EvaluationConfig,
    Experiment,
    FeatureMapConfig,
    LimitsConfig,
    digest,
    record_digest,
)
from .config.grid import seed_sequence
from .config.keys import m_test_value
from .datasets import Dataset, build_dataset
from .features import FeatureMap, build_feature_map
from .learners import LEARNERS, hyper_columns, load_native, size_columns
from .learners.base import FitResult, KernelExpansion, LearnerSpec, new_counters
from .losses import DEFAULT_LOSS, LOSSES, LossSpec, error_rate, majority_class
from .theory import TrainKernel, primal_evaluation, primal_predictions

# numba and scipy's BLAS, which the passes call: loaded now, before an engine pins the native
# thread pools for a cell (ilnrun.numeric_env.one_thread pins only the libraries loaded then)
load_native()

__all__ = [
    "CellPlan",
    "DIVERGED_FACTOR",
    "Instance",
    "NUMERIC_ERRORS",
    "blown_up",
    "evaluate",
    "finish",
    "fit_numpy",
    "guarded",
    "instance",
    "loss_of",
    "make_instance",
    "plan",
    "reference_losses",
    "m_test",
    "run_cell",
    "run_cells",
    "twins",
    "seeds",
    "sweep_column",
    "sweep_seed",
    "validation_seed",
]


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

    def predict_exact(self, f: KernelExpansion, split: str) -> np.ndarray:
        """``f`` on a split, exactly: in the map's primal past ``T`` = 20 000 (theory.py), else
        with the cached kernel block."""
        if primal_evaluation(self.fmap, len(self.data.X_train)):
            f.count_exact(len(self.data.split(split)[0]))
            return primal_predictions(
                self.fmap, self.data.X_train, self.data.split(split)[0], f.alpha
            )
        return f.predict_exact(self.kernel_to_train(split))

    def train_kernel(self) -> TrainKernel:
        """The training kernel of the exact diagnostics (theory.py: primal or matrix)."""
        if "train_kernel" not in self.cache:
            self.cache["train_kernel"] = TrainKernel(self.fmap, self.data.X_train)
        return self.cache["train_kernel"]

    def budget(self, match: str, per_round: int) -> Budget:
        """The matched budget of ``per_round`` features per round under ``match`` on this
        instance's ``T`` rounds and ``n_val + n_test`` scored points (:func:`ilnrun.budget.derive`,
        derived once per instance, budget and set of registered learners, not once per cell;
        never changed)."""
        key = ("budget", match, per_round, _registered())
        if key not in self.cache:
            d = self.data
            n_eval = len(d.y_val) + len(d.y_test)  # the points ``total`` counts
            self.cache[key] = derive(match, per_round, len(d.y_train), n_eval)
        return self.cache[key]

    def references(self, n_estimated: int | None, loss: LossSpec, error: bool) -> dict:
        """:func:`reference_losses` of this instance (the data-only yardsticks: the same for
        every cell of the instance, so computed once per loss; the caller copies them)."""
        key = ("references", n_estimated, loss.name, id(loss), error)
        if key not in self.cache:
            self.cache[key] = reference_losses(self.data, n_estimated, loss, error)
        return self.cache[key]

    def label_variance(self, split: str, n: int | None = None) -> float:
        """``np.var`` of the first ``n`` labels of ``split`` (all of them without ``n``), once
        per instance: the denominators of the NMSE columns."""
        key = ("var", split, n)
        if key not in self.cache:
            y = self.data.split(split)[1]
            self.cache[key] = float(np.var(y if n is None else y[:n]))
        return self.cache[key]

    def columns(self) -> tuple[list[str], list[str]]:
        """``(hyper_columns(), size_columns())`` of the registered learners (the row's parameter
        and size columns; read once per instance and set of registered learners)."""
        key = ("columns", _registered())
        if key not in self.cache:
            self.cache[key] = (hyper_columns(), size_columns())
        return self.cache[key]


def _registered() -> tuple:
    """The registered learners (name, spec object): what the values derived from the registry
    that an instance keeps (:meth:`Instance.budget`, :meth:`Instance.columns`) depend on, so
    that a learner registered later (a plugin, a test's toy) is never missed."""
    return tuple((name, id(spec)) for name, spec in LEARNERS.items())


_CACHE: OrderedDict[str, Instance] = OrderedDict()
_CACHE_SIZE = 2


_LAST_KEY: tuple = (None, "")  # (what identifies an instance, its digest): the last asked for


def instance(seed: int, fmap: FeatureMapConfig, cell: Cell) -> Instance:
    """The dataset instance of ``cell`` (built once per process, then cached; consecutive cells
    of one instance find it without hashing its identity again)."""
    global _LAST_KEY
    probe = (seed, fmap, cell.data_key)
    last, key = _LAST_KEY
    if last != probe:
        key = digest({"seed": seed, "fmap": fmap.as_dict(), **cell.data_key})
        _LAST_KEY = (probe, key)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    inst = _CACHE[key] = make_instance(seed, fmap, cell)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return inst


def forget_instances() -> None:
    """Drop this process's cached dataset instances (after it ran cells too big to share the
    memory with the workers that run the others)."""
    _CACHE.clear()


def make_instance(seed: int, fmap: FeatureMapConfig, cell: Cell) -> Instance:
    """Build the dataset instance of ``cell`` (root seed ``seed``) and its feature map (no
    cache)."""
    rng = np.random.default_rng(seed_sequence(seed, cell.data_key))
    data = build_dataset(cell.data, rng, fmap.as_dict())
    return Instance(data, build_feature_map(fmap.as_dict(), data.X_train))


@dataclass(frozen=True)
class CellPlan:
    """What a cell's pass is: its learner's ``spec``, the rounds ``T``, the matched ``budget``
    (``None`` for a setting that takes no size from it) and the ``fit`` keywords ``args`` the
    spec derives from the setting (``spec.fit_arguments``: the budget size, or e.g. the theory
    preset's ``eta`` and ``m``)."""

    cell: Cell
    spec: LearnerSpec
    T: int
    budget: Budget | None
    args: dict[str, Any]

    def size(self) -> int:
        """The learner's budget size as passed to ``fit`` (``0`` for an unbudgeted learner)."""
        return self.args.get(self.spec.budget.name, 0) if self.spec.budget else 0


def plan(budget: BudgetConfig, cell: Cell, inst: Instance) -> CellPlan:
    """The plan of ``cell`` on its instance ``inst`` under the experiment's ``budget``
    convention."""
    spec = LEARNERS[cell.method]
    T = len(inst.data.y_train)
    matched = inst.budget(budget.match, cell.per_round) if cell.per_round else None
    size = setting_size(matched, cell.method, cell.hyper) if matched is not None else None
    return CellPlan(cell, spec, T, matched, spec.fit_arguments(cell.hyper, size, T))


def loss_of(cell: Cell) -> LossSpec:
    """The loss ``cell`` learns with and is scored on (:mod:`ilnrun.losses`): its setting's
    ``loss``, the square loss where it has none (docs/protocol.md §12)."""
    return LOSSES[cell.hyper.get("loss") or DEFAULT_LOSS]


def classifies(cell: Cell, loss: LossSpec) -> bool:
    """Whether the cell reports ``test_error``: its loss is a ±1-label loss, or its dataset's
    labels are ±1 (the square loss on ±1 labels, ILN paper §4's suggestion for classification)."""
    from .datasets import DATASETS

    spec = DATASETS.get(cell.data.get("kind"))
    return loss.labels == "pm1" or getattr(spec, "labels", "real") == "pm1"


def _child(seed: int, cell: Cell, i: int) -> np.random.SeedSequence:
    """The ``i``-th child of the cell's seed sequence ``SeedSequence(seed, spawn_key=H(key))``,
    built as ``spawn`` builds it (``spawn_key`` extended by ``i``) from the key's digest, which
    the cell keeps (:attr:`~ilnrun.config.Cell.seed_spawn_key`): the same seeds as
    ``seed_sequence(seed, cell.seed_key).spawn(i + 1)[i]``, without hashing the key again."""
    return np.random.SeedSequence(seed, spawn_key=(*cell.seed_spawn_key, i))


def seeds(seed: int, cell: Cell) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """``(fit, evaluation)``: the two children of the cell's seed sequence under the root
    ``seed``."""
    return _child(seed, cell, 0), _child(seed, cell, 1)


def validation_seed(seed: int, cell: Cell) -> np.random.SeedSequence:
    """The seed of ``val_loss_estimated``'s Algorithm-2 samples: the third child of the cell's
    seed sequence (the first two, :func:`seeds`, are those of every other column, which it
    leaves as they were)."""
    return _child(seed, cell, 2)


NUMERIC_ERRORS = (
    OverflowError,
    FloatingPointError,
    ZeroDivisionError,
    ValueError,
    np.linalg.LinAlgError,
)


def guarded(stage: str, fn, *args, **kwargs) -> tuple:
    """``(fn(*args, **kwargs), None)``, or ``(None, reason)`` when it raises a numeric error."""
    try:
        return fn(*args, **kwargs), None
    except NUMERIC_ERRORS as exc:
        what = {"OverflowError": "overflow", "ZeroDivisionError": "division by zero"}.get(
            type(exc).__name__, type(exc).__name__
        )
        return None, f"{what} in {stage}: {str(exc)[:80]}"


def fit_numpy(
    seed: int, limits: LimitsConfig, p: CellPlan, inst: Instance
) -> tuple[FitResult | None, str | None, float]:
    """The learner's numpy ``fit`` under the guard, with the cell's training seed and
    ``limits.cell_timeout_s`` as its deadline: ``(result, reason, wall seconds)``."""
    fit_ss = _child(seed, p.cell, 0)  # seeds(seed, p.cell)[0]
    limit = limits.cell_timeout_s
    t0 = perf_counter()
    deadline = {} if limit is None else {"deadline": t0 + limit}
    d = inst.data
    rng = np.random.default_rng(fit_ss)
    res, reason = guarded(
        "fit", p.spec.fit, d.X_train, d.y_train, inst.fmap, rng, **p.args, **deadline
    )
    return res, reason, perf_counter() - t0


def run_cell(exp: Experiment, cell: Cell) -> dict:
    """Run one cell with its numpy pass: build (or reuse) its data, fit, evaluate; return its
    record."""
    inst = instance(exp.seed, exp.feature_map, cell)
    p = plan(exp.budget, cell, inst)
    res, reason, wall = fit_numpy(exp.seed, exp.limits, p, inst)
    return finish(exp, p, inst, res, reason, wall)


def run_cells(exp: Experiment, cells: Sequence[Cell]) -> Iterator[dict]:
    """The records of ``cells``, in order, as :func:`run_cell` makes them one by one, but for
    ``average`` twins: a cell and the next one that differ only in ``average`` make the same
    pass (the same seeds, :attr:`~ilnrun.config.Cell.seed_key`; ``average`` chooses the
    predictor it returns), so the pass runs once, with ``average``, and the other cell is
    evaluated from the final predictor it keeps (``FitResult.final``). Each record is the one
    its own pass gives (its own evaluation seeds and counters; ``wall_s``: the shared pass's
    time). A pass that keeps no final predictor, or that raised, runs again for the other."""
    i = 0
    while i < len(cells):
        if i + 1 < len(cells) and twins(cells[i], cells[i + 1]):
            yield from _run_twins(exp, cells[i], cells[i + 1])
            i += 2
        else:
            yield run_cell(exp, cells[i])
            i += 1


def twins(a: Cell, b: Cell) -> bool:
    """Whether cells ``a`` and ``b`` differ only in ``average`` (set in exactly one of them):
    the same learner, dataset setting, repetition, budget and other parameters, hence the same
    seeds (:attr:`~ilnrun.config.Cell.seed_key` leaves ``average`` out)."""
    return (
        a.method == b.method
        and a.rep == b.rep
        and a.per_round == b.per_round
        and bool(a.hyper.get("average")) != bool(b.hyper.get("average"))
        and _but_average(a.hyper) == _but_average(b.hyper)
        and a.data_key == b.data_key
    )


def _but_average(h: dict) -> dict:
    return {k: v for k, v in h.items() if k != "average"}


def _run_twins(exp: Experiment, a: Cell, b: Cell) -> Iterator[dict]:
    """The records of the ``average`` twins ``a`` and ``b`` (:func:`run_cells`), in order."""
    inst = instance(exp.seed, exp.feature_map, a)
    pa, pb = plan(exp.budget, a, inst), plan(exp.budget, b, inst)
    avg, plain = (pb, pa) if b.hyper.get("average") else (pa, pb)

    same = (
        avg.args.get("average") is True
        and plain.args.get("average", False) is False
        and _but_average(avg.args) == _but_average(plain.args)
    )
    if not same:  # not one pass after all (a spec's arguments hook)
        yield run_cell(exp, a)
        yield run_cell(exp, b)
        return
    res, reason, wall = fit_numpy(exp.seed, exp.limits, avg, inst)
    passes = {avg.cell.id: (res, reason, wall)}
    if res is not None and res.final is not None:
        passes[plain.cell.id] = (res.without_average(), reason, wall)
    for p in (pa, pb):
        if p.cell.id not in passes:  # the plain pass, made on its own
            passes[p.cell.id] = fit_numpy(exp.seed, exp.limits, p, inst)
        yield finish(exp, p, inst, *passes[p.cell.id])


# ----------------------------------------------------------------------------------------------
# evaluation, yardsticks, divergence


def _half_sq(pred: np.ndarray, y: np.ndarray) -> float:
    return float(0.5 * np.mean((pred - y) ** 2))


LOSS_KEYS = (
    "val_loss",
    "test_loss",
    "test_loss_avg",
    "test_loss_estimated",
    "test_nmse",
    "test_nmse_estimated",
    "val_loss_estimated",
)


def sweep_column(m: int) -> str:
    """The column of the Algorithm-2 test NMSE with ``m`` samples a point (``m_test_sweep``)."""
    return f"test_nmse_estimated_m{int(m)}"


def sweep_seed(seed: int, cell: Cell, m: int) -> np.random.SeedSequence:
    """The seed of ``test_nmse_estimated_m<m>``'s Algorithm-2 samples: the cell's key with the
    ``m`` of the column (independent of every other column and of the other ``m``)."""
    return seed_sequence(seed, {**cell.seed_key, "m_test_sweep": int(m)})


def m_test(evaluation: EvaluationConfig, p: CellPlan) -> int:
    """The cell's Algorithm-2 samples a point under ``evaluation.m_test``
    (:func:`ilnrun.config.keys.m_test_value`: an integer, or a rule of the cell's ``T``, ``B``,
    ``c`` and training ``m``)."""
    return m_test_value(evaluation.m_test, p.T, p.args, p.cell.hyper)


COST_KEYS = ("val_evals", "test_evals_psi", "val_kernel_evals", "test_kernel_evals")


def _costs(*predictors) -> tuple[int, int]:
    """``(feature evaluations, kernel values)`` the predictors' predictions spent so far (their
    own counters, :func:`ilnrun.learners.base.new_costs`; 0 for one without)."""
    psi = kernel = 0
    for q in predictors:
        c = getattr(q, "costs", None) or {}
        psi, kernel = psi + c.get("psi", 0), kernel + c.get("kernel", 0)
    return psi, kernel


def evaluate(
    res: FitResult,
    inst: Instance,
    evaluation: EvaluationConfig,
    rng: np.random.Generator,
    val_rng: np.random.Generator | None = None,
    m_test: int | None = None,
    sweep_rngs: dict[int, np.random.Generator] | None = None,
    loss: LossSpec | None = None,
    error: bool = False,
) -> dict:
    """Validation and test losses of a learned predictor, and what they cost (docs/protocol.md).

    Every loss column is the mean of ``loss`` (the square loss ``½ (f(x) − y)²`` by default,
    computed as before losses were plugins); the NMSE columns are the square loss's metric
    (NaN for another loss); with ``error``, ``test_error`` is the misclassification rate of
    ``sign f(x)`` on the test split (±1 labels; docs/protocol.md §12).

    By the kind of predictor (:func:`_predict`): kernel expansions
    (``f = sum_i alpha_i k(x_i, .)``) exactly with the closed-form kernel when the map has one
    and ``evaluation.kernel`` is ``exact`` (``eval_mode = exact``), else with ``m_test``
    Algorithm-2 samples on every point; feature expansions (``f = sum_j c_j psi(., w_j)``)
    exactly on their own features. A learner that also returns an averaged predictor (Shrinking
    Gradient, Corollary 1) gets ``test_loss_avg`` (exactly; by Algorithm 2 on the first
    ``n_test_estimated`` test points under ``kernel: free``) and ``test_loss_estimated``
    (Algorithm 2 with ``m_test`` samples, what a user without the kernel gets; on the first
    ``n_test_estimated`` test points) and ``val_loss_estimated``: the validation loss the same
    way, on the first ``n_test_estimated`` validation points with its own generator ``val_rng``
    (drawn after, and independent of, every other column), what ``evaluation.select_on:
    estimated`` selects on (docs/protocol.md §5.2); the predictor's own ``val_loss`` when
    Algorithm 2 already evaluated it.

    Costs, counted by the predictors as they predict (their ``costs``): ``val_evals`` /
    ``test_evals_psi`` feature evaluations and ``val_kernel_evals`` / ``test_kernel_evals``
    kernel values per validation / test point of the **scored** predictor; ``diagnostic_evals``
    the feature evaluations of every other column (the averaged predictor, the Algorithm-2
    columns of an exactly scored predictor, the ``m_test_sweep`` columns, one generator each in
    ``sweep_rngs``). ``m_test`` defaults to ``evaluation.m_test`` (an integer).
    """
    loss = loss or LOSSES[DEFAULT_LOSS]
    risk, nmse = loss.risk, "test_nmse" in loss.metrics
    out: dict = dict.fromkeys(LOSS_KEYS, math.nan)
    if error:
        out["test_error"] = math.nan
    out.update(test_evals=0, eval_mode="exact", test_loss_subset=math.nan, diagnostic_evals=0)
    out.update(dict.fromkeys(COST_KEYS, 0))
    out.update({sweep_column(m): math.nan for m in evaluation.m_test_sweep})
    d = inst.data
    m_test = evaluation.m_test if m_test is None else m_test
    if isinstance(m_test, (str, dict)):  # a rule: the caller resolves it for the cell (m_test())
        raise TypeError(f"evaluate() needs the cell's m_test for the rule {m_test!r}")
    n_est = evaluation.n_estimated(len(d.y_test))
    if res.diverged:
        out.update(val_loss=math.inf, test_loss=math.inf, test_nmse=math.inf)
        if error:
            out["test_error"] = math.inf
        return out
    p = res.predictor
    draws = evaluation.estimate_draws  # the random stream of every Algorithm-2 estimate
    spent0 = _costs(p, res.averaged)
    val, test, mode, evals, scored = _predict(p, inst, m_test, rng, evaluation.free, draws)
    (val_psi, val_k), (test_psi, test_k) = scored
    out.update(eval_mode=mode, test_evals=evals)
    out.update(
        val_evals=val_psi // max(1, len(d.y_val)),
        test_evals_psi=test_psi // max(1, len(d.y_test)),
        val_kernel_evals=val_k // max(1, len(d.y_val)),
        test_kernel_evals=test_k // max(1, len(d.y_test)),
    )
    var = inst.label_variance("test", n_est)
    if res.averaged is not None:
        if inst.fmap.has_kernel and not evaluation.free:
            avg = inst.predict_exact(res.averaged, "test")
            out["test_loss_avg"] = risk(avg, d.y_test)
        elif evaluation.free:  # the averaged predictor by Algorithm 2, as SG's own
            avg = res.averaged.predict_estimated(
                d.X_train, d.X_test[:n_est], inst.fmap, m_test, rng, draws=draws
            )
            out["test_loss_avg"] = risk(avg, d.y_test[:n_est])
        # what Algorithm 2 at test time gives
        est = (
            test[:n_est]
            if mode == "estimated"
            else p.predict_estimated(
                d.X_train, d.X_test[:n_est], inst.fmap, m_test, rng, draws=draws
            )
        )
        out["test_loss_estimated"] = risk(est, d.y_test[:n_est])
        out["val_loss_estimated"] = _val_estimated(
            p, inst, evaluation, val, mode, val_rng, m_test, risk
        )
        if nmse:
            out["test_nmse_estimated"] = 2 * out["test_loss_estimated"] / var if var else math.nan
    if hasattr(p, "predict_estimated"):
        for m, sweep_rng in (sweep_rngs or {}).items():
            est = p.predict_estimated(
                d.X_train, d.X_test[:n_est], inst.fmap, m, sweep_rng, draws=draws
            )
            if nmse:
                out[sweep_column(m)] = 2 * risk(est, d.y_test[:n_est]) / var if var else math.nan
    spent1 = _costs(p, res.averaged)
    out["diagnostic_evals"] = spent1[0] - spent0[0] - val_psi - test_psi
    out["val_loss"] = risk(val, d.y_val)
    out["test_loss"] = risk(test, d.y_test)
    out["test_loss_subset"] = risk(test[:n_est], d.y_test[:n_est])
    if nmse:
        out["test_nmse"] = float(np.mean((test - d.y_test) ** 2) / inst.label_variance("test"))
    if error:
        out["test_error"] = error_rate(test, d.y_test)
    return out


def _val_estimated(
    p: KernelExpansion,
    inst: Instance,
    evaluation: EvaluationConfig,
    val: np.ndarray,
    mode: str,
    rng: np.random.Generator | None,
    m_test: int,
    risk=None,
) -> float:
    """``½ mean (f̂(x) − y)²`` (``risk``: the mean of the cell's loss) over the first
    ``n_test_estimated`` validation points, ``f̂`` the Algorithm-2 estimate of ``p`` with
    ``m_test`` samples a point (``val``, the predictions
    already made, when ``mode`` is ``estimated``); NaN without a generator."""
    d, risk = inst.data, risk or _half_sq
    if mode == "estimated":
        return risk(val, d.y_val)
    if rng is None:
        return math.nan
    n = evaluation.n_estimated(len(d.y_val))
    draws = evaluation.estimate_draws
    est = p.predict_estimated(d.X_train, d.X_val[:n], inst.fmap, m_test, rng, draws=draws)
    return risk(est, d.y_val[:n])


def _predict(
    p, inst: Instance, m_test: int, rng, free: bool = False, draws: str = "multinomial"
) -> tuple[np.ndarray, np.ndarray, str, int, tuple[tuple[int, int], tuple[int, int]]]:
    """``(validation predictions, test predictions, eval_mode, test evaluations per point,
    ((val feature evaluations, val kernel values), (test ...)))``, the last two counted by the
    predictor.

    A kernel expansion (it has ``predict_exact`` and ``predict_estimated``) is evaluated exactly
    with the closed-form kernel when the map has one and ``free`` is not set, and by Algorithm 2
    otherwise (the random stream ``draws``: ``evaluation.estimate_draws``); any other
    predictor — a feature expansion, or a learner's own kind — by its ``predict(X)``, exactly
    (``evals_per_point()`` evaluations a point, when it has that method)."""
    d, fmap = inst.data, inst.fmap

    def split(name: str) -> np.ndarray:
        return d.split(name)[0]

    if hasattr(p, "predict_exact") and fmap.has_kernel and not free:
        mode, evals = "exact", p.exact_evals_per_point()

        def run(name: str) -> np.ndarray:
            return inst.predict_exact(p, name)
    elif hasattr(p, "predict_exact"):
        mode, evals = "estimated", 2 * m_test

        def run(name: str) -> np.ndarray:
            return p.predict_estimated(d.X_train, split(name), fmap, m_test, rng, draws=draws)
    else:
        mode = "exact"
        evals = p.evals_per_point() if hasattr(p, "evals_per_point") else 0

        def run(name: str) -> np.ndarray:
            return p.predict(split(name))

    # each split's cost as the predictor counted it (validation first: the generator's order)
    c0 = _costs(p)
    val = run("val")
    c1 = _costs(p)
    test = run("test")
    c2 = _costs(p)
    scored = ((c1[0] - c0[0], c1[1] - c0[1]), (c2[0] - c1[0], c2[1] - c1[1]))
    return val, test, mode, evals, scored


def test_evals_free(spec: LearnerSpec, predictor, m_test: int) -> int | None:
    """Feature evaluations a test point of the learner's kernel-free predictor costs, from the
    predictor's state: a kernel expansion's Algorithm 2 (``2 m_test``), a feature expansion's
    own features (Doubly SGD ``k T``, Fixed-Random ``r``); ``None`` for a learner that needs the
    kernel (it has no kernel-free predictor) or a pass that returned none."""
    if spec.needs_kernel or predictor is None:
        return None
    if hasattr(predictor, "estimate_evals_per_point"):
        return predictor.estimate_evals_per_point(m_test)
    if getattr(getattr(predictor, "fmap", None), "kernel_valued", False):
        return None
    return predictor.evals_per_point() if hasattr(predictor, "evals_per_point") else None


def reference_losses(
    data: Dataset, n_estimated: int | None = None, loss: LossSpec | None = None, error: bool = False
) -> dict:
    """The yardsticks of every cell (docs/protocol.md §8), from the data alone, for the square
    loss (the default; for another ``loss``, below):

    - ``test_loss_zero``: the zero predictor, ``½ mean y_test²`` (where every learner starts);
    - ``test_loss_const``: the best constant predictor a learner could know, the training-label
      mean ``ȳ_train`` predicted everywhere, ``½ mean (ȳ_train − y_test)²``;
    - ``test_nmse_const``: its NMSE, ``mean (ȳ_train − y_test)² / var(y_test)`` (just above 1:
      1 is the test-label mean, which no learner can know);
    - ``test_loss_const_subset`` (given ``n_estimated``): the same constant on the first
      ``n_estimated`` test points, the points of ``test_loss_estimated`` (so the two pair
      exactly).

    For another loss (docs/protocol.md §12): ``test_loss_zero`` its mean at 0,
    ``test_loss_const`` at its best constant (``LossSpec.best_constant`` of the training labels:
    the log-odds for the logistic loss, the majority sign for the hinge, ...), its subset, and
    ``test_nmse_const`` NaN. With ``error``, whatever the loss: ``test_error_const``, the
    misclassification rate of the majority class of the training labels predicted everywhere
    (:func:`majority_error`; the sign of every loss's best constant but on a tie).
    """
    if loss is not None and loss.name != DEFAULT_LOSS:
        return _reference_losses(data, n_estimated, loss, error)
    out = _square_references(data, n_estimated)
    if error:
        out["test_error_const"] = majority_error(data)
    return out


def majority_error(data: Dataset) -> float:
    """``test_error_const``: the test error rate of the majority class of the training labels
    predicted everywhere (:func:`~ilnrun.losses.base.majority_class`; ``+1`` on a tie), the
    classification yardstick of every loss (docs/protocol.md §8, §12)."""
    c = majority_class(data.y_train)
    return error_rate(np.full_like(data.y_test, c), data.y_test)


def _reference_losses(data: Dataset, n_estimated: int | None, loss: LossSpec, error: bool) -> dict:
    """:func:`reference_losses` of a loss other than the square loss."""
    y = data.y_test
    const = np.full_like(y, loss.best_constant(data.y_train))
    out = {
        "test_loss_zero": loss.risk(np.zeros_like(y), y),
        "test_loss_const": loss.risk(const, y),
        "test_nmse_const": math.nan,
    }
    if n_estimated is not None:
        out["test_loss_const_subset"] = loss.risk(const[:n_estimated], y[:n_estimated])
    if error:
        out["test_error_const"] = majority_error(data)
    return out


def _square_references(data: Dataset, n_estimated: int | None) -> dict:
    """:func:`reference_losses` of the square loss."""
    y, ybar = data.y_test, float(np.mean(data.y_train))
    const = np.full_like(y, ybar)
    var = float(np.var(y))
    out = {
        "test_loss_zero": _half_sq(np.zeros_like(y), y),
        "test_loss_const": _half_sq(const, y),
        "test_nmse_const": float(np.mean((const - y) ** 2) / var) if var > 0 else math.nan,
    }
    if n_estimated is not None:
        out["test_loss_const_subset"] = _half_sq(const[:n_estimated], y[:n_estimated])
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


@functools.lru_cache(maxsize=64)
def _curve_rounds(T: int, n: int) -> tuple[np.ndarray, list[int]]:
    """:func:`curve_points` (read-only) and its list: the same for every cell of ``T`` rounds,
    so made once per process."""
    t = curve_points(T, n)
    t.flags.writeable = False
    return t, t.tolist()


def regret(
    spec: LearnerSpec,
    radius: float | None,
    res: FitResult,
    inst: Instance,
    loss: str = DEFAULT_LOSS,
) -> dict:
    """With ``evaluation.regret_B`` (``radius``) set: the regret against the best ``f`` in the
    RKHS ball of that radius (Theorem 1), for learners whose spec can evaluate their online
    predictions exactly (``exact_online_loss``); ``regret_estimated`` uses the pass's own
    predictions. The comparator is the square loss's (a least-squares problem in the ball): a
    cell learning with another ``loss`` gets NaN."""
    if radius is None:
        return {}
    out = {"best_loss_B": math.nan, "regret": math.nan, "regret_estimated": math.nan}
    if spec.exact_online_loss is None or res.diverged or res.timed_out or loss != DEFAULT_LOSS:
        return out
    y = inst.data.y_train
    K = inst.train_kernel()
    key = ("best_in_ball", radius)
    if key not in inst.cache:
        inst.cache[key] = K.best_in_ball_loss(y, radius)
    best = inst.cache[key]
    exact = spec.exact_online_loss(res, K, y)
    out.update(
        best_loss_B=best, regret=exact - best, regret_estimated=float(np.sum(res.losses)) - best
    )
    return out


def diagnostics(p: CellPlan, radius: float | None, res: FitResult, inst: Instance) -> dict:
    """The learner's own diagnostics (its spec's hook) and the regret (:func:`regret`)."""
    spec = p.spec
    out = spec.diagnostics(res, p.args, p.T) if spec.diagnostics is not None else {}
    return {**out, **regret(spec, radius, res, inst, loss_of(p.cell).name)}


# ----------------------------------------------------------------------------------------------
# the record


def finish(
    exp: Experiment,
    p: CellPlan,
    inst: Instance,
    res: FitResult | None,
    reason: str | None,
    wall: float,
) -> dict:
    """Evaluate a finished pass (``res``; ``None`` with ``reason`` when it raised) and build the
    cell's record: its row of ``runs.csv``, its learning curve and its digest (and, for a pass
    that timed out, ``timeout_s``, the limit it ran under). Shared by every
    engine (the evaluation is numpy's, on the returned predictors, with the cell's evaluation
    seed)."""
    cell, evaluation = p.cell, exp.evaluation
    t0 = perf_counter()
    res = res or FitResult(None, np.zeros(0), new_counters(), diverged=True)
    m = m_test(evaluation, p)
    loss = loss_of(cell)
    error = classifies(cell, loss)
    ev = None
    if reason is None:
        eval_rng = val_rng = None
        sweep: dict[int, np.random.Generator] = {}
        if _draws(res):  # the generators of the Algorithm-2 estimates (seeds: seeds(), ...)
            eval_rng = np.random.default_rng(_child(exp.seed, cell, 1))  # seeds(...)[1]
            if res.averaged is not None:  # only its val_loss_estimated draws from val_rng
                val_rng = np.random.default_rng(validation_seed(exp.seed, cell))
            sweep = {
                s: np.random.default_rng(sweep_seed(exp.seed, cell, s))
                for s in evaluation.m_test_sweep
            }
        ev, reason = guarded(
            "evaluation", evaluate, res, inst, evaluation, eval_rng, val_rng, m, sweep, loss, error
        )
    ev = ev or evaluate(
        replace(res, diverged=True), inst, evaluation, None, m_test=m, loss=loss, error=error
    )
    eval_s = perf_counter() - t0

    row = _row_head(exp, p, inst)
    row.update(res.counters)
    row.update(online_loss=float(np.mean(res.losses)) if not res.diverged else math.inf)
    row.update(ev)
    row.update(_cost_columns(p, res, ev, inst, evaluation, m))
    n_est = evaluation.n_estimated(len(inst.data.y_test))
    row.update(inst.references(n_est, loss, error))
    if res.predictor is not None:  # None: the pass raised
        diag, why = guarded("diagnostics", diagnostics, p, evaluation.regret_B, res, inst)
        row.update(diag or {})
        reason = reason or why
    row.update(
        diverged=bool(res.diverged),
        timed_out=bool(res.timed_out),
        rounds=len(res.losses),
        wall_s=wall,
        eval_s=eval_s,
    )
    curve = _curve(p, res, evaluation.curve_points)
    mark_diverged(row, res, reason)
    record = {"id": cell.id, "row": row, "curve": curve, "digest": record_digest(exp, cell)}
    if res.timed_out:  # the limit it ran under: a resume under a higher one runs it again
        record["timeout_s"] = exp.limits.cell_timeout_s
    return record


def _draws(res: FitResult) -> bool:
    """Whether :func:`evaluate` draws Algorithm-2 samples for ``res``: a pass that did not
    diverge and returned a kernel expansion (it has ``predict_estimated``: estimated where the
    map has no closed form, and for the ``m_test_sweep`` columns) or an averaged predictor (the
    estimated test and validation losses). Any other predictor (a feature expansion, a
    learner's own kind) draws nothing, so its generators are not made."""
    if res.diverged:
        return False
    return res.averaged is not None or hasattr(res.predictor, "predict_estimated")


def _cost_columns(
    p: CellPlan, res: FitResult, ev: dict, inst: Instance, evaluation: EvaluationConfig, m: int
) -> dict:
    """The row's protocol and totals (docs/protocol.md §3.2): ``eval_kernel``, ``m_test`` (for
    a learner scored or estimated by Algorithm 2), ``test_evals_free``, and
    ``evals_total = train_evals + n_val val_evals + n_test test_evals_psi``,
    ``kernel_evals_total = kernel_evals + n_val val_kernel_evals + n_test test_kernel_evals``."""
    n_val, n_test = len(inst.data.y_val), len(inst.data.y_test)
    c = res.counters
    uses_m = p.spec.estimated_test or ev["eval_mode"] == "estimated"
    return {
        "eval_kernel": evaluation.kernel,
        "m_test": m if uses_m else None,
        "test_evals_free": test_evals_free(p.spec, res.predictor, m),
        "evals_total": int(c.get("train_evals", 0))
        + n_val * int(ev["val_evals"])
        + n_test * int(ev["test_evals_psi"]),
        "kernel_evals_total": int(c.get("kernel_evals", 0))
        + n_val * int(ev["val_kernel_evals"])
        + n_test * int(ev["test_kernel_evals"]),
    }


def _row_head(exp: Experiment, p: CellPlan, inst: Instance) -> dict:
    """The identifying columns of a cell's row: experiment, cell, dataset setting, feature map,
    repetition, seed, engine, setting, hyperparameters and the budget."""
    cell, budget, args = p.cell, p.budget, p.args
    row: dict = {"experiment": exp.name, "cell_id": cell.id, "method": cell.method}
    # a list taken as one value (``features: [a, b]``, ``classes: [8, 6]``) is one cell of the
    # tables, comma-separated: the tables group rows by these columns
    row.update(
        {
            k: ",".join(map(str, v)) if isinstance(v, list) else v
            for k, v in cell.data.items()
            if k != "kind"
        }
    )
    row.update({f"fmap_{k}": v for k, v in inst.fmap.describe().items() if k != "kind"})
    row.update(
        repetition=cell.rep,
        seed=exp.seed,
        engine=exp.engine,
        loss=loss_of(cell).name,
        setting=",".join(f"{k}={v}" for k, v in cell.hyper.items() if v is not None),
    )
    hyper_cols, size_cols = inst.columns()
    row.update({k: args.get(k, cell.hyper.get(k)) for k in hyper_cols})
    row.update(
        dsgd_k=cell.per_round,  # the column keeps the YAML key's name
        budget_match=budget.match if budget else None,
        budget_target=budget.target if budget else None,
    )
    row.update({k: args.get(k) for k in size_cols})
    return row


def _curve(p: CellPlan, res: FitResult, n_points: int) -> dict:
    """The running mean of the online loss at :func:`curve_points` (and the spec's own curve
    columns)."""
    t, rounds = _curve_rounds(p.T, n_points)
    if len(res.losses) < p.T:  # a pass that stopped early: the rounds it played
        t = t[t <= len(res.losses)]
        rounds = t.tolist()
    running = np.cumsum(res.losses)[t - 1] / t
    curve = {"t": list(rounds), "online_loss": running.tolist()}
    if p.spec.curve is not None and res.predictor is not None:
        curve.update(p.spec.curve(res, t))
    return curve


def mark_diverged(row: dict, res: FitResult, reason: str | None) -> None:
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
        if "test_error" in row:
            row["test_error"] = math.inf
        if "test_loss_subset" in row:
            row["test_loss_subset"] = math.inf
