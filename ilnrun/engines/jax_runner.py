"""The jax engine: cells run in lockstep batches (docs in :mod:`ilnrun.engines`).

How a run proceeds:

1. **Waves of instances.** The pending cells are grouped by dataset instance (in cell order);
   consecutive instances with the same ``T`` form a *wave*, as many as fit the memory budget.
   A wave's training inputs are stacked once, ``X: (instances, T, width)``, zero-padded to
   ``width`` (the largest input dimension of the wave rounded up to a multiple of
   :func:`width_quantum`: 8 on every device — a cell's random stream depends on the padded
   width, so one quantum everywhere keeps a results directory's numbers independent of the
   device it is resumed on; on a CPU a wider pad only costs work and random numbers), with
   ``y`` and the feature map's per-instance numbers (``p["d"]``, the true dimension, is
   traced). Every cell indexes the shared arrays with its instance's index: data shared by many
   cells are stored once. Waves are padded to
   the same number of instances.
2. **Shapes.** Within a wave, cells with the same learner and the same ``static`` settings of its
   jax module (budget size, sampler, ...) form a shape. One program is compiled per (shape,
   ``T``, ``width``, feature map, batch size, instances per wave): data of different dimensions
   (``D``) share a program; different budget sizes (``m``, ``k``, ``r``) each compile one. The
   programs are kept in the persistent compilation cache (:mod:`ilnrun.engines.jax_env`), so a
   second run compiles nothing.
3. **Batches.** A shape's cells are split into batches that fit the memory budget (the spec's
   ``memory`` estimate per cell; ``$ILNRUN_JAX_MEMORY_MB``, default 1024 MiB), padded with
   copies whose results are dropped to a multiple of ``BATCH_QUANTUM`` cells and to the size a
   full wave would give (so a smaller last wave compiles nothing new). A batch is
   ``vmap`` over its cells of the learner's round, ``lax.scan`` over the rounds. Each cell's
   randomness comes from its own key (the first 64 bits of the first child of the cell's
   :func:`~ilnrun.config.grid.seed_sequence`, as numpy's ``fit`` seed), folded with the round:
   a cell's numbers do not depend on its batch, its position or the batch size.
4. **Time limit.** With ``limits.cell_timeout_s`` the rounds run in chunks of
   ``TIMEOUT_CHUNK`` and the limit is checked between chunks, for the batch as a whole (it
   starts when the batch starts): when it has passed, every cell of the batch still running
   stops there and is recorded ``timed_out``.
5. **Evaluation** is every engine's (:func:`ilnrun.cell.finish`) on the returned
   predictors, with the cell's own evaluation seed: exact kernel evaluation and Algorithm-2 test
   estimates are the same code and draws as with numpy. Without a time limit a batch's cells
   are evaluated while the device runs the wave's next batch (jax dispatches a program without
   waiting for it), when the two batches fit the memory budget together; records keep the
   batches' order, and a wave's are all written before the next wave starts. ``wall_s`` of a
   cell is its batch's training time (from its start to the moment the device was done)
   divided by the batch's cells.

A learner without a jax module runs with its numpy ``fit`` (one cell at a time,
:func:`ilnrun.cell.run_cell`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from time import perf_counter

import numpy as np

from ..cell import CellPlan, Instance, finish, guarded, make_instance, plan, run_cell, seeds
from ..config import Cell, Experiment, digest
from ..learners.jax_pass import Round
from .jax_env import setup

MEMORY_ENV = "ILNRUN_JAX_MEMORY_MB"
DEFAULT_MEMORY_MB = 1024
BATCH_QUANTUM = 8  # batch sizes are padded to a multiple of this (fewer distinct programs)
WIDTH_QUANTUM = 8  # input widths are padded to a multiple of this (one 512-bit vector of float64)


def width_quantum(backend: str) -> int:
    """The multiple input widths are padded to, the same on every ``backend``: the random
    numbers of ReLU/Fourier weights are drawn per padded column, so a device-dependent width
    would give a results directory resumed on another device a second stream (before 0.2.0:
    128 everywhere, which made a 9-column table cost 128 columns on a CPU)."""
    del backend  # one width for every device (see above)
    return WIDTH_QUANTUM


TIMEOUT_CHUNK = 256  # rounds between two checks of limits.cell_timeout_s


def memory_budget() -> int:
    """Bytes a wave's data plus one batch's state may use (``$ILNRUN_JAX_MEMORY_MB``)."""
    text = os.environ.get(MEMORY_ENV, "").strip()
    try:
        mb = float(text) if text else float(DEFAULT_MEMORY_MB)
    except ValueError:
        mb = math.nan
    if not (math.isfinite(mb) and 1 <= mb <= 2**40):
        raise ValueError(
            f"${MEMORY_ENV} must be a number of MiB between 1 and {2**40:,} (unset: "
            f"{DEFAULT_MEMORY_MB}); got {text[:40]!r}"
        )
    return int(mb * 2**20)


def cell_key(seed: int, cell: Cell) -> np.ndarray:
    """The cell's jax key (raw ``uint32[2]``) from its own seed sequence: the numpy engine's
    ``fit`` seed (:func:`ilnrun.cell.seeds`)."""
    fit_ss, _ = seeds(seed, cell)
    return fit_ss.generate_state(2, np.uint32)


@dataclass
class Wave:
    """Instances whose training data are stacked for the batches of their cells."""

    instances: list[Instance]  # in order
    cells: list[list[Cell]]  # the pending cells of each instance
    T: int


def _waves(exp: Experiment, pending: list[Cell], budget: int) -> Iterator[Wave]:
    """Consecutive instances with equal ``T``, as many as fit ``budget`` (at least one)."""
    groups: dict[str, list[Cell]] = {}
    for c in pending:
        groups.setdefault(digest(c.data_key), []).append(c)
    wave: Wave | None = None
    size = 0
    for cells in groups.values():
        inst = make_instance(exp.seed, exp.feature_map, cells[0])
        d = inst.data
        nbytes = sum(a.nbytes for a in (d.X_train, d.X_val, d.X_test)) + 8 * len(d.y_train) ** 2
        T = len(d.y_train)
        if wave is not None and (wave.T != T or size + nbytes > budget // 2):
            yield wave
            wave = None
        if wave is None:
            wave, size = Wave([], [], T), 0
        wave.instances.append(inst)
        wave.cells.append(cells)
        size += nbytes
    if wave is not None:
        yield wave


def _stack(wave: Wave, n_inst: int, kernel: bool, quantum: int) -> tuple[dict, int]:
    """The wave's shared data (numpy), padded to ``n_inst`` instances, and the width (padded to
    a multiple of ``quantum``, :func:`width_quantum`)."""
    dmax = max(inst.data.X_train.shape[1] for inst in wave.instances)
    width = quantum * math.ceil(dmax / quantum)
    X = np.zeros((n_inst, wave.T, width))
    y = np.zeros((n_inst, wave.T))
    params = [inst.fmap.jax_params() for inst in wave.instances]
    params += [params[0]] * (n_inst - len(params))
    for j, inst in enumerate(wave.instances):
        X[j, :, : inst.data.X_train.shape[1]] = inst.data.X_train
        y[j] = inst.data.y_train
    data = {"X": X, "y": y, "fmap": {k: np.array([p[k] for p in params]) for k in params[0]}}
    if kernel:
        K = np.zeros((n_inst, wave.T, wave.T))
        for j, inst in enumerate(wave.instances):
            K[j] = inst.fmap.kernel(inst.data.X_train, inst.data.X_train)
        data["K"] = K
    return data, width


_PROGRAMS: dict[tuple, tuple[Callable, Callable]] = {}


def program(jaxmod, st: tuple, T: int, width: int, fmap_cls, chunk: int):
    """``(init, run)`` compiled functions of a shape: ``init(data, cells) -> state`` and
    ``run(data, cells, state, t0) -> state`` (rounds ``t0 .. t0 + chunk - 1``; rounds past
    ``T`` change nothing). The learner's pass follows
    :class:`~ilnrun.learners.jax_pass.JaxPass`."""
    key = (jaxmod.__name__, st, T, width, fmap_cls, chunk)
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    jax = setup()
    import jax.numpy as jnp
    from jax import lax

    def ctx(data, cell) -> Round:
        return Round(st, T, width, fmap_cls, data, cell)

    def init(data, cells):
        return jax.vmap(lambda cell: jaxmod.init(ctx(data, cell)))(cells)

    fix = getattr(jaxmod, "fixup", None)

    def run(data, cells, state, t0):
        one = jax.vmap(
            lambda cell, c, t: jaxmod.step(ctx(data, cell), c, t),
            in_axes=(0, 0, None),
        )

        def body(c, t):
            c = one(cells, c, t)
            return (fix(st, c) if fix is not None else c), None

        state, _ = lax.scan(body, state, t0 + jnp.arange(chunk))
        return state

    _PROGRAMS[key] = (jax.jit(init), jax.jit(run, donate_argnums=(2,)))
    return _PROGRAMS[key]


class Launched:
    """A batch whose rounds were handed to the device (jax dispatches asynchronously): the final
    state is being computed while the caller goes on. :meth:`collect` waits for it."""

    def __init__(self, carry, n: int, start: float) -> None:
        self.n = n
        self.start = start
        self._jax = setup()
        self._carry = carry
        self._ready: list[float] = []
        # the moment the device is done, for the batch's training time: a thread that only waits
        # (jax releases the GIL while it does)
        self._waiter = threading.Thread(target=self._wait, name="ilnrun-jax-batch", daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        try:
            self._jax.block_until_ready(self._carry)
        except Exception:  # the device's error: collect() raises it in the caller's thread
            return
        self._ready.append(perf_counter())

    def collect(self) -> tuple[list[tuple], float]:
        """The final state of each cell (numpy), in order, and the batch's training seconds
        (from its start to the moment the device was done)."""
        self._waiter.join()
        out = self._jax.device_get(self._carry)  # raises the device's error, if any
        self._carry = None
        end = self._ready[0] if self._ready else perf_counter()
        return _per_cell(self._jax, out, self.n), end - self.start


def _per_cell(jax, out, n: int) -> list[tuple]:
    """A batch's final state (numpy, first axis the batch) as the state of each of ``n`` cells."""
    return [jax.tree_util.tree_map(lambda v, j=j: v[j], out) for j in range(n)]


def launch_batch(
    jaxmod,
    st: tuple,
    T: int,
    width: int,
    fmap_cls,
    data: dict,
    cells: dict[str, np.ndarray],
) -> Launched:
    """One lockstep batch's rounds, all ``T``, handed to the device without waiting for them:
    the caller can evaluate the previous batch meanwhile (:func:`execute_jax`)."""
    jax = setup()
    init, run = program(jaxmod, st, T, width, fmap_cls, T)
    start = perf_counter()
    dev_data = jax.device_put(data)
    dev_cells = jax.device_put(cells)
    carry = run(dev_data, dev_cells, init(dev_data, dev_cells), 0)
    return Launched(carry, len(cells["inst"]), start)


def run_batch(
    jaxmod,
    st: tuple,
    T: int,
    width: int,
    fmap_cls,
    data: dict,
    cells: dict[str, np.ndarray],
    limit: float | None = None,
) -> list[tuple]:
    """One lockstep batch: the final state of each cell (the pass's ``State`` of numpy arrays),
    in order. ``cells``
    holds per-cell arrays (first axis: the batch): ``inst``, ``key`` and the module's
    ``inputs``. With ``limit`` (seconds) the rounds run in chunks of ``TIMEOUT_CHUNK`` and stop
    at the first chunk boundary past it."""
    if limit is None:
        return launch_batch(jaxmod, st, T, width, fmap_cls, data, cells).collect()[0]
    jax = setup()
    chunk = min(T, TIMEOUT_CHUNK)
    init, run = program(jaxmod, st, T, width, fmap_cls, chunk)
    start = perf_counter()
    dev_data = jax.device_put(data)
    dev_cells = jax.device_put(cells)
    carry = init(dev_data, dev_cells)
    for t0 in range(0, T, chunk):
        carry = run(dev_data, dev_cells, carry, t0)
        if t0 + chunk < T:
            jax.block_until_ready(carry)
            if perf_counter() - start > limit:
                break
    return _per_cell(jax, jax.device_get(carry), len(cells["inst"]))


@dataclass(frozen=True)
class Member:
    """A pending cell of a wave: its plan, its instance and its learner's jax pass."""

    plan: CellPlan
    inst: Instance
    jaxmod: object  # a module following ilnrun.learners.jax_pass.JaxPass


@dataclass(frozen=True)
class Shape:
    """What one compiled program of a wave is for: the learner's jax pass, its static settings,
    the rounds ``T`` and the padded width, and the wave's shared ``data``."""

    jaxmod: object
    static: tuple
    T: int
    width: int
    data: dict


def execute_jax(exp: Experiment, pending: list[Cell], on_record, memory: int | None = None) -> None:
    """Run ``pending`` cells on the jax engine and hand each record to ``on_record``."""
    from ..numeric_env import one_thread

    quantum = width_quantum(setup().default_backend())
    budget = memory_budget() if memory is None else memory
    limit = exp.limits.cell_timeout_s
    waves = list(_waves(exp, pending, budget))
    n_inst = max((len(w.instances) for w in waves), default=1)
    in_flight: _Batch | None = None  # launched, its cells not yet evaluated
    for wave in waves:
        shapes: dict[tuple, list[Member]] = {}
        for inst, cells in zip(wave.instances, wave.cells, strict=True):
            for cell in cells:
                p = plan(exp.budget, cell, inst)
                jaxmod = p.spec.engine("jax")
                if jaxmod is None:  # no jax pass: the numpy one
                    with one_thread():
                        on_record(run_cell(exp, cell))
                    continue
                missing = p.spec.unimplemented("jax", p.args)
                if missing:  # validation refuses these first (config.schema._engine_checks)
                    raise ValueError(
                        f"the jax pass of {cell.method} does not implement "
                        + ", ".join(f"{k}={v!r}" for k, v in missing)
                    )
                key = (cell.method, jaxmod.static(p.args))
                shapes.setdefault(key, []).append(Member(p, inst, jaxmod))
        index = {id(inst): j for j, inst in enumerate(wave.instances)}
        for (_, st), members in shapes.items():
            first = members[0]
            spec, T = first.plan.spec, first.plan.T
            data, width = _stack(wave, n_inst, spec.needs_kernel, quantum)
            shape = Shape(first.jaxmod, st, T, width, data)
            w = type(first.inst.fmap).param_floats(width)
            mem = spec.memory_bytes(first.plan.size(), T, w, first.plan.args)
            per_cell = 3 * (mem if spec.memory else 64 * T)
            data_bytes = sum(a.nbytes for a in (data["X"], data["y"], data.get("K", data["y"])))
            cap = max(1, (budget - data_bytes) // per_cell)
            cap = max(BATCH_QUANTUM, cap - cap % BATCH_QUANTUM)
            # as many cells as a full wave would hold: a smaller last wave reuses the program
            full = len(members) * n_inst / len(wave.instances)
            cap = min(cap, BATCH_QUANTUM * math.ceil(full / BATCH_QUANTUM))
            for b0 in range(0, len(members), cap):
                job = _Batch(exp, members[b0 : b0 + cap], index, shape, cap)
                job.nbytes = data_bytes + job.size * per_cell
                if limit is not None:  # chunks and a clock: one batch at a time
                    in_flight = _finish(in_flight, on_record)
                    job.run_limited(limit, on_record)
                    continue
                if in_flight is not None and in_flight.nbytes + job.nbytes > budget:
                    in_flight = _finish(in_flight, on_record)  # two would not fit together
                job.launch()
                _finish(in_flight, on_record)  # evaluated while the device runs ``job``
                in_flight = job
        # a wave's records before the next wave's (whose cells without a jax pass run inline)
        in_flight = _finish(in_flight, on_record)


class _Batch:
    """One batch of members of ``shape``, padded to ``size`` cells: its inputs; then its rounds,
    launched (:meth:`launch`) and evaluated later (:meth:`finish`), or run under a time limit
    (:meth:`run_limited`)."""

    def __init__(self, exp: Experiment, batch: list[Member], index: dict, shape: Shape, size: int):
        n = len(batch)
        self.size = max(size, BATCH_QUANTUM * math.ceil(n / BATCH_QUANTUM))
        rows = batch + [batch[0]] * (self.size - n)
        T, jaxmod = shape.T, shape.jaxmod
        ins = [jaxmod.inputs(m.plan.args, T) for m in rows]
        cells = {k: np.stack([i[k] for i in ins]) for k in ins[0]}
        cells["inst"] = np.array([index[id(m.inst)] for m in rows], dtype=np.int64)
        cells["key"] = np.stack([cell_key(exp.seed, m.plan.cell) for m in rows])
        self.exp, self.batch, self.shape, self.cells = exp, batch, shape, cells
        self.nbytes = 0  # the data and states it holds on the device (set by execute_jax)
        self.launched: Launched | None = None

    def _args(self) -> tuple:
        sh = self.shape
        fmap_cls = type(self.batch[0].inst.fmap)
        return (sh.jaxmod, sh.static, sh.T, sh.width, fmap_cls, sh.data, self.cells)

    def launch(self) -> None:
        self.launched = launch_batch(*self._args())

    def finish(self, on_record) -> None:
        """Wait for the launched rounds, then evaluate and record every cell."""
        outs, seconds = self.launched.collect()
        self.launched = None
        self._record(outs, seconds, on_record)

    def run_limited(self, limit: float, on_record) -> None:
        t0 = perf_counter()
        outs = run_batch(*self._args(), limit)
        self._record(outs, perf_counter() - t0, on_record)

    def _record(self, outs: list, seconds: float, on_record) -> None:
        from ..numeric_env import one_thread

        sh, n = self.shape, len(self.batch)
        wall = seconds / n
        with one_thread():
            for m, out in zip(self.batch, outs, strict=False):
                res, reason = guarded(
                    "fit", sh.jaxmod.result, sh.static, m.plan.args, out, m.inst.fmap, sh.T
                )
                on_record(finish(self.exp, m.plan, m.inst, res, reason, wall))


def _finish(job: _Batch | None, on_record) -> None:
    """Evaluate and record ``job``'s cells (nothing for ``None``). Returns ``None``: no batch in
    flight any more."""
    if job is not None:
        job.finish(on_record)
    return None
