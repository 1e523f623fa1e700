"""GPU figures of the jax engine in one prepared run (``make bench`` runs it; issue 28, item 4).

    python bench/gpu.py [--budget 420] [--out DIR] [--record] [--report PATH] [--skip STAGE]
                        [--cap NAME=SECONDS]
    python bench/gpu.py --cpu-ok [--budget 150] [--out DIR]      # the script's logic, jax on CPU
    python bench/gpu.py --from-json DIR/gpu.json [--report PATH]  # record figures made elsewhere
    python bench/gpu.py --render-only [--report PATH]             # re-write the report's section

It asks jax for its devices (``jax.devices()``). Without a GPU (jax missing, or a CPU only) it
prints ``no GPU: skipped`` and exits 0, so that ``make bench`` passes on every machine, unless
``--cpu-ok`` is given: then it runs small sizes on jax's CPU backend, to test the script (its
figures are CPU figures and are never recorded as GPU ones). On a GPU, in this order, each stage
with its own wall-clock allowance and skipped, with the reason recorded, when the ``--budget``
seconds are spent:

1. **Equal in distribution** (small size): Shrinking Gradient (SG) on the jax engine, one lockstep
   batch of ``seeds`` cells with their own keys, against the numpy engine's ``fit`` with seeds
   ``0..seeds-1`` on the same dataset, in two settings (plain; one that shrinks): the mean online
   loss, the exact test loss of the final predictor and the shrink count, each as the difference
   of the means over its standard error, ``|z| < 4`` (as ``tests/test_engine_jax.py``).
2. **One SG cell at T = 10⁵** (m = 5·10⁴, D = 800, coordinate features, eta 0.3 ``inv_sqrt``:
   ``compiled.py``'s and the issue's cell), the cell as ``ilnrun run`` plans it (budget
   ``{match: samples, dsgd_k: 50000}``, which gives m = 50 001 to the T − 1 rounds that draw;
   its own key), on the jax engine: the data put on the device,
   the program compiled ahead of time (both timed apart), then the pass, timed per chunk of
   ``TIMEOUT_CHUNK`` rounds (the engine's program under a time limit: the same rounds, the same
   numbers). Then 8 cells of the same shape in one lockstep batch (the cell and copies with
   other keys, as the engine batches the cells of a shape): *cells batched*. Against the
   compiled CPU pass (``fit_compiled``, one thread, BLAS on one thread, as in every cell) on the
   same cell, with the cell's own numpy seed: on its first ``P/2`` and ``P`` rounds (as many as
   its allowance gives) — compared with the jax pass on the rounds both ran — and extrapolated to
   the whole pass at the rate of rounds ``P/2 .. P`` (a lower bound on the CPU's whole pass: its
   later rounds gather from more rows, out of cache, and search longer sums; said so). Last,
   off CPU, the cell's first rounds again with the search as a loop (jax's ``scan``, the
   engine's form before it was unrolled off CPU; ``ilnrun/jax_ops.py``): µs a round of each
   form on the rounds both ran, and whether the losses are the same (they must be).
3. **figure1 on the jax engine**: ``ilnrun run configs/figure1_paper_grid.yaml --engine jax``
   (figure1's 9 600 cells that the jax engine implements: ``configs/figure1.yaml`` itself also
   averages and fits ridge, which the jax passes do not) into a temporary directory, with an
   empty compilation cache (*cold*) and again with it (*warm*); compilation ≈ cold − warm. Then
   the numpy engine with ``--jobs`` = the CPUs (up to 16), and the test losses of the two runs
   compared cell by cell, per learner (the differences' mean over its standard error).
4. **One SG cell at T = 10⁶** (m = 5·10⁵ + 1, as 2.) if the memory allows, and
5. **Theorem 1 at T = 10⁶**: the Shrinking Gradient cell of ``configs/theorem1.yaml`` (theory
   preset, c = 0.01: m = 138 156, D = 1 000) at T = 10⁶, if its data fit the host (the config's
   memory check) and the device (jax's ``bytes_limit``).

A pass that does not finish within its allowance stops at a chunk boundary; its whole-pass time
is extrapolated at the rate of its last quarter of rounds, and the report says so. A stage that
fails (out of device memory, say) is recorded with its error and the next one runs. The stages
take ``--budget`` seconds (default 420 on a GPU) plus what no allowance bounds (building the
T = 10⁶ data, compiling): give the command about 9 minutes (``timeout 540``).

Output: ``DIR/gpu.json`` (every figure, machine-readable) and ``DIR/gpu.md`` (the report's
section), written after every stage (a run stopped from outside keeps what it measured), and
``DIR/sg_program.txt``: the optimised XLA program of the T = 10⁵ cell's rounds
(``compiled.as_text()``), whose kernels a round say where a GPU spends a round. ``DIR`` defaults to
``results/bench-gpu``. ``--record`` (GPU figures only) also copies the JSON beside the report
(``experiments/performance/gpu.json``) and writes the section into the report between its markers.
``--from-json`` does the same with a JSON made on another machine: on a GPU machine that cannot
commit, run it with ``--out`` and bring ``gpu.json`` back. Without a GPU, ``--record`` re-writes
the section from the recorded JSON (or says that none was recorded), since ``run_bench.py`` writes
the report anew.

On a machine whose python already has a CUDA jaxlib (``jax.devices()`` lists a GPU) no install is
needed: ``PYTHONPATH=. timeout 540 python3 bench/gpu.py --out DIR``; elsewhere
``pip install -e '.[gpu]'`` brings jax with CUDA 12. ``XLA_PYTHON_CLIENT_PREALLOCATE`` is set
to ``false`` (unless set) so that the ``ilnrun run`` subprocesses share the GPU with this
process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before jax is imported

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPORT = ROOT / "experiments" / "performance" / "REPORT.md"
RECORD_NAME = "gpu.json"
PROGRAM_NAME = "sg_program.txt"  # beside gpu.json: the first SG pass's optimised XLA program
PROGRAM_TEXT: list[Path | None] = [None]  # where jax_pass writes it (set by main)
BEGIN, END = "<!-- GPU: bench/gpu.py -->", "<!-- end GPU -->"
SCHEMA = 1
D_SG, ETA, SCHEDULE = 800, 0.3, "inv_sqrt"
Z_LIMIT = 4.0  # |z| below this: equal in distribution (tests/test_engine_jax.py's bound)
GOAL_SPEEDUP = 20.0  # issue 28: a T = 1e5 SG cell >= x20 the compiled CPU pass
GPU_BUDGET = 420.0  # seconds: the stages' default budget on a GPU (about 8 minutes in all)


@dataclass(frozen=True)
class Sizes:
    """The sizes of a run: ``dist`` (T, m, D, seeds) of the distribution check; ``sg`` the (T, m)
    SG cells; ``batch`` the cells of the batched pass; ``theorem1_T``; ``figure1`` overrides of
    ``configs/figure1_paper_grid.yaml``; ``caps`` the seconds each stage may take at most;
    ``keep`` the seconds a stage leaves for the stages after it (when they run)."""

    dist: tuple[int, int, int, int]
    sg: tuple[tuple[int, int], ...]
    batch: int
    theorem1_T: int
    figure1: tuple[str, ...]
    caps: dict = field(default_factory=dict)
    keep: dict = field(default_factory=dict)


GPU_SIZES = Sizes(
    dist=(2_000, 200, 100, 40),
    sg=((100_000, 50_000), (1_000_000, 500_000)),
    batch=8,
    theorem1_T=1_000_000,
    figure1=(),
    caps={
        "jax": 45,
        "batch": 20,
        "cpu": 20,
        "loop": 15,
        "jax_big": 25,
        "cpu_big": 10,
        "figure1": 150,
    },
    keep={"figure1": 120, "sg_big": 55},
)
CPU_SIZES = Sizes(  # --cpu-ok: seconds on jax's CPU backend, to test the script
    dist=(400, 50, 40, 16),
    sg=((2_000, 500), (4_000, 1_000)),
    batch=4,
    theorem1_T=1_000,
    figure1=(
        "dataset.D=[550]",
        "repetitions=1",
        "budget.dsgd_k=[2]",
        "evaluation.n_test_estimated=20",
    ),
    caps={
        "jax": 20,
        "batch": 10,
        "cpu": 5,
        "loop": 5,
        "jax_big": 10,
        "cpu_big": 3,
        "figure1": 90,
    },
    keep={"figure1": 20, "sg_big": 10},
)


# ----------------------------------------------------------------------------------------------
# the clock


class Clock:
    """The run's wall-clock budget: each stage asks for an allowance (at most its cap, at most
    what is left less ``reserve``); a stage whose allowance is below ``least`` is skipped."""

    def __init__(self, budget: float, reserve: float = 5.0) -> None:
        self.start = time.perf_counter()
        self.budget = budget
        self.reserve = reserve

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.budget - self.elapsed()

    def allowance(self, cap: float, least: float = 1.0, keep: float = 0.0) -> float | None:
        """Seconds the next stage may take (``keep`` seconds kept for the stages after it), or
        ``None`` when too little is left."""
        give = min(cap, self.left() - self.reserve - keep)
        return give if give >= least else None


# ----------------------------------------------------------------------------------------------
# the device


def detect() -> dict:
    """jax's devices in words: ``{"gpu": bool, "name", "backend", "count", "memory_bytes",
    "describe"}``; ``{"gpu": False, "why": ...}`` when jax is missing."""
    from ilnrun.engines import jax_available

    if not jax_available():
        return {"gpu": False, "why": "jax is not installed (pip install 'ilnrun[gpu]')"}
    from ilnrun.engines import jax_env

    jax = jax_env.setup()
    devs = jax.devices()
    d = devs[0]
    backend = jax.default_backend()
    stats = {}
    try:
        stats = d.memory_stats() or {}
    except Exception:  # a backend without memory statistics (the CPU's)
        stats = {}
    return {
        "gpu": backend != "cpu",
        "why": f"jax sees only {backend} devices" if backend == "cpu" else "",
        "name": getattr(d, "device_kind", str(d)),
        "backend": backend,
        "count": len(devs),
        "memory_bytes": int(stats.get("bytes_limit", 0)) or None,
        "describe": jax_env.device(),
    }


def environment(dev: dict, mode: str) -> dict:
    """The machine, the versions and the code this run measured."""
    from ilnrun.numeric_env import cpu_model

    cpu = cpu_model()
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("jax", "jaxlib", "numba"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = None

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        if commit and git("status", "--porcelain", "--untracked-files=no"):
            commit += " with changes not committed"
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "mode": mode,
        "device": dev,
        "host_cpu": cpu,
        "host_cores": os.cpu_count(),
        "versions": versions,
        "commit": commit or None,
        "search_method": search_method(),
    }


# ----------------------------------------------------------------------------------------------
# cells as the engine runs them


def z_score(a: np.ndarray, b: np.ndarray) -> float:
    """Difference of the means over its standard error (0 when both are constant and equal)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    diff = float(a.mean() - b.mean())
    if se == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / se


@dataclass
class EngineCell:
    """A cell as the jax engine runs it: its experiment, cell, instance, plan, jax pass, static
    settings, per-cell inputs and the wave's stacked ``data`` (``width`` padded)."""

    exp: object
    cell: object
    inst: object
    plan: object
    jaxmod: object
    static: tuple
    inputs: dict
    data: dict
    width: int

    @property
    def T(self) -> int:
        return self.plan.T

    @property
    def m(self) -> int:
        return int(self.plan.args["m"])

    def batch(self, n: int) -> dict:
        """``n`` cells of this shape: this cell (its own key) and copies with other keys."""
        from ilnrun.engines.jax_runner import cell_key

        keys = [cell_key(self.exp.seed, self.cell)]
        keys += [np.random.SeedSequence([7, j]).generate_state(2, np.uint32) for j in range(1, n)]
        out = {k: np.stack([v] * n) for k, v in self.inputs.items()}
        out["inst"] = np.zeros(n, dtype=np.int64)
        out["key"] = np.stack(keys)
        return out

    def bytes_per_cell(self) -> int:
        """The engine's memory estimate of one cell's state (3 x the spec's, as it batches)."""
        spec = self.plan.spec
        w = type(self.inst.fmap).param_floats(self.width)
        return 3 * spec.memory_bytes(self.plan.size(), self.T, w, self.plan.args)

    def data_bytes(self) -> int:
        return int(self.data["X"].nbytes + self.data["y"].nbytes)


def engine_cell(raw: dict) -> EngineCell:
    """The first Shrinking Gradient cell of the config ``raw``, planned and stacked as
    :func:`ilnrun.engines.jax_runner.execute_jax` does. Raises ``ConfigError`` when the config
    is refused (e.g. its data do not fit this host's memory)."""
    from ilnrun import config as C
    from ilnrun.cell import make_instance, plan
    from ilnrun.engines import jax_runner
    from ilnrun.engines.jax_env import setup
    from ilnrun.overrides import load_config

    exp = load_config(raw)
    cell = next(c for c in C.cells(exp) if c.method == "shrinking_gradient")
    inst = make_instance(exp.seed, exp.feature_map, cell)
    p = plan(exp.budget, cell, inst)
    jaxmod = p.spec.engine("jax")
    wave = jax_runner.Wave([inst], [[cell]], p.T)
    quantum = jax_runner.width_quantum(setup().default_backend())
    data, width = jax_runner._stack(wave, 1, p.spec.needs_kernel, quantum)
    return EngineCell(
        exp,
        cell,
        inst,
        p,
        jaxmod,
        jaxmod.static(p.args),
        jaxmod.inputs(p.args, p.T),
        data,
        width,
    )


def sg_config(T: int, m: int) -> dict:
    """One SG cell (D = 800, coordinate features, eta 0.3 inv_sqrt) with m = ``m`` samples a
    round (budget matched on samples with ``dsgd_k = m``)."""
    return {
        "name": f"sg_T{T}_m{m}",
        "seed": 0,
        "repetitions": 1,
        "dataset": {
            "kind": "clipped_gaussian",
            "D": D_SG,
            "T": T,
            "n_val": 10,
            "n_test": 10,
            "sparsity": 10,
        },
        "feature_map": {"kind": "coordinate"},
        "budget": {"match": "samples", "dsgd_k": m},
        "methods": {"shrinking_gradient": {"eta": ETA, "schedule": SCHEDULE}},
    }


def theorem1_config(T: int) -> dict:
    """``configs/theorem1.yaml`` at one ``T``, one repetition, Shrinking Gradient alone."""
    from ilnrun import config as C

    raw = C.load_yaml(ROOT / "configs" / "theorem1.yaml")
    raw["dataset"]["T"] = T
    raw["repetitions"] = 1
    raw["methods"] = {"shrinking_gradient": raw["methods"]["shrinking_gradient"]}
    return raw


def jax_pass(ec: EngineCell, cells: dict, limit: float) -> dict:
    """The jax pass of a batch of ``cells`` of ``ec``'s shape, timed: the data put on the device,
    the program compiled ahead of time, then the rounds in chunks of ``TIMEOUT_CHUNK`` (each
    waited for) until all ``T`` are run or ``limit`` seconds have passed."""
    from ilnrun.engines import jax_runner
    from ilnrun.engines.jax_env import setup

    jax = setup()
    T, chunk = ec.T, jax_runner.TIMEOUT_CHUNK
    init, run = jax_runner.program(ec.jaxmod, ec.static, T, ec.width, type(ec.inst.fmap), chunk)
    t0 = time.perf_counter()
    dd = jax.device_put(ec.data)
    dc = jax.device_put(cells)
    jax.block_until_ready((dd, dc))
    put_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    init_c = init.lower(dd, dc).compile()
    run_c = run.lower(dd, dc, jax.eval_shape(init, dd, dc), 0).compile()
    if PROGRAM_TEXT[0] is not None and not PROGRAM_TEXT[0].exists():
        # the first pass timed (the T = 1e5 cell alone): XLA's optimised program, to read its
        # kernels a round off line
        PROGRAM_TEXT[0].write_text(run_c.as_text())
    compile_s = time.perf_counter() - t0
    start = time.perf_counter()
    carry = init_c(dd, dc)
    marks = [(0, 0.0)]  # (rounds run, seconds since the pass started)
    for r0 in range(0, T, chunk):
        carry = run_c(dd, dc, carry, r0)
        jax.block_until_ready(carry)
        marks.append((min(T, r0 + chunk), time.perf_counter() - start))
        if marks[-1][1] > limit and marks[-1][0] < T:
            break
    out = jax.device_get(carry)
    del dd, dc, carry
    rounds, elapsed = marks[-1]
    whole = rounds >= T
    if whole:
        whole_s = elapsed
    else:  # the rate of the last quarter of the rounds run
        q = marks[max(1, (3 * len(marks)) // 4) - 1]
        rate = (rounds - q[0]) / max(elapsed - q[1], 1e-12)
        whole_s = elapsed + (T - rounds) / rate
    n = len(cells["inst"])
    samples = int(np.sum(out.draws)) * ec.m
    return {
        "cells": n,
        "put_s": put_s,
        "compile_s": compile_s,
        "pass_s": elapsed,
        "rounds": int(rounds),
        "whole": whole,
        "whole_pass_s": whole_s,
        "samples": samples,
        "samples_per_s": samples / elapsed if elapsed > 0 else math.nan,
        "cell_rounds_per_s": n * rounds / elapsed if elapsed > 0 else math.nan,
        "marks": marks,
        "diverged": int(np.sum(out.diverged)),
        "online_loss_cell0": float(np.mean(out.losses[0][: int(out.rounds[0])])),
        "losses_cell0": out.losses[0][: int(out.rounds[0])],
    }


def time_at(marks: list, rounds: int) -> float:
    """Seconds since the pass started when ``rounds`` rounds had run: a mark (rounds, seconds),
    or the time interpolated between the two marks around it."""
    rs = np.array([r for r, _ in marks], dtype=float)
    ts = np.array([t for _, t in marks])
    return float(np.interp(rounds, rs, ts))


def cpu_pass(ec: EngineCell, cap: float) -> dict:
    """The compiled CPU pass (numpy's where numba is missing) of the cell, with the numpy
    engine's seed, on its first rounds, each run from round 1: a probe of ``min(T, 4 chunks)``
    rounds, then ``P/2`` and ``P`` rounds (``P`` a multiple of the chunk) with ``P`` what ``cap``
    CPU seconds allow for the two at the probe's rate, less a margin (later rounds cost more).
    ``points``: (rounds, CPU seconds) of the runs; the whole pass is the ``P`` rounds plus the
    rest at the rate of rounds ``P/2 .. P``. CPU seconds of this process, one thread."""
    from ilnrun.cell import seeds
    from ilnrun.engines.jax_runner import TIMEOUT_CHUNK
    from ilnrun.learners import shrinking_gradient as sg
    from ilnrun.learners import shrinking_gradient_kernels as kernels
    from ilnrun.numeric_env import one_thread

    compiled = kernels.available()
    fit = sg.fit_compiled if compiled else sg.fit_numpy
    X, y = ec.inst.data.X_train, ec.inst.data.y_train
    T, fmap, args = ec.T, ec.inst.fmap, ec.plan.args
    fit_ss, _ = seeds(ec.exp.seed, ec.cell)

    def run(P: int):
        c0, w0 = time.process_time(), time.perf_counter()
        res = fit(X[:P], y[:P], fmap, np.random.default_rng(fit_ss), **args)
        return time.process_time() - c0, time.perf_counter() - w0, res

    with one_thread():  # native thread pools on one thread, as in every cell
        c0 = time.process_time()
        run(min(T, 64))  # compile (or load) the kernels outside the timing
        compile_s = time.process_time() - c0
        P = min(T, 4 * TIMEOUT_CHUNK)
        cpu, wall, res = run(P)
        points = [(0, 0.0), (P, cpu)]
        # P/2 and P rounds in 60% of what is left of the cap at the probe's rate
        more = int(0.6 * P * (cap - cpu) / max(cpu, 1e-9) / 1.5) // TIMEOUT_CHUNK * TIMEOUT_CHUNK
        if more > P:
            P = min(T, more)
            half = P // 2 // TIMEOUT_CHUNK * TIMEOUT_CHUNK
            if half > points[-1][0]:
                points.append((half, run(half)[0]))
            cpu, wall, res = run(P)
            points.append((P, cpu))
    (r0, c0), (r1, c1) = points[-2], points[-1]
    late = (c1 - c0) / max(r1 - r0, 1)  # CPU seconds a round, over the last rounds run
    samples = int(res.counters["features_sampled"])
    return {
        "path": "compiled" if compiled else "numpy (numba missing)",
        "compile_s": compile_s,
        "rounds": P,
        "cpu_s": cpu,
        "wall_s": wall,
        "whole": P >= T,
        "points": points,
        "whole_pass_cpu_s": cpu + (T - P) * late,
        "samples": samples,
        "samples_per_cpu_s": samples / cpu if cpu > 0 else math.nan,
        "online_loss": float(np.mean(res.losses)),
        "losses": res.losses,
    }


def bench_cell(label: str, ec: EngineCell, limit: float, cpu_cap: float | None, dev: dict):
    """One cell on the jax engine (``limit`` seconds) and, with ``cpu_cap``, its compiled CPU
    pass; the row of the report."""
    row = {
        "label": label,
        "T": ec.T,
        "m": ec.m,
        "D": int(ec.inst.data.X_train.shape[1]),
        "data_bytes": ec.data_bytes(),
        "state_bytes_per_cell": ec.bytes_per_cell(),
    }
    j = jax_pass(ec, ec.batch(1), limit)
    row["jax"] = {k: v for k, v in j.items() if k != "losses_cell0"}
    ran = "whole pass" if j["whole"] else f"{j['rounds']:,} rounds"
    print(
        f"  {label}: jax {ran} {j['pass_s']:.2f} s (compile {j['compile_s']:.1f} s, data to "
        f"device {j['put_s']:.1f} s)"
        + ("" if j["whole"] else f", whole pass extrapolated {j['whole_pass_s']:.1f} s"),
        flush=True,
    )
    if cpu_cap is not None:
        c = cpu_pass(ec, cpu_cap)
        row["cpu"] = {k: v for k, v in c.items() if k != "losses"}
        P = min(c["rounds"], j["rounds"])  # the rounds both ran
        jax_P = time_at(j["marks"], P)
        cpu_P = time_at(c["points"], P)
        row["same_rounds"] = P
        row["speedup_same_rounds"] = cpu_P / jax_P if jax_P > 0 else math.nan
        row["speedup_whole_pass"] = c["whole_pass_cpu_s"] / j["whole_pass_s"]
        n = min(len(c["losses"]), len(j["losses_cell0"]))
        row["online_loss_same_rounds"] = {
            "jax": float(np.mean(j["losses_cell0"][:n])),
            "cpu": float(np.mean(c["losses"][:n])),
            "rounds": n,
        }
        print(
            f"    CPU {c['path']}: {c['rounds']:,} rounds {c['cpu_s']:.2f} CPU-s, whole pass "
            f"{'' if c['whole'] else 'extrapolated '}{c['whole_pass_cpu_s']:.1f} CPU-s; jax / CPU "
            f"x{row['speedup_same_rounds']:.2f} on the same {P:,} rounds, "
            f"x{row['speedup_whole_pass']:.2f} whole pass",
            flush=True,
        )
    row["_losses"] = j["losses_cell0"]  # for search_as_loop; stage_cell drops it
    return row


def fits_device(ec: EngineCell, cells: int, dev: dict) -> str | None:
    """Why ``cells`` cells of ``ec`` would not fit the device's memory (``None``: they fit, or
    the device does not say how much it has)."""
    need = ec.data_bytes() + cells * ec.bytes_per_cell()
    have = dev.get("memory_bytes")
    if have and need > 0.9 * have:
        return f"needs about {need / 2**30:.1f} GiB of device memory, {have / 2**30:.1f} GiB there"
    return None


# ----------------------------------------------------------------------------------------------
# stages


def stage_distribution(T: int, m: int, D: int, seeds: int) -> dict:
    """SG, jax engine (one batch, keys ``SeedSequence(1000 + s)``) against numpy's ``fit`` (seeds
    ``0..seeds-1``) on one dataset, two settings: z of the mean online loss, the exact test loss
    and the shrink count."""
    from ilnrun.cell import Instance
    from ilnrun.datasets import clipped_gaussian
    from ilnrun.engines import jax_runner
    from ilnrun.engines.jax_env import setup
    from ilnrun.features import Coordinate
    from ilnrun.learners import shrinking_gradient as sg
    from ilnrun.learners import shrinking_gradient_jax as sgj

    d = clipped_gaussian(np.random.default_rng(2), D=D, T=T, n_val=1, n_test=500, sparsity=5)
    fmap = Coordinate(D)
    K = fmap.kernel(d.X_test, d.X_train)
    inst = Instance(d, fmap)
    quantum = jax_runner.width_quantum(setup().default_backend())
    data, width = jax_runner._stack(jax_runner.Wave([inst], [[None]], T), 1, False, quantum)
    settings = {
        "plain": {"eta": ETA, "m": m, "B": 1.0, "schedule": SCHEDULE},
        "shrinks": {"eta": 1.5, "m": max(10, m // 10), "B": 0.03, "schedule": "constant"},
    }
    out: dict = {"T": T, "m": m, "D": D, "seeds": seeds, "settings": {}}
    for name, args in settings.items():
        st = sgj.static(args)
        ins = sgj.inputs(args, T)
        cells = {k: np.stack([v] * seeds) for k, v in ins.items()}
        cells["inst"] = np.zeros(seeds, dtype=np.int64)
        cells["key"] = np.stack(
            [np.random.SeedSequence(1000 + s).generate_state(2, np.uint32) for s in range(seeds)]
        )
        t0 = time.perf_counter()
        states = jax_runner.run_batch(sgj, st, T, width, Coordinate, data, cells)
        jax_s = time.perf_counter() - t0
        new = [sgj.result(st, args, s, fmap, T) for s in states]
        t0 = time.perf_counter()
        ref = [
            sg.fit(d.X_train, d.y_train, fmap, np.random.default_rng(s), **args)
            for s in range(seeds)
        ]
        numpy_s = time.perf_counter() - t0

        def stats(results):
            online = np.array([r.losses.mean() for r in results])
            pred = np.array([r.predictor.predict_exact(K) for r in results])
            test = 0.5 * ((pred - d.y_test) ** 2).mean(axis=1)
            shrinks = np.array([r.counters["shrinks"] for r in results], dtype=float)
            return {"online_loss": online, "test_loss": test, "shrinks": shrinks}

        a, b = stats(new), stats(ref)
        rows = {}
        for q in a:
            z = z_score(a[q], b[q])
            rows[q] = {
                "jax_mean": float(a[q].mean()),
                "numpy_mean": float(b[q].mean()),
                "z": z,
                "equal": bool(abs(z) < Z_LIMIT),
            }
        out["settings"][name] = {"args": args, "jax_s": jax_s, "numpy_s": numpy_s, **rows}
        print(
            f"  {name} (T={T}, m={args['m']}, {seeds} seeds each): "
            + ", ".join(f"{q} z = {r['z']:+.2f}" for q, r in rows.items()),
            flush=True,
        )
    out["equal"] = all(
        s[q]["equal"]
        for s in out["settings"].values()
        for q in ("online_loss", "test_loss", "shrinks")
    )
    return out


def _time_split(out: Path) -> dict:
    """Where a finished run's time went, from its ``runs.csv``: ``train_s`` (the cells'
    training seconds summed; on the jax engine a batch's time is split among its cells, so this
    is the batches' time) and ``eval_s`` (their evaluation seconds summed)."""
    import pandas as pd

    try:
        t = pd.read_csv(out / "runs.csv", usecols=["wall_s", "eval_s"])
    except (OSError, ValueError):
        return {}
    return {"train_s": float(t["wall_s"].sum()), "eval_s": float(t["eval_s"].sum())}


def _cells_done(out: Path) -> int:
    """How many cells a run stopped from outside had written (lines of its ``cells.jsonl``)."""
    try:
        with open(out / "cells.jsonl", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def run_cli(cfg: Path, out: Path, engine: str, jobs: int, env: dict, timeout: float, sets):
    """``ilnrun run`` (this tree's) into ``out``; (wall s, CPU s of the command and its workers,
    or ``None`` when it ran past ``timeout``)."""
    cmd = [sys.executable, "-m", "ilnrun.cli", "run", str(cfg), "--out", str(out), "--fresh"]
    cmd += ["--quiet", "--engine", engine, "--jobs", str(jobs)]
    for s in sets:
        cmd += ["--set", s]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        **env,
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        subprocess.run(cmd, check=True, env=env, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compare_runs(a: Path, b: Path) -> dict:
    """Per learner: the test losses of two runs of one config, cell by cell (cells finite in
    both): the mean difference over its standard error, and the largest difference."""
    import pandas as pd

    cols = ["cell_id", "method", "test_loss"]
    x = pd.read_csv(a / "runs.csv", usecols=cols)
    y = pd.read_csv(b / "runs.csv", usecols=cols)
    m = x.merge(y, on=["cell_id", "method"], suffixes=("_jax", "_numpy"))
    m = m[np.isfinite(m["test_loss_jax"]) & np.isfinite(m["test_loss_numpy"])]
    out = {}
    for method, g in m.groupby("method"):
        diff = (g["test_loss_jax"] - g["test_loss_numpy"]).to_numpy()
        se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
        mean = float(diff.mean())
        # equal to rounding (kernel OGD draws nothing): no z
        close = bool(
            np.max(np.abs(diff)) <= 1e-9 * max(1.0, float(g["test_loss_numpy"].abs().max()))
        )
        z = 0.0 if close or (mean == 0 and se == 0) else (mean / se if se > 0 else math.inf)
        out[method] = {
            "cells": int(len(g)),
            "jax_mean": float(g["test_loss_jax"].mean()),
            "numpy_mean": float(g["test_loss_numpy"].mean()),
            "z": z,
            "max_abs_diff": float(np.max(np.abs(diff))),
            "rounding": close,
            "equal": bool(close or abs(z) < Z_LIMIT),
        }
    return out


def stage_figure1(tmp: Path, sizes: Sizes, clock: Clock, keep: float) -> dict:
    """``configs/figure1_paper_grid.yaml`` on the jax engine, cold and warm, then on numpy."""
    cfg = ROOT / "configs" / "figure1_paper_grid.yaml"
    cache = {"ILNRUN_JAX_CACHE": str(tmp / "f1-jax-cache")}
    jobs = max(1, min(16, os.cpu_count() or 1))
    out: dict = {"config": "configs/figure1_paper_grid.yaml", "overrides": list(sizes.figure1)}
    for key, engine, env, d in (
        ("jax_cold", "jax", cache, "f1-jax"),
        ("jax_warm", "jax", cache, "f1-jax"),
        ("numpy", "numpy", {}, "f1-numpy"),
    ):
        limit = clock.allowance(sizes.caps["figure1"], least=5.0, keep=keep)
        if limit is None:
            out[key] = {"skipped": "out of time"}
            continue
        r = run_cli(cfg, tmp / d, engine, 1 if engine == "jax" else jobs, env, limit, sizes.figure1)
        if r is None:
            done = _cells_done(tmp / d)
            out[key] = {"skipped": f"did not finish in {limit:.0f} s", "cells_done": done}
            print(f"  figure1 {key}: did not finish in {limit:.0f} s ({done} cells)", flush=True)
            continue
        out[key] = {"wall_s": r[0], "cpu_s": r[1], "jobs": 1 if engine == "jax" else jobs}
        out[key].update(_time_split(tmp / d))
        if key == "jax_cold":
            import pandas as pd

            out["cells"] = int(len(pd.read_csv(tmp / d / "runs.csv", usecols=["cell_id"])))
        print(f"  figure1 {key}: {r[0]:.1f} s wall, {r[1]:.1f} CPU-s", flush=True)
    if "wall_s" in out["jax_cold"] and "wall_s" in out["jax_warm"]:
        out["compile_s"] = out["jax_cold"]["wall_s"] - out["jax_warm"]["wall_s"]
    if "wall_s" in out["numpy"] and "wall_s" in out["jax_warm"]:
        out["compare"] = compare_runs(tmp / "f1-jax", tmp / "f1-numpy")
        out["equal"] = all(v["equal"] for v in out["compare"].values())
    return out


def stage_cell(
    label: str,
    raw: dict,
    cells: list[int],
    clock: Clock,
    caps: tuple,
    dev: dict,
    keep: float = 0,
    loop_cap: float = 0,
):
    """One cell of ``raw`` (config mapping): the jax pass alone (and its CPU pass), then batched
    passes of ``cells[1:]`` cells, then (``loop_cap > 0``, off CPU) the cell's first rounds with
    the search as a loop (:func:`search_as_loop`). ``caps``: (jax, cpu, batch) seconds;
    ``keep``: seconds left for the stages after this one."""
    from ilnrun.config import ConfigError

    jax_cap, cpu_cap, batch_cap = caps
    if clock.allowance(jax_cap, least=5.0, keep=keep) is None:
        return {"label": label, "skipped": "out of time", "T": raw["dataset"]["T"]}
    t0 = time.perf_counter()
    try:
        ec = engine_cell(raw)
    except ConfigError as exc:
        why = "; ".join(msg for _, msg in exc.problems)
        print(f"  {label}: skipped: {why}", flush=True)
        return {
            "label": label,
            "skipped": f"does not fit this host: {why}",
            "T": raw["dataset"]["T"],
        }
    data_s = time.perf_counter() - t0
    why = fits_device(ec, 1, dev)
    if why:
        print(f"  {label}: skipped: {why}", flush=True)
        return {"label": label, "skipped": why, "T": ec.T, "m": ec.m}
    limit = clock.allowance(jax_cap, least=5.0, keep=keep)
    if limit is None:
        return {"label": label, "skipped": "out of time", "T": ec.T, "m": ec.m}
    # the CPU pass's allowance comes out of what is left after the jax pass
    cpu = clock.allowance(jax_cap + cpu_cap, keep=keep) if cpu_cap else None
    cpu = None if cpu is None else min(cpu_cap, max(1.0, cpu - limit))
    row = bench_cell(label, ec, limit, cpu, dev)
    row["data_build_s"] = data_s
    row["batched"] = []
    for n in cells[1:]:
        why = fits_device(ec, n, dev)
        lim = clock.allowance(batch_cap, least=3.0, keep=keep)
        if why or lim is None:
            row["batched"].append({"cells": n, "skipped": why or "out of time"})
            continue
        try:
            j = jax_pass(ec, ec.batch(n), lim)
        except Exception as exc:  # out of device memory, say: the single cell's row stays
            traceback.print_exc()
            row["batched"].append({"cells": n, "skipped": f"failed: {type(exc).__name__}"})
            continue
        j.pop("losses_cell0")
        row["batched"].append(j)
        print(
            f"  {label}, {n} cells batched: {j['rounds']:,} rounds in {j['pass_s']:.2f} s, "
            f"{j['samples_per_s'] / 1e6:.1f} M samples/s (one cell: "
            f"{row['jax']['samples_per_s'] / 1e6:.1f} M)",
            flush=True,
        )
    losses = row.pop("_losses")
    lim = clock.allowance(loop_cap, least=3.0, keep=keep) if loop_cap else None
    if lim is not None and search_method() != "scan":
        try:
            row["search_loop"] = search_as_loop(ec, lim, row["jax"], losses)
        except Exception as exc:
            traceback.print_exc()
            row["search_loop"] = {"skipped": f"failed: {type(exc).__name__}"}
    del ec
    gc.collect()
    return row


def search_method() -> str:
    """The form of the binary search the jax engine compiles here (``ilnrun.jax_ops``)."""
    from ilnrun import jax_ops

    return jax_ops.search_method()


def search_as_loop(ec: EngineCell, limit: float, main: dict, losses: np.ndarray) -> dict:
    """The cell's first rounds with the search as a loop (jax's ``scan``, the engine's only form
    before the unrolled one) against the pass just timed with the unrolled search, on the rounds
    both ran: what unrolling the search bought on this device. The same indices either way."""
    from ilnrun import jax_ops
    from ilnrun.engines import jax_runner

    jax_runner._PROGRAMS.clear()
    jax_ops.SEARCH_METHOD = "scan"
    try:
        j = jax_pass(ec, ec.batch(1), limit)
    finally:
        jax_ops.SEARCH_METHOD = None
        jax_runner._PROGRAMS.clear()
    rounds = min(j["rounds"], main["rounds"])
    loop_s = time_at(j["marks"], rounds)
    unrolled_s = time_at(main["marks"], rounds)
    same = bool(np.array_equal(j["losses_cell0"][:rounds], losses[:rounds]))
    out = {
        "rounds": rounds,
        "loop_s": loop_s,
        "unrolled_s": unrolled_s,
        "loop_us_per_round": 1e6 * loop_s / rounds,
        "unrolled_us_per_round": 1e6 * unrolled_s / rounds,
        "speedup": loop_s / unrolled_s if unrolled_s > 0 else math.nan,
        "same_losses": same,
    }
    print(
        f"    search as a loop: {out['loop_us_per_round']:.0f} us a round against "
        f"{out['unrolled_us_per_round']:.0f} unrolled (x{out['speedup']:.2f}) on {rounds:,} "
        f"rounds; the same losses: {same}",
        flush=True,
    )
    return out


def measure(sizes: Sizes, clock: Clock, dev: dict, skip: set[str], tmp: Path, save) -> dict:
    """Every stage in turn, within ``clock`` (``tmp``: a scratch directory); ``save(stages)``
    after each, so that a run stopped from outside keeps what it measured. A stage that fails
    (out of device memory, say) is recorded with its error and the next one runs."""
    stages: dict = {}
    c = sizes.caps
    later = [k for k in ("sg_big", "theorem1") if k not in skip]
    (T1, m1), (T2, m2) = sizes.sg
    big = (c["jax_big"], c["cpu_big"], 0)
    plan = [
        (
            "distribution",
            "1. jax against numpy, in distribution",
            lambda: stage_distribution(*sizes.dist),
        ),
        (
            "sg",
            f"2. one Shrinking Gradient cell, T = {T1:,}, m = {m1:,}",
            lambda: stage_cell(
                "SG cell",
                sg_config(T1, m1),
                [1, sizes.batch],
                clock,
                (c["jax"], c["cpu"], c["batch"]),
                dev,
                loop_cap=c["loop"],
            ),
        ),
        (
            "figure1",
            "3. figure1 (configs/figure1_paper_grid.yaml) on the jax engine",
            lambda: stage_figure1(tmp, sizes, clock, sizes.keep["figure1"] * len(later) / 2),
        ),
        (
            "sg_big",
            f"4. one Shrinking Gradient cell, T = {T2:,}, m = {m2:,}",
            lambda: stage_cell(
                "SG cell",
                sg_config(T2, m2),
                [1],
                clock,
                big,
                dev,
                sizes.keep["sg_big"] if "theorem1" in later else 0.0,
            ),
        ),
        (
            "theorem1",
            f"5. Theorem 1 (configs/theorem1.yaml), T = {sizes.theorem1_T:,}",
            lambda: stage_cell(
                "Theorem 1 cell", theorem1_config(sizes.theorem1_T), [1], clock, big, dev
            ),
        ),
    ]
    for name, title, run in plan:
        if name in skip:
            continue
        print(title, flush=True)
        try:
            stages[name] = run()
        except Exception as exc:  # recorded; the next stage still runs
            traceback.print_exc()
            stages[name] = {"label": name, "error": f"{type(exc).__name__}: {exc}"[:500]}
            print(f"  {name}: failed: {stages[name]['error']}", flush=True)
        gc.collect()
        save(stages)
    return stages


# ----------------------------------------------------------------------------------------------
# the report's section


def _n(x: float | None, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals (3 significant digits below 1); ``–`` for none."""
    if x is None or not math.isfinite(x):
        return "–"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.{digits}f}"


def _rate(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    return f"{x / 1e9:.2f} G" if x >= 1e9 else f"{x / 1e6:.1f} M"


HOW = (
    "Run on a GPU machine: `PYTHONPATH=. timeout 540 python3 bench/gpu.py --out DIR` where "
    "python3's jax already sees the GPU (else `pip install -e '.[gpu]'` first): about 8 "
    f"minutes (`--budget` seconds for the stages, default {GPU_BUDGET:.0f}, plus building the "
    "T = 10⁶ data); `DIR/gpu.json` and `DIR/gpu.md` are written after every stage. Then, where "
    "the report is committed, "
    "`python bench/gpu.py --from-json DIR/gpu.json` writes this section and "
    "`experiments/performance/gpu.json` (`--record` does both at once on the GPU machine). "
    "`make bench` runs it too; without a GPU it prints `no GPU: skipped` and keeps the recorded "
    "figures. `--cpu-ok` runs small sizes on jax's CPU backend to test the script (never "
    "recorded)."
)


def _search_lines(R: dict) -> list[str]:
    """The form of the search the jax passes used and, where timed, the loop form against it."""
    search = R["env"].get("search_method")
    if not search:
        return []
    line = (
        f"The jax passes above searched with jax's `{search}` form of the binary search "
        "(`ilnrun/jax_ops.py`)."
    )
    loop = R["stages"].get("sg", {}).get("search_loop")
    if loop and "skipped" in loop:
        line += f" The same cell with the search as a loop: {loop['skipped']}."
    elif loop:
        line += (
            " The same cell with the search as a loop (`scan`, the engine's only form before): "
            f"{loop['loop_us_per_round']:.0f} µs a round against "
            f"{loop['unrolled_us_per_round']:.0f} µs unrolled (×{_n(loop['speedup'])}) on its "
            f"first {loop['rounds']:,} rounds; the same losses: "
            + ("**yes**" if loop["same_losses"] else "**no**")
            + "."
        )
    return ["", line]


def render(R: dict | None) -> list[str]:
    """The report's section from a run's JSON (``None``: no figures recorded)."""
    L = [BEGIN, "## 8. GPU", ""]
    if R is None:
        L += [
            "`bench/gpu.py` times the jax engine on a GPU in one prepared run: figure1 "
            "(`configs/figure1_paper_grid.yaml`, cold and warm), one Shrinking Gradient cell at "
            "T = 10⁵ (m = 5·10⁴, alone and 8 cells batched) and at T = 10⁶ (m = 5·10⁵), and "
            "Theorem 1's cell (`configs/theorem1.yaml`) at T = 10⁶ if it fits, each against the "
            "compiled CPU pass on the same machine, after a check that the jax and numpy engines "
            "agree in distribution. Goal (issue 28): a T = 10⁵ cell at least ×20 the compiled "
            "CPU pass.",
            "",
            "**No GPU figures have been recorded yet**: no GPU was at hand where this report was "
            "made.",
            "",
            HOW,
            END,
        ]
        return L
    env = R["env"]
    dev = env["device"]
    v = env["versions"]
    L += [
        f"Device: **{dev.get('name')}** ({dev.get('describe')}"
        + (f", {dev['memory_bytes'] / 2**30:.0f} GiB for jax" if dev.get("memory_bytes") else "")
        + f"); host CPU {env['host_cpu']}, {env['host_cores']} cores. jax {v.get('jax')}, jaxlib "
        f"{v.get('jaxlib')}, numba {v.get('numba')}, numpy {v.get('numpy')}, Python "
        f"{v.get('python')}; code {env.get('commit') or '(unknown)'}; {env['date']}; "
        f"`bench/gpu.py --budget {R['budget_s']:.0f}` took {R['wall_s']:.0f} s"
        + (
            " (**--cpu-ok: CPU figures, a test of the script, not GPU figures**)"
            if env["mode"] != "gpu"
            else ""
        )
        + ".",
        "",
    ]
    S = R["stages"]
    cellrows = [S[k] for k in ("sg", "sg_big", "theorem1") if k in S]
    if cellrows:
        L += [
            "**Cells** (the cell as `ilnrun run` plans it, its own key and numpy seed). *jax*: "
            "wall seconds of the pass, after the data were put on the device and the program "
            "compiled ahead of time (both timed apart); a pass that ran past its allowance "
            "stopped at a chunk of 256 rounds and its whole pass is extrapolated at the rate of "
            "its last quarter of rounds (*ext.*). *CPU*: the compiled pass (`fit_compiled`, one "
            "thread), CPU seconds, on the first rounds of the same cell; where it did not run "
            "whole, the rest of the pass is extrapolated at the rate of its last half of rounds "
            "— a lower bound, since later rounds gather from more rows, out of cache. *Same "
            "rounds*: jax against CPU on the rounds both ran. m of an SG cell: its samples "
            "budget (`dsgd_k` a round: 5·10⁴ at T = 10⁵) spread over the T − 1 rounds that "
            "draw; of Theorem 1's: ⌈c B⁴ T log(BT)⌉, c = 0.01, B = 1 "
            "(`configs/theorem1.yaml`).",
            "",
            "| cell | T | m | D | data to device (s) | jax compile (s) | jax rounds run | jax "
            "pass (s) | jax whole pass (s) | jax samples/s | CPU rounds run | CPU (CPU-s) | CPU "
            "whole pass (CPU-s) | ×, same rounds | ×, whole pass |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in cellrows:
            if "jax" not in r:
                why = f"failed: {r['error']}" if "error" in r else f"skipped: {r.get('skipped')}"
                T, m = (f"{r[k]:,}" if k in r else "" for k in ("T", "m"))
                L.append("| " + " | ".join([r["label"], T, m, "", why] + [""] * 10) + " |")
                continue
            j, c = r["jax"], r.get("cpu")
            ext = "" if j["whole"] else " ext."
            cells = (
                f"| {r['label']} | {r['T']:,} | {r['m']:,} | {r['D']:,} | {_n(j['put_s'])} | "
                f"{_n(j['compile_s'], 1)} | {j['rounds']:,} | {_n(j['pass_s'])} | "
                f"{_n(j['whole_pass_s'], 1)}{ext} | {_rate(j['samples_per_s'])} |"
            )
            if c:
                cext = "" if c["whole"] else " ext."
                cells += (
                    f" {c['rounds']:,} | {_n(c['cpu_s'])} | {_n(c['whole_pass_cpu_s'], 1)}{cext} | "
                    f"×{_n(r['speedup_same_rounds'])} | ×{_n(r['speedup_whole_pass'])} |"
                )
            else:
                cells += " | | | | |"
            L.append(cells)
        sg = S.get("sg", {})
        if "speedup_whole_pass" in sg:
            x = sg["speedup_whole_pass"]
            L += [
                "",
                f"Goal: a T = {sg['T']:,} cell ≥ ×{GOAL_SPEEDUP:.0f} the compiled CPU pass: "
                f"×{_n(x)} over the whole pass"
                + ("" if sg["jax"]["whole"] and sg["cpu"]["whole"] else " (extrapolated as said)")
                + f", ×{_n(sg['speedup_same_rounds'])} on the same {sg['same_rounds']:,} rounds: "
                + (
                    "not judged (CPU figures)"
                    if env["mode"] != "gpu"
                    else "**met**"
                    if x >= GOAL_SPEEDUP
                    else "**not met**"
                )
                + "; numbers equal in distribution (below): "
                + (
                    "not checked"
                    if "distribution" not in S
                    else "**yes**"
                    if S["distribution"].get("equal")
                    else "**no**"
                )
                + ".",
            ]
        L += _search_lines(R)
        batched = [(r, b) for r in cellrows for b in r.get("batched", []) if "jax" in r]
        if batched:
            L += [
                "",
                "**Cells batched** (the cell and copies with other keys in one lockstep batch, "
                "as the engine batches the cells of one shape):",
                "",
                "| cell | T | m | cells | rounds run | pass (s) | samples/s | "
                "one cell's samples/s |",
                "|---|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for r, b in batched:
                if "skipped" in b:
                    L.append(
                        f"| {r['label']} | {r['T']:,} | {r['m']:,} | {b['cells']} | "
                        f"skipped: {b['skipped']} | | | |"
                    )
                    continue
                L.append(
                    f"| {r['label']} | {r['T']:,} | {r['m']:,} | {b['cells']} | {b['rounds']:,} | "
                    f"{_n(b['pass_s'])} | {_rate(b['samples_per_s'])} | "
                    f"{_rate(r['jax']['samples_per_s'])} |"
                )
    dist = S.get("distribution")
    if dist and "error" in dist:
        L += ["", f"**Equal in distribution**: failed: {dist['error']}"]
    elif dist:
        L += [
            "",
            f"**Equal in distribution** (T = {dist['T']:,}, D = {dist['D']}, {dist['seeds']} "
            "seeds each: the jax engine's cells with keys `SeedSequence(1000 + s)`, numpy's "
            "`fit` with seeds 0..; z = difference of the means over its standard error, equal "
            f"when |z| < {Z_LIMIT:.0f}):",
            "",
            "| setting | m | quantity | jax mean | numpy mean | z | |",
            "|---|---:|---|---:|---:|---:|---|",
        ]
        for name, s in dist["settings"].items():
            for q in ("online_loss", "test_loss", "shrinks"):
                r = s[q]
                L.append(
                    f"| {name} | {s['args']['m']} | {q.replace('_', ' ')} | {r['jax_mean']:.6g} | "
                    f"{r['numpy_mean']:.6g} | {r['z']:+.2f} | "
                    f"{'equal' if r['equal'] else '**DIFFERENT**'} |"
                )
    f1 = S.get("figure1")
    if f1 and "error" in f1:
        L += ["", f"**figure1 on the jax engine**: failed: {f1['error']}"]
    elif f1:
        L += [
            "",
            f"**figure1 on the jax engine** (`ilnrun run {f1['config']} --engine jax`"
            + (f", `--set {' --set '.join(f1['overrides'])}`" if f1["overrides"] else "")
            + f"{', ' + format(f1['cells'], ',') + ' cells' if 'cells' in f1 else ''}, "
            "evaluation included; compilation ≈ cold − warm"
            + (f" = {f1['compile_s']:.1f} s" if "compile_s" in f1 else "")
            + ")"
            + (f"; {f1['note']}" if f1.get("note") else "")
            + ":",
            "",
            "| run | wall (s) | CPU (s) | jobs | training, summed over cells (s) | "
            "evaluation, summed over cells (s) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for k, label in (
            ("jax_cold", "jax, empty compilation cache"),
            ("jax_warm", "jax, warm"),
            ("numpy", "numpy"),
        ):
            r = f1.get(k, {})
            if "wall_s" in r:
                split = " | ".join(f"{r[q]:.1f}" if q in r else "–" for q in ("train_s", "eval_s"))
                L.append(
                    f"| {label} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['jobs']} | {split} |"
                )
            else:
                done = f" ({r['cells_done']:,} cells done)" if "cells_done" in r else ""
                L.append(f"| {label} | skipped: {r.get('skipped', '')}{done} | | | | |")
        if f1.get("compare"):
            L += [
                "",
                "Test losses, jax against numpy, cell by cell (z: the mean difference over its "
                "standard error):",
                "",
                "| learner | cells | jax mean | numpy mean | z | largest difference | |",
                "|---|---:|---:|---:|---:|---:|---|",
            ]
            for meth, r in f1["compare"].items():
                L.append(
                    f"| {meth} | {r['cells']:,} | {r['jax_mean']:.6g} | {r['numpy_mean']:.6g} | "
                    f"{'–' if r['rounding'] else format(r['z'], '+.2f')} | "
                    f"{r['max_abs_diff']:.1e} | "
                    + (
                        "equal to rounding"
                        if r["rounding"]
                        else "equal"
                        if r["equal"]
                        else "**DIFFERENT**"
                    )
                    + " |"
                )
    L += ["", HOW, END]
    return L


def write_section(report: Path, lines: list[str]) -> None:
    """Put the section into ``report`` between its markers (replacing an earlier one), or
    before its ``## Notes``, or at its end."""
    text = report.read_text() if report.exists() else "# Performance\n"
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        cut = text.find("\n## Notes")
        if cut < 0:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        else:
            text = text[: cut + 1] + block + "\n" + text[cut:]
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)


def load_record(path: Path) -> dict | None:
    """A recorded run's JSON, or ``None`` when there is none."""
    if not path.exists():
        return None
    R = json.loads(path.read_text())
    if R.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {R.get('schema')!r}, expected {SCHEMA}")
    return R


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    return x


# ----------------------------------------------------------------------------------------------


STAGES = ("distribution", "sg", "figure1", "sg_big", "theorem1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-ok", action="store_true", help="without a GPU: small sizes on jax-CPU")
    ap.add_argument("--budget", type=float, default=None, help="seconds for all stages")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-gpu"), help="gpu.json, gpu.md")
    ap.add_argument("--report", default=str(REPORT), help="the report whose section is written")
    ap.add_argument("--record", action="store_true", help="write the section and gpu.json")
    ap.add_argument("--from-json", default=None, help="record the figures of this gpu.json")
    ap.add_argument("--render-only", action="store_true", help="re-write the section only")
    ap.add_argument("--skip", action="append", default=[], choices=STAGES, help="skip a stage")
    ap.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="NAME=SECONDS",
        help="raise or lower one allowance cap (figure1, jax, batch, cpu, loop, jax_big, cpu_big)",
    )
    ap.add_argument(
        "--sizes",
        choices=("auto", "gpu", "cpu"),
        default="auto",
        help="the GPU's sizes or --cpu-ok's (auto: by the device); with --cpu-ok, 'gpu' tests "
        "the time limits and extrapolations on a CPU",
    )
    args = ap.parse_args(argv)
    report = Path(args.report)
    record_path = report.parent / RECORD_NAME
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        ap.error(f"--budget: a positive number of seconds, not {args.budget}")
    caps: dict[str, float] = {}
    for item in args.cap:
        name, _, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if name not in GPU_SIZES.caps or not (math.isfinite(seconds) and seconds > 0):
            ap.error(f"--cap: NAME=SECONDS with NAME in {sorted(GPU_SIZES.caps)}, not {item!r}")
        caps[name] = seconds
    if args.record and args.cpu_ok:
        ap.error("--record records GPU figures only; with --cpu-ok use --out")
    if args.from_json:
        try:
            R = load_record(Path(args.from_json))
        except (OSError, ValueError) as exc:
            ap.error(f"--from-json: {exc}")
        if R is None:
            ap.error(f"--from-json: {args.from_json} does not exist")
        if Path(args.from_json).resolve() != record_path.resolve():
            shutil.copyfile(args.from_json, record_path)
        write_section(report, render(R))
        print(f"recorded {args.from_json} in {report} and {record_path}")
        return 0
    if args.render_only:
        write_section(report, render(load_record(record_path)))
        print(f"wrote the GPU section of {report}")
        return 0
    with tempfile.TemporaryDirectory(prefix="ilnrun-gpu-bench-") as tmp:
        # compilations are timed cold: an empty cache, set before jax is first configured
        os.environ["ILNRUN_JAX_CACHE"] = str(Path(tmp) / "jax-cache")
        dev = detect()
        if not dev["gpu"] and not args.cpu_ok:
            print(f"no GPU: skipped ({dev['why']})")
            if args.record:  # keep the recorded figures in the report run_bench.py wrote anew
                write_section(report, render(load_record(record_path)))
                print(f"the GPU section of {report} re-written from the record, if any")
            return 0
        mode = "gpu" if dev["gpu"] else "cpu-ok"
        gpu_sizes = args.sizes == "gpu" or (args.sizes == "auto" and dev["gpu"])
        sizes = GPU_SIZES if gpu_sizes else CPU_SIZES
        if caps:
            sizes = replace(sizes, caps={**sizes.caps, **caps})
        budget = args.budget if args.budget is not None else (GPU_BUDGET if dev["gpu"] else 150.0)
        print(f"device: {dev['describe']} ({mode}); budget {budget:.0f} s", flush=True)
        clock = Clock(budget)
        R = {
            "schema": SCHEMA,
            "env": environment(dev, mode),
            "budget_s": budget,
            "caps": sizes.caps,
        }
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        PROGRAM_TEXT[0] = out / PROGRAM_NAME
        PROGRAM_TEXT[0].unlink(missing_ok=True)

        def save(stages: dict) -> str:
            R.update(stages=stages, wall_s=clock.elapsed())
            (out / RECORD_NAME).write_text(json.dumps(_jsonable(R), indent=1) + "\n")
            md = "\n".join(render(_jsonable(R))) + "\n"
            (out / "gpu.md").write_text(md)
            return md

        md = save(measure(sizes, clock, dev, set(args.skip), Path(tmp), save))
    R = _jsonable(R)
    print(f"wrote {out / RECORD_NAME} and {out / 'gpu.md'}")
    if args.record:
        shutil.copyfile(out / RECORD_NAME, record_path)
        write_section(report, render(R))
        print(f"recorded in {report} and {record_path}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
