"""The cost model: what a config will allocate and how long its cells take, estimated before
anything is built (docs/architecture.md §2).

It reads the resolved config once, into a :class:`Workload` (its typed parts and, per dataset
setting, the sizes the config states or the data were counted to have), and every estimate takes
that workload, never the config mapping. Validation (:mod:`ilnrun.config.schema`) refuses by it,
``ilnrun validate`` prints its lines, and a run checks its workers against it
(:func:`check_run`).

Every number comes from the sizes the config states or the data were counted to have (a table's
split sizes are read from ``data_used``, the rows :func:`ilnrun.datasets.inspect` counted), never
from building a dataset. One worker process running one cell holds (bytes, float64 = 8):

- the process itself (:data:`PROCESS_BYTES`: the interpreter and the imported libraries);
- its cached dataset **instances** (:func:`ilnrun.cell.instance` keeps :data:`INSTANCE_CACHE`),
  each with its arrays ``8 rows (D + 1)``, the exact-evaluation kernel blocks
  ``k(X_val, X_train)`` and ``k(X_test, X_train)`` (``8 (n_val + n_test) T``; none when exact
  predictions go through the map's primal, theory.py, or no learner's predictor is a kernel
  expansion) and, for the regret on the kernel-matrix route, the ``T x T`` training kernel;
- the largest **transient** of the cell's stages: building an instance (the table read whole and
  the copies that shuffle and standardize it), the learner's pass (its spec's ``memory`` hook),
  the kernel blocks while they are formed (the map's ``kernel_copies`` blocks at once), the
  Algorithm-2 test estimates (multinomial counts ``rows x T``, or the index table of
  ``estimate_draws: inverse_cdf_v1``, and ``2^20`` pairs a chunk), the
  evaluation of a feature expansion, and the regret's eigendecomposition (the ``T x T`` route:
  four more ``T x T`` matrices; the primal route: ``p x p`` ones).

``jobs`` workers hold that at once (each its own cache), besides the parent process; a cell of
which ``jobs`` at once would exceed ``limits.max_memory_gb`` (default: 80% of this machine's
memory) runs one at a time, in the parent, before the others (:class:`Schedule`), so a big cell
is counted once, not once per worker. :func:`check` refuses a run whose peak exceeds the limit
(a cell too big even alone) and names the stage that dominates and the key that shrinks it.

Times are rough (a factor of a few either way): a learner's pass costs ``s_round T + s_op ops``
with ``ops`` from its cost formula (evaluations times numbers per drawn parameter, kernel values
times ``D``, factorization flops) and constants measured on one core of the project's 2-core
x86-64 build machine (each learner's ``seconds`` hook; :data:`GENERIC_RATE`; the batch
references' LAPACK flops at :data:`ilnrun.learners.base.SECONDS_PER_LAPACK_FLOP`, within x2 of
fits measured at three sizes: tests/test_estimates.py).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from .budget import Budget, derive, setting_size
from .config import grid
from .config.keys import m_test_value
from .config.typed import (
    BudgetConfig,
    EvaluationConfig,
    Experiment,
    FeatureMapConfig,
    LimitsConfig,
)
from .datasets import DATASETS
from .features import FEATURE_MAPS
from .learners import LEARNERS
from .learners.estimate_draws import (
    INVERSE_CDF_V1,
    INVERSE_CDF_V2,
    MULTINOMIAL,
    TABLE_BYTES,
    table_size,
)
from .theory import (
    KERNEL_DIAGNOSTICS_MAX_T,
    PRIMAL_EVALUATION_ABOVE_T,
    kernel_diagnostics_bytes,
)
from .threads import usable_cpus

PROCESS_BYTES = 200 * 2**20  # a worker after its imports (measured ~75 MiB; sklearn adds more)
INSTANCE_CACHE = 2  # dataset instances a process keeps (ilnrun.cell._CACHE_SIZE)
ESTIMATE_CHUNK_PAIRS = 1 << 20  # KernelExpansion.predict_estimated's (point, sample) pairs
EXPANSION_BLOCK = 1 << 22  # FeatureMap.expansion's values per block
BUILD_COPIES = 3  # a dataset's arrays while they are made (draws / read columns, shuffle, scaling)
GiB = 2**30


def machine_memory_gb() -> float:
    """Physical memory of this machine in GiB (8 if it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GiB
    except (ValueError, OSError, AttributeError):
        return 8.0


@dataclass(frozen=True)
class Stage:
    """One allocation of a cell: what it is, its bytes, the config key that shrinks it, and
    whether it is held for the whole cell in each cached instance (``cached``) or only while
    its stage runs."""

    what: str
    bytes: int
    knob: str
    cached: bool = False


@dataclass(frozen=True)
class CellEstimate:
    """The estimate for one learner setting on one dataset setting."""

    method: str
    setting: dict
    sizes: tuple[int, int, int, int]  # T, n_val, n_test, D
    stages: tuple[Stage, ...]
    instances: int  # instances a worker may hold at once
    seconds: float
    evaluations: int
    diagnostics_n: int
    hyper: dict | None = None  # the learner setting (grid.method_grid's)
    per_round: int | None = None  # the budget axis value (None: a setting without a budget)

    @property
    def cached(self) -> int:
        return sum(s.bytes for s in self.stages if s.cached)

    @property
    def transient(self) -> Stage:
        return max((s for s in self.stages if not s.cached), key=lambda s: s.bytes)

    @cached_property
    def worker(self) -> int:
        """Bytes of the process that runs this cell (its own interpreter included; computed once
        per estimate: a schedule reads it for every cell)."""
        return PROCESS_BYTES + self.instances * self.cached + self.transient.bytes

    def dominant(self) -> Stage:
        """The stage that weighs most in :attr:`worker` (cached stages counted per instance)."""
        return max(self.stages, key=lambda s: s.bytes * (self.instances if s.cached else 1))


def total_bytes(worker: int, jobs: int) -> int:
    """``jobs`` workers of ``worker`` bytes each, and the parent process when they are separate
    processes (``jobs`` > 1); one process runs the cells itself at ``jobs`` = 1."""
    return worker * jobs + (PROCESS_BYTES if jobs > 1 else 0)


# ----------------------------------------------------------------------------------------------
# sizes


def setting_sizes(setting: Mapping, data_used: Sequence[Mapping] = ()) -> tuple[int, int, int, int]:
    """``(T, n_val, n_test, D)`` of a dataset setting: as configured, or for a table as counted
    (``data_used``, the resolved config's entry: the split sizes and the feature columns of the
    rows actually read)."""
    used = _data_used(setting, data_used)
    if used is not None:
        s = used["splits"]
        return int(s["train"]), int(s["val"]), int(s["test"]), len(used["features"])
    T = int(setting["T"])
    n_val = int(setting.get("n_val", 0))
    n_test = setting.get("n_test", 0)
    return T, n_val, int(n_test) if isinstance(n_test, int) else 0, int(setting.get("D", 1))


def _data_used(setting: Mapping, data_used: Sequence[Mapping]) -> Mapping | None:
    """The ``data_used`` entry of ``setting`` (entries carry the setting's axis values)."""
    for d in data_used:
        if all(setting.get(k) == v for k, v in d.items() if k not in ("rows", *_DESCRIBED)):
            return d
    return None


_DESCRIBED = ("target", "features", "splits", "inputs")


@dataclass(frozen=True)
class DataSize:
    """One dataset setting as the cost model sees it: the setting, its sizes ``(T, n_val,
    n_test, D)`` (:func:`setting_sizes`), for a table the rows it reads (``read_rows``;
    ``None``: no table) and the bytes of the files it names (their text is held while it is
    parsed)."""

    setting: dict
    sizes: tuple[int, int, int, int]
    read_rows: int | None
    file_bytes: int


@dataclass(frozen=True)
class Workload:
    """What the cost model reads from a resolved config, read once (:meth:`of`): the feature
    map, the evaluation settings, the budget, the limits, the repetitions and the engine as
    their typed parts, every dataset setting with its sizes (:class:`DataSize`), and every
    learner's grid of settings (:func:`ilnrun.config.grid.method_grid`)."""

    feature_map: FeatureMapConfig
    evaluation: EvaluationConfig
    budget: BudgetConfig
    limits: LimitsConfig
    repetitions: int
    engine: str
    data: tuple[DataSize, ...]
    methods: tuple[tuple[str, tuple[dict, ...]], ...]

    @classmethod
    def of(cls, exp: Experiment) -> Workload:
        """The workload of a resolved experiment (its ``data_used`` and ``inputs``, recorded by
        validation, give a table's sizes and files)."""
        used = exp.get("data_used", [])
        files = exp.get("inputs", {})
        data = []
        for setting in grid.dataset_settings(exp):
            sizes = setting_sizes(setting, used)
            entry = _data_used(setting, used)
            read = None
            if entry is not None:
                T, n_val, n_test, _ = sizes
                read = int(entry.get("rows", T + n_val + n_test))
            file_bytes = sum(
                int(files[v].get("bytes", 0))
                for v in setting.values()
                if isinstance(v, str) and v in files
            )
            data.append(DataSize(setting, sizes, read, file_bytes))
        return cls(
            feature_map=exp.feature_map,
            evaluation=exp.evaluation,
            budget=exp.budget,
            limits=exp.limits,
            repetitions=int(exp.repetitions),
            engine=exp.engine,
            data=tuple(data),
            methods=tuple(
                (name, tuple(grid.method_grid(name, params)))
                for name, params in exp.methods.items()
            ),
        )

    @property
    def names(self) -> list[str]:
        """The configured learners, in the config's order."""
        return [name for name, _ in self.methods]

    def sizes_of(self, setting: Mapping) -> tuple[int, int, int, int]:
        """``(T, n_val, n_test, D)`` of one of the workload's dataset settings (a cell's
        ``data``)."""
        for d in self.data:
            if d.setting == setting:
                return d.sizes
        raise KeyError(f"not a dataset setting of this config: {setting}")


def _rows_knob(setting: dict, T: int, n_val: int, n_test: int) -> str:
    """The dataset key that holds most rows."""
    n, key = max((n_test, "n_test"), (T, "T"), (n_val, "n_val"))
    what = f"dataset.{key}"
    return what + (" (n_test: rest takes every row left)" if setting.get(key) == "rest" else "")


# ----------------------------------------------------------------------------------------------
# stages


def _instance_stages(
    fmap_kind: str, data: DataSize, kernel_blocks: bool, regret: bool
) -> list[Stage]:
    """What building and keeping one instance of a dataset setting costs."""
    fmap = FEATURE_MAPS[fmap_kind]
    setting = data.setting
    T, n_val, n_test, D = data.sizes
    rows = T + n_val + n_test
    shape = "dataset.D" if "D" in setting else "dataset.features"
    rows_knob = _rows_knob(setting, T, n_val, n_test)
    out = [Stage("dataset arrays", 8 * rows * (D + 1), f"{rows_knob} or {shape}", cached=True)]
    read = 0
    if data.read_rows is not None:  # a table: every column of every row read, then the copies
        read = 8 * data.read_rows * (D + 2) + 3 * data.file_bytes
    if DATASETS[setting["kind"]].needs_kernel:  # labels k(X, X_support) c (the teacher)
        if fmap.has_kernel:
            read += fmap.kernel_copies * 8 * rows * int(setting.get("sparsity", T))
        else:  # FeatureMap.kernel_estimate: two sums, and blocks of about 2^22 numbers
            read += 8 * (2 * rows * int(setting.get("sparsity", T)) + 4 * EXPANSION_BLOCK)
    out.append(
        Stage(
            "building the dataset",
            read + BUILD_COPIES * 8 * rows * (D + 1),
            f"{rows_knob} or {shape}",
        )
    )
    p = fmap.primal_dim(D)
    if fmap.has_kernel and kernel_blocks and not (p is not None and T > PRIMAL_EVALUATION_ABOVE_T):
        big = max(n_val, n_test)
        knob = f"dataset.{'n_test' if n_test >= n_val else 'n_val'} or dataset.T"
        out.append(
            Stage("kernel blocks k(X_val|X_test, X_train)", 8 * (n_val + n_test) * T, knob, True)
        )
        copies = fmap.kernel_copies
        out.append(Stage("forming a kernel block", 8 * (copies - 1) * big * T, knob))
    if regret:
        knob = "evaluation.regret_B (null: no regret) or dataset.T"
        if p is None or p > T:  # theory.py TrainKernel: the T x T matrix route
            out.append(Stage("training kernel T x T (regret)", 8 * T * T, knob, cached=True))
            out.append(
                Stage(
                    "eigendecomposition (regret)", kernel_diagnostics_bytes(T, p) - 8 * T * T, knob
                )
            )
        else:
            out.append(Stage("primal Gram p x p (regret)", kernel_diagnostics_bytes(T, p), knob))
    return out


def _estimate_stage(
    work: Workload, data: DataSize, every: bool = False, m: int | None = None
) -> Stage:
    """Algorithm-2 test estimates (``KernelExpansion.predict_estimated``): per chunk of
    ``rows = min(n, 2^20 // m_test)`` points the multinomial counts and their tiled indices
    (``2 rows T`` integers; ``estimate_draws: inverse_cdf_v1``: the prefix sums and the index
    table instead, ``estimate_draws.table_size``), and ``rows m_test`` pairs with their
    parameters and gathered inputs (about as many numbers as ``w``); ``n`` is
    ``n_test_estimated``, or every validation / test point (``every``: a map without a
    closed-form kernel, or ``evaluation.kernel: free``, evaluates kernel expansions only so);
    ``m`` the cell's ``m_test`` (the largest of ``m_test_sweep`` where larger)."""
    fmap = FEATURE_MAPS[work.feature_map.kind]
    T, n_val, n_test, D = data.sizes
    ev = work.evaluation
    m = max([int(ev.m_test) if m is None else m, *ev.m_test_sweep])
    n = ev.n_estimated(n_test)
    if every:
        n = max(n_val, n_test)
    spec = work.feature_map.raw
    # a map with a hidden layer takes proportionally fewer pairs a chunk (predict_estimated)
    rows = min(max(1, n), max(1, ESTIMATE_CHUNK_PAIRS // fmap.hidden_width(spec) // m))
    pairs = rows * m
    count_bytes = 16 * rows * T
    if ev.estimate_draws != MULTINOMIAL:
        count_bytes = 8 * T + TABLE_BYTES * table_size(T, pairs)
    # w, x_i's numbers it reads (and a hidden layer's values)
    pair_bytes = 8 * pairs * (2 * fmap.param_floats(D, spec) + 6)
    knob = "evaluation.m_test" if pair_bytes >= count_bytes else "evaluation.n_test_estimated"
    return Stage("Algorithm-2 test estimates", count_bytes + pair_bytes, knob)


def _learner_knob(name: str, h: dict, args: dict) -> str:
    spec = LEARNERS[name]
    if spec.takes_budget(h):
        return "budget.dsgd_k"
    if h.get("preset") == "theory":
        return f"methods.{name}.c or methods.{name}.B"
    if "rank" in args:
        return f"methods.{name}.rank"
    return f"dataset.T (or leave out methods.{name})"


def estimates(work: Workload) -> list[CellEstimate]:
    """One estimate per (dataset setting, learner setting, budget) of a workload.

    The last workload's estimates are kept (:data:`_LAST`) and given again for an equal one
    whose learners, feature map and datasets are the same objects and whose compiled kernels run
    alike (the learners' ``seconds`` hooks ask): validation refuses by them and ``ilnrun
    validate`` prints them, so a config's estimates are made once, not once for each."""
    from .learners.compiled import held

    with held():  # the learners' seconds hooks ask whether the kernels run: asked once
        key = _memo_key(work)
        last = _LAST[0] if _LAST else None  # (one read: a pair of key and estimates)
        if last is not None and _same_key(last[0], key):
            return list(last[1])
        out = _estimates(work)
    _LAST[:] = [(key, out)]
    return list(out)


# the last workload's key (:func:`_memo_key`) and estimates (:func:`estimates`), as one pair
_LAST: list[tuple] = []


def _memo_key(work: Workload) -> tuple:
    """What a workload's estimates depend on: the workload, and the registry entries and
    compiled-kernel availability its hooks read (compared by identity: :func:`_same_key`)."""
    from .learners.compiled import available

    plugins = (
        FEATURE_MAPS.get(work.feature_map.kind),
        *(LEARNERS.get(n) for n in work.names),
        *(DATASETS.get(d.setting.get("kind")) for d in work.data),
    )
    return work, plugins, available()


def _same_key(a: tuple, b: tuple) -> bool:
    return (
        a[2] == b[2]
        and len(a[1]) == len(b[1])
        and all(x is y for x, y in zip(a[1], b[1], strict=True))
        and a[0] == b[0]
    )


def _estimates(work: Workload) -> list[CellEstimate]:
    """:func:`estimates`, made with each part computed once for what it depends on: a dataset
    setting's stages, numbers per drawn parameter and kernel-value seconds once per setting; a
    learner setting's budget size, ``fit`` keywords, Algorithm-2 samples and training
    evaluations once per budget and sizes ``(T, n_val + n_test)`` (the settings of a dataset axis
    share them); its pass's memory once per those and numbers per drawn parameter; the
    evaluation's stage and seconds once per dataset setting, learner and ``m_test``. Every
    number is the one the hooks give, in the same order of operations."""
    kind = work.feature_map.kind
    fmap = FEATURE_MAPS[kind]
    ev = work.evaluation
    names = work.names
    free = ev.free  # no kernel block is formed
    blocks = not free and any(LEARNERS[n].kernel_blocks for n in names)
    regret = ev.regret_B is not None and any(
        LEARNERS[n].exact_online_loss is not None for n in names
    )
    instances = min(INSTANCE_CACHE, len(work.data) * work.repetitions)
    every = free or not fmap.has_kernel
    expansion = Stage("feature-expansion evaluation", 8 * fmap.kernel_copies * EXPANSION_BLOCK, "-")
    per_round = work.budget.per_round
    derived: dict[tuple, Budget] = {}  # (k, T, n_eval) -> the matched budget
    # (method, setting index, k, T, n_eval) -> (size, fit keywords, m_test, knob, training
    # evaluations, the pass's budgeted evaluations, {w: the pass's stage})
    settled: dict[tuple, tuple] = {}
    out = []
    for data in work.data:
        setting = data.setting
        sizes = data.sizes
        T, n_val, n_test, D = sizes
        n_eval = n_val + n_test
        shared = tuple(_instance_stages(kind, data, blocks, regret))
        # CellEstimate.worker's parts that the setting's own stages do not change
        held_bytes = PROCESS_BYTES + instances * sum(s.bytes for s in shared if s.cached)
        shared_transient = max((s.bytes for s in shared if not s.cached), default=0)
        w = fmap.param_floats(D, work.feature_map.raw)
        kv = kernel_value_seconds(kind, D)
        p = fmap.primal_dim(D)
        test_stages: dict[int, Stage] = {}  # m_test -> the Algorithm-2 stage
        for name, settings in work.methods:
            spec = LEARNERS[name]
            hook = spec.seconds
            own_blocks = spec.kernel_blocks
            diag_n = 0
            if regret and spec.exact_online_loss is not None:
                diag_n = T if p is None else min(T, p)
            tails: dict[int, tuple] = {}  # m_test -> (its last stage or None, eval seconds)
            for i, h in enumerate(settings):
                takes = spec.takes_budget(h)
                for k in per_round if takes else per_round[:1]:
                    ids = (name, i, k, T, n_eval) if takes else (name, i, None, T, 0)
                    known = settled.get(ids)
                    if known is None:
                        known = settled[ids] = _settle(
                            work, name, h, k if takes else None, T, n_eval, derived
                        )
                    size, args, m_test, knob, evals, pass_evals, passes = known
                    own = passes.get(w)
                    if own is None:
                        own = passes[w] = Stage(
                            f"{name} pass", spec.memory_bytes(size, T, w, args), knob
                        )
                    tail = tails.get(m_test)
                    if tail is None:
                        last = None
                        if own_blocks and (spec.estimated_test or every):
                            # Algorithm 2 at test time (every point without the kernel)
                            last = test_stages.get(m_test)
                            if last is None:
                                last = test_stages[m_test] = _estimate_stage(
                                    work, data, every, m_test
                                )
                        elif not own_blocks:
                            last = expansion
                        secs = _eval_seconds(ev, sizes, w, spec, diag_n, m_test, every)
                        tail = tails[m_test] = (last, secs)
                    last, eval_secs = tail
                    transient = max(shared_transient, own.bytes)
                    if last is None:
                        stages = (*shared, own)
                    else:
                        stages = (*shared, own, last)
                        transient = max(transient, last.bytes)
                    # a map's own elementwise cost per evaluation (Fourier's cosine), on top
                    extra = pass_evals * fmap.eval_seconds
                    if hook is not None:
                        secs = float(hook(size or 0, T, w, args, kv)) + extra
                    else:
                        secs = _pass_seconds(spec, size, T, w, args, kv, extra)
                    e = CellEstimate(
                        name,
                        setting,
                        (T, n_val, n_test, D),
                        stages,
                        instances,
                        secs + eval_secs,
                        evals,
                        diag_n,
                        h,
                        k if takes else None,
                    )
                    # its worker (a cached property), from the parts known here: the same sum
                    e.__dict__["worker"] = held_bytes + transient
                    out.append(e)
    return out


def _settle(
    work: Workload, name: str, h: dict, k: int | None, T: int, n_eval: int, derived: dict
) -> tuple:
    """What :func:`_estimates` knows of learner ``name``'s setting ``h`` at budget ``k``
    (``None``: a setting without a budget) for ``T`` rounds and ``n_eval`` points scored,
    whatever the other sizes: its size, ``fit`` keywords, Algorithm-2 samples, knob, training
    evaluations, the pass's budgeted evaluations, and a mapping for its pass's stage by numbers
    per drawn parameter. ``derived``: the matched budgets so far, by ``(k, T, n_eval)``."""
    spec = LEARNERS[name]
    budget = spec.budget
    size = None
    if k is not None:
        matched = derived.get((k, T, n_eval))
        if matched is None:
            matched = derived[(k, T, n_eval)] = derive(work.budget.match, k, T, n_eval)
        size = setting_size(matched, name, h)
    args = spec.fit_arguments(h, size, T)
    if budget is not None:
        size = args.get(budget.name, size)
    evals = T * (T - 1) // 2
    pass_evals = 0
    if budget is not None and size:
        evals = pass_evals = budget.expected_for(size, T, args)["train_evals"]
    m_test = m_test_value(work.evaluation.m_test, T, args, h)
    return size, args, m_test, _learner_knob(name, h, args), evals, pass_evals, {}


# ----------------------------------------------------------------------------------------------
# time

# Generic constants (a learner declares its own ``seconds`` hook): per round, and per evaluation
# and number of ``w``; the LAPACK, matrix-product and Algorithm-2 rates, all measured on one
# core of the project's 2-core x86-64 build machine.
GENERIC_RATE = (5e-5, 2e-8)
EIGH_SECONDS_PER_N3 = 1.75e-10  # numpy's eigh with vectors: 1.4 s at n = 2 000 (theory.py)
SECONDS_PER_GEMM_FLOP = 1e-10  # a kernel block's matrix product
SECONDS_PER_PAIR = 3.5e-9  # Algorithm-2 test estimates, per pair and 4 + w (figure1: 17 ns)
# The "4" of that rate for each stream of evaluation.estimate_draws (learners/estimate_draws.py):
# what a pair costs beyond the numbers of its w. inverse_cdf_v1 against multinomial at figure1's
# setting (bench/estimate_draws.py, compiled, T = 200, D = 800, 200 and 500 points): x0.25-0.46
# of the CPU time per call for m = 25 .. 1 000 (x0.46 at figure1's m_test = 1 000), so
# (c + 1) / (4 + 1) = 0.4 gives c = 1; with ReLU features in 80 dimensions the two cost the same
# within 5% (the w's numbers dominate: 81 / 84 by the formula).
# inverse_cdf_v2 against inverse_cdf_v1 at the same setting: x0.55 of the CPU time per call at
# m_test = 1 000 on 200 points (x0.49 on 500; x0.57-0.75 at m = 25 .. 404), so
# (c + 1) / (1 + 1) = 0.55 gives c = 0.1.
ESTIMATE_DRAW_WEIGHT = {MULTINOMIAL: 4, INVERSE_CDF_V1: 1, INVERSE_CDF_V2: 0.1}
# FeatureMap.kernel_estimate of a map with a hidden layer, per point, draw and hidden unit beyond
# its matrix product (random_net, h = 16: 700 points x 20 000 draws in 3.6 s)
SECONDS_PER_HIDDEN_VALUE = 1e-8


def seconds(
    name: str, size: int | None, T: int, D: int, w: int, args: dict, fmap_kind: str
) -> float:
    """Rough seconds of one pass of learner ``name``: its spec's ``seconds`` hook, else
    :data:`GENERIC_RATE` on its evaluations (budgeted) or its ``T (T - 1) / 2`` kernel
    values."""
    spec = LEARNERS[name]
    kv = kernel_value_seconds(fmap_kind, D)
    b = spec.budget
    evals = b.expected_for(size, T, args)["train_evals"] if b is not None and size else 0
    return _pass_seconds(spec, size, T, w, args, kv, evals * FEATURE_MAPS[fmap_kind].eval_seconds)


def _pass_seconds(spec, size: int | None, T: int, w: int, args: dict, kv: float, extra: float):
    """:func:`seconds` of learner ``spec`` given the seconds of one kernel value ``kv`` and the
    map's own elementwise seconds over the pass's evaluations (``extra``: Fourier's cosine, on
    top of the learner's)."""
    if spec.seconds is not None:
        return float(spec.seconds(size or 0, T, w, args, kv)) + extra
    per_round, per_op = GENERIC_RATE
    evals = spec.budget.expected(size, T)["train_evals"] if spec.budget is not None and size else 0
    if evals:
        return per_round * T + per_op * evals * (4 + w) + extra
    return per_round * T + T * (T - 1) // 2 * kv


def kernel_value_seconds(fmap_kind: str, D: int) -> float:
    """Rough seconds of one kernel value in a block: ``2 D`` flops and the map's elementwise
    passes (~15 ns each; kernel OGD's rows measured 0.8 s (coordinate) and 2.3 s (relu) at
    T = 4 000, D = 10 on a loaded machine, 5 ms at T = 200, D = 800 on an idle one)."""
    return 2 * D * SECONDS_PER_GEMM_FLOP + FEATURE_MAPS[fmap_kind].kernel_copies * 1.5e-8


def _eval_seconds(
    ev: EvaluationConfig,
    sizes: tuple[int, int, int, int],
    w: int,
    spec,
    diag_n: int,
    m_test: int | None = None,
    every: bool = False,
) -> float:
    """Rough seconds of a cell's own evaluation and regret: Algorithm-2 estimates (``2 m_test``
    evaluations a point, ``m_test`` the cell's: on the first ``n_test_estimated`` test and
    validation points for a learner with an averaged predictor, and on every validation and test
    point when a kernel expansion is scored without the kernel, ``every``; ``2 m`` a point on
    the first ``n_test_estimated`` test points for each ``m`` of ``m_test_sweep``) and the
    replay of the exact online predictions (``T^2``, or ``T p`` in the primal). What an
    instance computes once for its cells is :func:`instance_seconds`."""
    T, n_val, n_test, D = sizes
    n_est = ev.n_estimated(n_test)
    m = int(ev.m_test) if m_test is None else m_test
    s = 0.0
    pairs = 0
    if spec.estimated_test:
        pairs += 2 * m * n_est
    if spec.kernel_blocks:
        if every:
            pairs += 2 * m * (n_val + n_test)
        pairs += sum(2 * int(ms) * n_est for ms in ev.m_test_sweep)
    s += SECONDS_PER_PAIR * pairs * (ESTIMATE_DRAW_WEIGHT[ev.estimate_draws] + w)
    if diag_n:
        s += 1e-9 * T * diag_n
    return s


def instance_seconds(
    feature_map: FeatureMapConfig, data: DataSize, blocks: bool, diag_n: int
) -> float:
    """Rough seconds of what one instance computes once for its cells: the kernel blocks
    (``2 D`` flops a value and the map's elementwise passes) and the regret's comparator (an
    eigendecomposition of order ``diag_n``: :data:`EIGH_SECONDS_PER_N3`)."""
    fmap = FEATURE_MAPS[feature_map.kind]
    setting = data.setting
    T, n_val, n_test, D = data.sizes
    s = 0.0
    if blocks and fmap.has_kernel:
        s += (n_val + n_test) * T * kernel_value_seconds(fmap.name, D)
    if DATASETS[setting["kind"]].needs_kernel and not fmap.has_kernel:
        # a Monte-Carlo kernel in the labels (the teacher): every point by every draw
        spec = feature_map.raw
        draws = int(setting.get("kernel_samples", 0))
        per = fmap.param_floats(D, spec) * SECONDS_PER_GEMM_FLOP * 2
        per += fmap.hidden_width(spec) * SECONDS_PER_HIDDEN_VALUE
        s += draws * (T + n_val + n_test + int(setting.get("sparsity", 0))) * per
    return s + EIGH_SECONDS_PER_N3 * diag_n**3


# ----------------------------------------------------------------------------------------------
# the check


def largest_cell(work: Workload, est: list[CellEstimate] | None = None) -> dict:
    """The largest cell's estimates: ``memory`` (bytes of one worker running it), its training
    ``evaluations``, ``diagnostics_n`` (the order of the largest matrix the regret decomposes,
    0: none) and the ``estimate`` itself (``None`` for a config without cells). ``est``:
    :func:`estimates` of ``work`` when already made (here and below)."""
    est = estimates(work) if est is None else est
    if not est:
        return {"memory": 0, "evaluations": 0, "diagnostics_n": 0, "estimate": None}
    worst = max(est, key=lambda e: e.worker)
    return {
        "memory": worst.worker,
        "evaluations": max(e.evaluations for e in est),
        "diagnostics_n": max(e.diagnostics_n for e in est),
        "estimate": worst,
    }


def cap_gb(limits: LimitsConfig) -> float:
    """``limits.max_memory_gb``, or 80% of this machine's memory."""
    return limits.max_memory_gb or 0.8 * machine_memory_gb()


def _each_cell(cells: Sequence, est: list[CellEstimate]) -> list[CellEstimate]:
    """The estimate of each of ``cells``, in order: the one of the same dataset setting and
    hyperparameters (compared as JSON), learner and budget. The cells of a grid share their
    setting and hyperparameter mappings (:func:`ilnrun.config.grid.cells`), so each mapping is
    written once (by object, all alive here), not once per cell."""
    text: dict[int, str] = {}

    def key(setting: dict, method: str, hyper: dict | None, per_round: int | None) -> tuple:
        for part in (setting, hyper):
            if id(part) not in text:
                text[id(part)] = json.dumps(part, sort_keys=True, default=str)
        return text[id(setting)], text[id(hyper)], method, per_round

    by_key = {key(e.setting, e.method, e.hyper, e.per_round): e for e in est}
    return [by_key[key(c.data, c.method, c.hyper, c.per_round)] for c in cells]


def cell_estimates(
    work: Workload, cells: Sequence, est: list[CellEstimate] | None = None
) -> dict[str, CellEstimate]:
    """Each cell's estimate (by cell id; ``cells``: the config's, :func:`ilnrun.config.cells`)."""
    each = _each_cell(cells, estimates(work) if est is None else est)
    return {c.id: e for c, e in zip(cells, each, strict=True)}


def cell_bytes(
    work: Workload, cells: Sequence, est: list[CellEstimate] | None = None
) -> dict[str, int]:
    """Bytes of the process running each cell (by cell id): its estimate's
    :attr:`CellEstimate.worker`."""
    return {i: e.worker for i, e in cell_estimates(work, cells, est).items()}


@dataclass(frozen=True)
class Schedule:
    """How the cells of a run share the memory with ``jobs`` workers (docs/budgets.md,
    "Memory").

    A cell of which ``jobs`` at once (and the parent process) would not fit
    ``limits.max_memory_gb`` runs **one at a time** (``one_at_a_time``: the ids), in the parent
    process before the others, with the workers idle (:func:`ilnrun.engines.local.execute_local`);
    the other cells run ``jobs`` at once. The peak is the larger of the two phases: the largest
    cell run alone (``alone`` bytes) beside ``jobs`` idle workers, and ``jobs`` workers each
    holding the largest of the other cells (``shared`` bytes) beside the parent."""

    jobs: int
    one_at_a_time: frozenset[str]
    alone: int
    shared: int

    @property
    def peak(self) -> int:
        alone = self.alone + (self.jobs * PROCESS_BYTES if self.jobs > 1 else 0)
        return max(alone if self.one_at_a_time else 0, total_bytes(self.shared, self.jobs))


def schedule(
    work: Workload, jobs: int, cells: Sequence, est: list[CellEstimate] | None = None
) -> Schedule:
    """The :class:`Schedule` of ``cells`` (the config's, or some of them) for ``jobs`` workers,
    capped to the cells: the cells whose ``jobs`` copies exceed ``limits.max_memory_gb`` run one
    at a time (none at ``jobs`` = 1)."""
    jobs = max(1, min(int(jobs), len(cells)))
    each = _each_cell(cells, estimates(work) if est is None else est) if cells else []
    largest = max((e.worker for e in each), default=0)
    cap = cap_gb(work.limits) * GiB
    if jobs == 1 or total_bytes(largest, jobs) <= cap:
        # no cell runs alone: the largest cell's process is all (no cell ids needed; the cells
        # of one id are one setting, of one estimate)
        return Schedule(jobs, frozenset(), 0, largest)
    sizes = {c.id: e.worker for c, e in zip(cells, each, strict=True)}  # cell_bytes
    alone = frozenset(i for i, w in sizes.items() if jobs > 1 and total_bytes(w, jobs) > cap)
    return Schedule(
        jobs,
        alone,
        max((sizes[i] for i in alone), default=0),
        max((w for i, w in sizes.items() if i not in alone), default=0),
    )


def check(
    work: Workload,
    problems: list,
    jobs: int = 1,
    cells: Sequence = (),
    est: list[CellEstimate] | None = None,
) -> Schedule | None:
    """Refuse what cannot run here: the regret's kernel-matrix route past its limit, or a run
    whose peak (:class:`Schedule`: ``jobs`` workers capped to the cells, a cell of which
    ``jobs`` copies would not fit run one at a time) is estimated above
    ``limits.max_memory_gb`` (default 80% of this machine's memory). The message names the
    stage that dominates the largest cell and the key that shrinks it (``--jobs`` when the
    largest cell fits alone). Returns the schedule (``None`` when refused or without cells)."""
    est = estimates(work) if est is None else est  # made once for every question below
    largest = largest_cell(work, est)
    worst = largest["estimate"]
    if worst is None:
        return None
    if largest["diagnostics_n"] > KERNEL_DIAGNOSTICS_MAX_T:
        n = largest["diagnostics_n"]
        problems.append(
            (
                "evaluation.regret_B",
                f"the regret needs the {n:,} x {n:,} training kernel and its O(T^3) "
                f"eigendecomposition, beyond the limit T = {KERNEL_DIAGNOSTICS_MAX_T:,} of the "
                f"kernel-matrix diagnostics (feature map {work.feature_map.kind!r} has no "
                "finite primal of smaller dimension); lower T or set evaluation.regret_B to null",
            )
        )
        return None
    cap = cap_gb(work.limits)
    one = total_bytes(worst.worker, 1) / GiB
    sched = schedule(work, jobs, cells, est) if jobs > 1 and one <= cap else schedule(work, 1, [])
    gb = max(one, sched.peak / GiB)
    if gb <= cap and math.isfinite(gb):
        return sched
    top = worst.dominant()
    T, n_val, n_test, D = worst.sizes
    where = f"{worst.method} at T={T}, n_val={n_val}, n_test={n_test}, {D} input dimensions"
    if one <= cap:  # alone it fits: the idle workers beside it do not
        fit = max(1, int((cap * GiB - worst.worker) // PROCESS_BYTES))
        hint = f"lower --jobs (at most {fit} workers fit)"
        what = f"~{worst.worker / GiB:,.3g} GiB run alone beside {sched.jobs} idle workers"
    else:
        hint = f"lower {top.knob}"
        what = f"{top.what} ~{top.bytes / GiB:,.3g} GiB" + (
            f" in each of {worst.instances} cached instances"
            if top.cached and worst.instances > 1
            else ""
        )
    problems.append(
        (
            "limits.max_memory_gb",
            f"the run is estimated to need {gb:,.3g} GiB of memory, more than {cap:,.3g} GiB "
            f"(limits.max_memory_gb; null = 80% of this machine); the largest cell ({where}) "
            f"is dominated by {what}: {hint}",
        )
    )
    return None


def workers(engine: str, jobs: int, backend: str = "auto", scheduler: str | None = None) -> int:
    """The processes that hold a cell at once for ``--jobs jobs``: one for the jax ``engine``
    (its batches run in-process) and for a remote dask scheduler (its workers are elsewhere),
    else ``jobs`` capped to this machine's CPUs (:func:`check` caps them to the cells)."""
    if engine == "jax" or (backend == "dask" and scheduler):
        return 1
    return max(1, min(int(jobs), usable_cpus()))


def check_run(
    work: Workload,
    cells: Callable[[], Sequence],
    jobs: int,
    backend: str = "auto",
    scheduler: str | None = None,
) -> Schedule:
    """The memory check for ``jobs`` workers on this machine (capped to its CPUs and to the
    cells; one process for the jax engine, whose batches run in-process, and for a remote dask
    scheduler, whose workers are elsewhere); raises :class:`~ilnrun.params.ConfigError`.
    ``cells`` makes the config's cells (only when several workers are checked).
    Returns the :class:`Schedule` (its ``one_at_a_time``: the cells to run one at a time)."""
    from .params import ConfigError

    jobs = workers(work.engine, jobs, backend, scheduler)
    if jobs == 1:
        return Schedule(1, frozenset(), 0, 0)  # checked when the config was resolved
    problems: list = []
    sched = check(work, problems, jobs=jobs, cells=cells())
    if problems:
        raise ConfigError(problems)
    return sched if sched is not None else Schedule(jobs, frozenset(), 0, 0)


def one_at_a_time_note(limits: LimitsConfig, sched: Schedule) -> str:
    """The line that says which cells run one at a time (``sched``, :func:`check_run`'s), and
    why."""
    return (
        f"note: {len(sched.one_at_a_time)} cell(s) estimated at up to "
        f"~{sched.alone / GiB:,.3g} GiB each run one at a time in this process before the others "
        f"({sched.jobs} of them at once would exceed {cap_gb(limits):,.3g} GiB, "
        f"limits.max_memory_gb); the other cells run {sched.jobs} at once"
    )


def duration(s: float) -> str:
    """Seconds as ``0.3 s``, ``12 s``, ``4.2 min`` or ``3.1 h``."""
    if s < 60:
        return f"{s:.2g} s"
    return f"{s / 60:.2g} min" if s < 3600 else f"{s / 3600:,.2g} h"


def summary_lines(
    work: Workload, jobs: int, cells: Sequence | None, est: list[CellEstimate] | None = None
) -> list[str]:
    """``ilnrun validate``'s lines: each learner's estimated time and memory per cell (its
    largest cell), the largest cell, the memory of ``jobs`` workers and the time of all cells.
    ``cells``: all of the config's cells, or ``None`` at ``jobs`` = 1, where no cell runs one
    at a time and the cells are the estimates' (``repetitions`` each: they are not listed);
    ``est``: the :func:`estimates`, when already made."""
    est = estimates(work) if est is None else est
    if not est:
        return []
    if cells is None and jobs != 1:
        raise ValueError("summary_lines: the cells are needed for more than one worker")
    lines = [
        "estimated per cell (each learner's largest; rough: times from rates measured on one "
        "core, within a factor of a few; memory: the process running it, cached instances "
        "included):"
    ]
    by_name: dict[str, list[CellEstimate]] = {name: [] for name in work.names}
    # each dataset setting's (by object: the estimates share them) largest regret order
    diag: dict[int, list] = {}
    for e in est:
        if e.method in by_name:
            by_name[e.method].append(e)
        seen = diag.get(id(e.setting))
        if seen is None:
            diag[id(e.setting)] = [e.setting, e.diagnostics_n]
        elif e.diagnostics_n > seen[1]:
            seen[1] = e.diagnostics_n
    for name in work.names:
        mine = by_name[name]
        m = max(mine, key=lambda e: e.worker)
        t = max(mine, key=lambda e: e.seconds)
        top = m.dominant()
        lines.append(
            f"  {name}: ~{duration(t.seconds)} (T={t.sizes[0]:,}), ~{m.worker / 2**20:,.0f} MiB "
            f"(most: {top.what}, ~{top.bytes / 2**20:,.0f} MiB)"
        )
    largest = largest_cell(work, est)
    n_cells = work.repetitions * len(est)
    blocks = any(LEARNERS[n].kernel_blocks for n in work.names)
    once = sum(
        instance_seconds(
            work.feature_map,
            d,
            blocks,
            max((n for setting, n in diag.values() if setting == d.setting), default=0),
        )
        for d in work.data
    )
    cpu = work.repetitions * (sum(e.seconds for e in est) + once)
    if cells is None:  # one worker: the largest cell's process is all
        sched = Schedule(1, frozenset(), 0, max(e.worker for e in est))
    else:
        sched = schedule(work, jobs, cells, est)
    # the cells run one at a time add their whole time; the others share the jobs workers
    alone = (
        sum(
            e.seconds
            for i, e in cell_estimates(work, cells, est).items()
            if i in sched.one_at_a_time
        )
        if sched.one_at_a_time
        else 0
    )
    wall = alone + (cpu - alone) / jobs
    lines.append(
        f"cells: {n_cells if cells is None else len(cells)}; "
        f"largest cell: ~{largest['memory'] / 2**20:,.0f} MiB, "
        f"{largest['evaluations']:,} training evaluations; with --jobs {jobs}: "
        f"~{max(sched.peak, largest['memory']) / GiB:,.3g} GiB of the "
        f"{cap_gb(work.limits):,.3g} GiB allowed (limits.max_memory_gb)"
        + (
            f", {len(sched.one_at_a_time)} cell(s) of up to ~{sched.alone / GiB:,.3g} GiB run "
            f"one at a time ({jobs} at once would not fit)"
            if sched.one_at_a_time
            else ""
        )
        + f"; all {n_cells} cells: ~{duration(cpu)} of CPU time"
        + (f", ~{duration(wall)} with --jobs {jobs}" if jobs > 1 else "")
    )
    return lines
