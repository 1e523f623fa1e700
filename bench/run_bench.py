"""ilnrun benchmark suite (``make bench``): prints a table and writes
``experiments/performance/REPORT.md``.

What is measured (wall-clock seconds from ``time.perf_counter`` unless stated; the best of
``--repeat`` runs where a run is repeated, since other processes only ever add time):

1. Shrinking Gradient (SG) samples per second — ``features_sampled / wall`` of one training pass
   (coordinate features, clipped-Gaussian data, D = 800) — next to a numpy *roofline* measured in
   the same process on the same data: per round only the primitive operations the algorithm cannot
   avoid, for the same ``m``, ``T`` and ``D`` (draw ``u``, ``searchsorted`` it into the cumulative
   sums, draw ``w``, gather ``x_i[w]`` and ``x_t[w]``, multiply-sum).
2. SG against a literal transcription of Algorithms 1-2 (``bench/literal.py``:
   ``Generator.choice(p=...)`` and O(t) passes every round) at T = 20 000, m = 10 000: the
   speed-up, the agreement of the two with the same seed (paired), and a two-sample test with
   independent seeds on a smaller problem (the difference of mean test losses against its
   standard error).
3. SG time against m (T fixed) and against T (m fixed), with least-squares slopes of
   log(time) on log(m) and log(T).
4. Doubly SGD and Fixed-Random feature evaluations (``train_evals``) per second.
5. The issue's check through the command line: SG alone, D = 800, ``budget: {match: samples,
   dsgd_k: M}`` (so m = M); ``wall_s`` of (T=10 000, m=2 000) and (T=20 000, m=1 000) over
   (T=10 000, m=1 000).
6. ``configs/figure1_paper_grid.yaml``: per-cell train / evaluation time of each learner (one D,
   one repetition, in process) and the wall time of
   ``ilnrun run configs/figure1_paper_grid.yaml --jobs N``.
0. (``bench/compiled.py``, run at the end) the compiled kernels against the numpy code.
7. The jax engine (when jax is installed), on whatever device jax finds: Shrinking Gradient
   samples per second for one cell and for lockstep batches against the numpy engine in the same
   run, and ``ilnrun run configs/figure1_paper_grid.yaml --engine jax`` end to end with a cold
   compilation cache (an empty temporary one) and a warm one (the same again).
8. (``bench/gpu.py``, run at the end) GPU figures: on a GPU, figure1 on the jax engine and single
   and batched Shrinking Gradient cells at T = 10^5 and 10^6 (Theorem 1's too) against the
   compiled CPU pass, recorded in ``experiments/performance/gpu.json`` and the report; without a
   GPU it prints ``no GPU: skipped`` and writes the recorded figures (or says there are none).

Usage: ``python bench/run_bench.py [--quick] [--jobs 2] [--skip-figure1] [--skip-jax]
[--only-jax] [--out PATH]``.
``--quick`` shrinks every size (a smoke test of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from literal import literal_fit  # noqa: E402

from ilnrun import cell as cellmod  # noqa: E402
from ilnrun import config as C  # noqa: E402
from ilnrun.datasets import clipped_gaussian  # noqa: E402
from ilnrun.features import Coordinate  # noqa: E402
from ilnrun.learners import doubly_sgd, fixed_random, shrinking_gradient  # noqa: E402
from ilnrun.learners.shrinking_gradient import draw_indices  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
D = 800
ETA, SCHEDULE = 0.3, "inv_sqrt"

# ----------------------------------------------------------------------------------------------
# helpers


def data(T: int, d: int = D, seed: int = 0, n_test: int = 1):
    return clipped_gaussian(
        np.random.default_rng(seed), D=d, T=T, n_val=1, n_test=n_test, sparsity=10
    )


def best_of(f, repeat: int) -> tuple[float, object]:
    """Best wall time of ``repeat`` calls of ``f`` and the last result."""
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def slope(x, t) -> float:
    """Least-squares slope of log(t) on log(x)."""
    return float(np.polyfit(np.log(x), np.log(t), 1)[0])


class CpuClock:
    """Machine-wide CPU accounting from /proc/stat (Linux): the share of CPU time stolen by the
    hypervisor and spent by other processes while a measurement ran."""

    def __init__(self) -> None:
        self.start = self._read()

    @staticmethod
    def _read() -> list[int] | None:
        try:
            with open("/proc/stat") as fh:
                return [int(v) for v in fh.readline().split()[1:]]
        except OSError:
            return None

    def steal_share(self) -> float:
        end = self._read()
        if self.start is None or end is None:
            return math.nan
        d = [b - a for a, b in zip(self.start, end, strict=False)]
        total = sum(d[:8])
        return d[7] / total if total else math.nan


def sg_fit(X, y, m: int, seed: int = 1, **kw):
    return shrinking_gradient.fit(
        X,
        y,
        Coordinate(X.shape[1]),
        np.random.default_rng(seed),
        eta=ETA,
        m=m,
        schedule=SCHEDULE,
        **kw,
    )


def roofline(X: np.ndarray, weights: np.ndarray, m: int, stride: int, sorted_search: bool) -> float:
    """Samples per second of the primitive numpy operations of Algorithm 2 alone, over rounds
    ``t = 1, 1 + stride, ...`` of a pass over ``X``: ``u = random(m)``; ``i = searchsorted(cum,
    u * total)`` (plain, or SG's sorted search) with ``cum`` the cumulative sums of ``weights``
    (SG's final ``|alpha|``, so that ``i`` is distributed as in SG's pass);
    ``w = integers(0, D, m)``; ``dot(X[i, w], X[t, w])``."""
    T, d = X.shape
    rng = np.random.default_rng(5)
    cum = np.cumsum(weights)
    rounds = [t for t in range(1, T, stride) if cum[t - 1] > 0]
    t0 = time.perf_counter()
    for t in rounds:
        c = cum[: t - 1]
        u = rng.random(m)
        u *= cum[t - 1]
        i = draw_indices(c, u)[0] if sorted_search else c.searchsorted(u, side="right")
        w = rng.integers(0, d, m)
        float(np.dot(X[i, w], X[t][w]))
    return m * len(rounds) / (time.perf_counter() - t0)


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Difference of means, its standard error from the two sample variances, and z."""
    diff = float(a.mean() - b.mean())
    se = float(math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
    return diff, se, diff / se if se > 0 else math.nan


def run_cli(
    cfg: dict, out: Path, jobs: int = 1, engine: str = "numpy", env: dict | None = None
) -> tuple[float, float]:
    """``ilnrun run`` on ``cfg`` into ``out``; returns (wall seconds, CPU seconds of the
    command and its workers)."""
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ilnrun.cli",
            "run",
            str(path),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
            "--fresh",
            "--quiet",
            "--engine",
            engine,
        ],
        check=True,
        env=None if env is None else {**os.environ, **env},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


# ----------------------------------------------------------------------------------------------
# sections


def bench_roofline(sizes, repeat: int) -> list[dict]:
    rows = []
    for T, m in sizes:
        d = data(T)
        stride = max(1, (T * m) // 4_000_000)  # keep the roofline loops to a few seconds
        sg_t, res = best_of(lambda d=d, m=m: sg_fit(d.X_train, d.y_train, m), repeat)
        sg_rate = res.counters["features_sampled"] / sg_t
        weights = np.abs(res.predictor.alpha)
        plain = max(roofline(d.X_train, weights, m, stride, False) for _ in range(repeat))
        srt = max(roofline(d.X_train, weights, m, stride, True) for _ in range(repeat))
        rows.append(
            dict(
                T=T,
                m=m,
                D=D,
                sg_wall_s=sg_t,
                sg_samples_per_s=sg_rate,
                roofline_plain=plain,
                roofline_sorted=srt,
                sg_over_plain=sg_rate / plain,
                sg_over_sorted=sg_rate / srt,
            )
        )
        print(
            f"  SG T={T} m={m}: {sg_rate / 1e6:.2f} M samples/s; roofline {plain / 1e6:.2f} "
            f"(plain search) / {srt / 1e6:.2f} (sorted search) M samples/s",
            flush=True,
        )
    return rows


def bench_literal(T: int, m: int, systematic: bool = False) -> dict:
    """SG (iid sampler, the paper's) and the literal transcription, same data and seed; with
    ``systematic`` also SG with ``sampler: systematic`` (a different estimator: timing only)."""
    d = data(T, n_test=500)
    fmap = Coordinate(D)
    t0 = time.perf_counter()
    res = sg_fit(d.X_train, d.y_train, m, seed=11)
    sg_t = time.perf_counter() - t0
    t0 = time.perf_counter()
    alpha, E = literal_fit(
        d.X_train, d.y_train, fmap, np.random.default_rng(11), eta=ETA, m=m, schedule=SCHEDULE
    )
    lit_t = time.perf_counter() - t0
    # paired (same seed): the online losses and the final predictor
    lit_losses = 0.5 * (E - d.y_train) ** 2
    K = fmap.kernel(d.X_test, d.X_train)
    out = dict(
        T=T,
        m=m,
        sg_wall_s=sg_t,
        literal_wall_s=lit_t,
        speedup=lit_t / sg_t,
        paired_max_dloss=float(np.max(np.abs(res.losses - lit_losses))),
        paired_mean_loss=float(np.mean(lit_losses)),
        paired_max_dalpha=float(
            np.max(np.abs(res.predictor.alpha - alpha)) / np.max(np.abs(alpha))
        ),
        paired_test_sg=float(0.5 * np.mean((K @ res.predictor.alpha - d.y_test) ** 2)),
        paired_test_literal=float(0.5 * np.mean((K @ alpha - d.y_test) ** 2)),
        shrinks=res.counters["shrinks"],
        systematic_wall_s=math.nan,
    )
    msg = f"  T={T} m={m}: SG {sg_t:.1f} s, literal {lit_t:.1f} s -> x{lit_t / sg_t:.2f}"
    if systematic:
        t0 = time.perf_counter()
        sg_fit(d.X_train, d.y_train, m, seed=11, sampler="systematic")
        out["systematic_wall_s"] = time.perf_counter() - t0
        msg += f"; SG systematic {out['systematic_wall_s']:.1f} s"
    print(
        msg + f"; same seed: max |loss_sg - loss_lit| = {out['paired_max_dloss']:.1e}",
        flush=True,
    )
    return out


def bench_statistical(T: int, m: int, d_in: int, seeds: int) -> dict:
    """Independent seeds: SG with seeds 0..R-1, the literal transcription with seeds R..2R-1, on
    one dataset; the exact test loss of each final predictor and each mean online loss."""
    d = clipped_gaussian(np.random.default_rng(2), D=d_in, T=T, n_val=1, n_test=500, sparsity=5)
    fmap = Coordinate(d_in)
    K = fmap.kernel(d.X_test, d.X_train)
    sg_test, lit_test, sg_on, lit_on = [], [], [], []
    for s in range(seeds):
        r = shrinking_gradient.fit(
            d.X_train, d.y_train, fmap, np.random.default_rng(s), eta=ETA, m=m, schedule=SCHEDULE
        )
        sg_test.append(0.5 * np.mean((K @ r.predictor.alpha - d.y_test) ** 2))
        sg_on.append(float(np.mean(r.losses)))
        alpha, E = literal_fit(
            d.X_train,
            d.y_train,
            fmap,
            np.random.default_rng(seeds + s),
            eta=ETA,
            m=m,
            schedule=SCHEDULE,
        )
        lit_test.append(0.5 * np.mean((K @ alpha - d.y_test) ** 2))
        lit_on.append(float(np.mean(0.5 * (E - d.y_train) ** 2)))
    out = {"stat_T": T, "stat_m": m, "stat_D": d_in, "stat_seeds": seeds}
    for name, a, b in (("test", sg_test, lit_test), ("online", sg_on, lit_on)):
        a, b = np.array(a), np.array(b)
        diff, se, z = welch(a, b)
        out.update(
            {
                f"stat_{name}_sg": a.mean(),
                f"stat_{name}_literal": b.mean(),
                f"stat_{name}_diff": diff,
                f"stat_{name}_se": se,
                f"stat_{name}_z": z,
            }
        )
    print(
        f"  independent seeds ({seeds} each, T={T}, m={m}, D={d_in}): test loss z = "
        f"{out['stat_test_z']:+.2f}, online loss z = {out['stat_online_z']:+.2f}",
        flush=True,
    )
    return out


def bench_scaling(ms, Ts, m_fixed: int, T_fixed: int, repeat: int) -> dict:
    by_m, by_T = [], []
    d = data(max(Ts + [T_fixed]))
    for m in ms:
        X, y = d.X_train[:T_fixed], d.y_train[:T_fixed]
        t, _ = best_of(lambda X=X, y=y, m=m: sg_fit(X, y, m), repeat)
        by_m.append(t)
        print(f"  SG T={T_fixed} m={m}: {t:.2f} s", flush=True)
    for T in Ts:
        X, y = d.X_train[:T], d.y_train[:T]
        t, _ = best_of(lambda X=X, y=y: sg_fit(X, y, m_fixed), repeat)
        by_T.append(t)
        print(f"  SG T={T} m={m_fixed}: {t:.2f} s", flush=True)
    return dict(
        ms=list(ms),
        by_m=by_m,
        slope_m=slope(ms, by_m),
        Ts=list(Ts),
        by_T=by_T,
        slope_T=slope(Ts, by_T),
        m_fixed=m_fixed,
        T_fixed=T_fixed,
    )


def bench_feature_learners(T: int, k: int, r: int, m: int, repeat: int) -> list[dict]:
    d = data(T)
    fmap = Coordinate(D)
    rows = []
    for name, fit, kw in (
        ("doubly_sgd", doubly_sgd.fit, {"k": k}),
        ("fixed_random", fixed_random.fit, {"r": r}),
        ("shrinking_gradient", shrinking_gradient.fit, {"m": m}),
    ):
        t, res = best_of(
            lambda fit=fit, kw=kw: fit(
                d.X_train,
                d.y_train,
                fmap,
                np.random.default_rng(1),
                eta=0.01,
                schedule=SCHEDULE,
                **kw,
            ),
            repeat,
        )
        ev = res.counters["train_evals"]
        rows.append(dict(learner=name, T=T, size=kw, train_evals=ev, wall_s=t, evals_per_s=ev / t))
        print(f"  {name} T={T} {kw}: {ev / t / 1e6:.0f} M evaluations/s", flush=True)
    return rows


def bench_cli_check(tmp: Path, T1: int, m1: int, rounds: int) -> dict:
    """The issue's judging check through the command line (``--jobs 1``): one cell per setting
    (seed 0, repetition 0: the same data and draws every time), the three settings run in turn,
    ``rounds`` times, so that a machine whose speed drifts affects them alike; ratios of the
    median (and of the smallest) ``wall_s``."""
    settings = ((T1, m1), (T1, 2 * m1), (2 * T1, m1))
    walls: dict = {k: [] for k in settings}
    for r in range(rounds):
        for T, M in settings:
            cfg = {
                "name": f"sg_T{T}_m{M}",
                "seed": 0,
                "repetitions": 1,
                "dataset": {
                    "kind": "clipped_gaussian",
                    "D": D,
                    "T": T,
                    "n_val": 50,
                    "n_test": 50,
                    "sparsity": 10,
                },
                "feature_map": {"kind": "coordinate"},
                "budget": {"match": "samples", "dsgd_k": M},
                "evaluation": {"m_test": 100, "n_test_estimated": 20, "curve_points": 10},
                "methods": {"shrinking_gradient": {"eta": ETA, "schedule": SCHEDULE}},
            }
            out = tmp / f"{cfg['name']}_{r}"
            run_cli(cfg, out)
            runs = pd.read_csv(out / "runs.csv")
            assert (runs["m"] == M).all(), runs["m"].unique()
            walls[(T, M)].append(float(runs["wall_s"].iloc[0]))
    for (T, M), v in walls.items():
        print(f"  CLI SG T={T} m={M}: wall_s {np.round(v, 2).tolist()}", flush=True)
    w = {k: np.array(v) for k, v in walls.items()}
    base = w[(T1, m1)]
    return dict(
        T1=T1,
        m1=m1,
        reps=rounds,
        walls={f"T={k[0]:,} m={k[1]:,}": v for k, v in walls.items()},
        ratio_m_median=float(np.median(w[(T1, 2 * m1)]) / np.median(base)),
        ratio_T_median=float(np.median(w[(2 * T1, m1)]) / np.median(base)),
        ratio_m_min=float(w[(T1, 2 * m1)].min() / base.min()),
        ratio_T_min=float(w[(2 * T1, m1)].min() / base.min()),
    )


def bench_figure1_cells(repeat: int) -> pd.DataFrame:
    """Per-cell train (``wall_s``) and total time of each learner over the figure1 cells of
    one D (800, the largest) and one repetition, in this process (one core)."""
    cfg = C.load(ROOT / "configs" / "figure1_paper_grid.yaml")
    cells = [c for c in C.cells(cfg) if c.rep == 0 and c.data.get("D") == max(cfg["dataset"]["D"])]
    cellmod.run_cell(cfg, cells[0])  # build the data instance outside the timing
    rows = []
    for _ in range(repeat):
        for c in cells:
            t0 = time.perf_counter()
            rec = cellmod.run_cell(cfg, c)
            rows.append(
                dict(
                    method=c.method,
                    cell=c.id,
                    total_s=time.perf_counter() - t0,
                    train_s=rec["row"]["wall_s"],
                )
            )
    df = pd.DataFrame(rows).groupby(["method", "cell"]).min().groupby("method")
    out = pd.DataFrame(
        {
            "cells": df.size(),
            "train_ms": 1e3 * df["train_s"].mean(),
            "total_ms": 1e3 * df["total_s"].mean(),
        }
    )
    out["eval_and_rest_ms"] = out["total_ms"] - out["train_ms"]
    return out


def bench_figure1_run(tmp: Path, jobs: int) -> dict:
    cfg = C.load(ROOT / "configs" / "figure1_paper_grid.yaml").as_dict()
    cpu = CpuClock()
    wall, cpu_s = run_cli(cfg, tmp / "figure1", jobs=jobs)
    n = len(pd.read_csv(tmp / "figure1" / "runs.csv"))
    cmd = f"ilnrun run configs/figure1_paper_grid.yaml --jobs {jobs}"
    print(f"  {cmd}: {wall:.1f} s ({n} cells)", flush=True)
    return dict(wall_s=wall, cpu_s=cpu_s, cells=n, jobs=jobs, steal=cpu.steal_share())


def jax_sg_batch(X: np.ndarray, y: np.ndarray, m: int, cells: int) -> tuple[float, float, int]:
    """SG on the jax engine: ``cells`` cells (different keys) of one dataset in one lockstep
    batch. Returns (seconds of the first call, compilation included; best of 2 further calls;
    samples drawn per call)."""
    from ilnrun.engines import jax_runner
    from ilnrun.learners import shrinking_gradient_jax as sgj

    T = len(y)
    args = {"eta": ETA, "schedule": SCHEDULE, "m": m, "B": 1.0}
    fmap = Coordinate(X.shape[1])
    data = {"X": X[None], "y": y[None], "fmap": {"d": np.array([X.shape[1]])}}
    ins = sgj.inputs(args, T)
    batch = {k: np.stack([v] * cells) for k, v in ins.items()}
    batch.update(
        inst=np.zeros(cells, dtype=np.int64),
        key=np.stack([np.random.SeedSequence(i).generate_state(2) for i in range(cells)]),
    )
    st = sgj.static(args)
    times, samples = [], 0
    for _ in range(3):
        t0 = time.perf_counter()
        outs = jax_runner.run_batch(sgj, st, T, X.shape[1], Coordinate, data, batch)
        times.append(time.perf_counter() - t0)
        samples = sum(int(o.draws) * m for o in outs)
    del fmap
    return times[0], min(times[1:]), samples


def bench_jax(tmp: Path, quick: bool, jobs: int, figure1: bool) -> dict:
    """Section 7: the jax engine against numpy on this machine's jax device."""
    from ilnrun.engines import jax_env

    dev = jax_env.device()
    gpu = not dev.startswith("cpu")
    if quick:
        sizes = [(500, 100, 1), (500, 100, 8)]
    elif gpu:  # the issue's sizes
        sizes = [(20_000, 10_000, 1), (20_000, 10_000, 16), (200, 808, 2_000), (100_000, 50_000, 1)]
    else:  # a CPU: sizes that finish in seconds
        sizes = [(5_000, 1_000, 1), (5_000, 1_000, 16), (200, 808, 600)]
    rows = []
    for T, m, cells in sizes:
        d = data(T)
        X, y = d.X_train, d.y_train
        t_np, res = best_of(lambda X=X, y=y, m=m: sg_fit(X, y, m), 1)
        cold, warm, samples = jax_sg_batch(X, y, m, cells)
        np_rate = res.counters["features_sampled"] / t_np
        rows.append(
            dict(
                T=T,
                m=m,
                cells=cells,
                numpy_s=t_np,
                numpy_rate=np_rate,
                jax_cold_s=cold,
                jax_s=warm,
                jax_rate=samples / warm,
            )
        )
        print(
            f"  jax SG T={T} m={m} cells={cells}: {samples / warm / 1e6:.1f} M samples/s "
            f"(numpy one cell {np_rate / 1e6:.1f} M/s)",
            flush=True,
        )
    out = {"device": dev, "gpu": gpu, "sg": rows}
    if figure1:
        cfg = C.load(ROOT / "configs" / "figure1_paper_grid.yaml").as_dict()
        if quick:
            cfg["dataset"]["D"], cfg["repetitions"] = [550, 800], 1
        cache = {"ILNRUN_JAX_CACHE": str(tmp / "jax-cache")}
        runs = {}
        if quick:  # the numpy run of the same (reduced) config, for the ratio
            runs["numpy"] = run_cli(cfg, tmp / "f1-numpy", jobs=jobs)[0]
        runs["jax_cold"] = run_cli(cfg, tmp / "f1-jax", engine="jax", env=cache)[0]
        runs["jax_warm"] = run_cli(cfg, tmp / "f1-jax", engine="jax", env=cache)[0]
        out["figure1"] = runs
        print(
            f"  figure1 --engine jax: cold {runs['jax_cold']:.1f} s, warm {runs['jax_warm']:.1f} s",
            flush=True,
        )
    return out


def jax_section(R: dict) -> list[str]:
    """The report's section 7."""
    J = R["jax"]
    L = [
        "",
        "## 7. The jax engine",
        "",
        f"Device: **{J['device']}**. Shrinking Gradient (coordinate features, D = {D}) on the "
        "jax engine: one lockstep batch of `cells` cells of the same dataset, different keys; "
        "*first call* includes compiling the program (an empty in-process cache; the persistent "
        "cache may hold it from an earlier run), *warm* is the best of two further calls. numpy "
        "is one cell of the numpy engine in the same process (`fit`), for the same T and m.",
        "",
        "| T | m | cells | numpy one cell (s) | numpy samples/s | jax first call (s) | "
        "jax warm (s) | jax samples/s | jax / numpy |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in J["sg"]:
        L.append(
            f"| {r['T']:,} | {r['m']:,} | {r['cells']:,} | {r['numpy_s']:.2f} | "
            f"{r['numpy_rate'] / 1e6:.1f} M | {r['jax_cold_s']:.2f} | {r['jax_s']:.3f} | "
            f"{r['jax_rate'] / 1e6:.1f} M | ×{r['jax_rate'] / r['numpy_rate']:.2f} |"
        )
    f1 = J.get("figure1")
    if f1:
        base = f1.get("numpy", (R.get("figure1") or {}).get("wall_s"))
        L += [
            "",
            "`ilnrun run configs/figure1_paper_grid.yaml` end to end (evaluation included"
            + ("; --quick: D = 550 and 800, one repetition" if "numpy" in f1 else "")
            + "):",
            "",
            "| engine | wall (s) | ratio to numpy |",
            "|---|---:|---:|",
        ]
        if base:
            L.append(f"| numpy | {base:.1f} | 1 |")
        for k, label in (("jax_cold", "jax, cold compilation cache"), ("jax_warm", "jax, warm")):
            ratio = f"×{f1[k] / base:.2f}" if base else ""
            L.append(f"| {label} | {f1[k]:.1f} | {ratio} |")
    if not J["gpu"]:
        L += [
            "",
            "No GPU on this machine: the issue's GPU targets (figure1 ≤ 10 s warm / ≤ 40 s "
            "cold; SG ≥ 5·10⁹ samples/s in batches and ≥ 10⁹ for one cell at T = 20,000, "
            "m = 10,000; a T = 100,000, m = 50,000 cell ≤ 5 s) are **not measured here**; on a "
            "GPU this section measures them with the issue's sizes. §8 holds the figures of "
            "the last run of `bench/gpu.py` on a GPU, if any.",
        ]
    return L


# ----------------------------------------------------------------------------------------------
# report


def environment() -> dict:
    from ilnrun.numeric_env import cpu_model

    cpu = cpu_model()
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def write_report(path: Path, R: dict) -> None:
    env, sc, cli, st = R["env"], R["scaling"], R["cli"], R["stat"]
    lit = R["literal"][-1]  # the issue's size: T = 20 000, m = 10 000
    L = [
        "# Performance",
        "",
        "Generated by `make bench` (`bench/run_bench.py`); every number below was measured by "
        "that run, on this machine. Wall-clock seconds, best of "
        f"{R['repeat']} runs where a run is repeated (other processes only ever add time). "
        "Coordinate features on the paper's clipped-Gaussian data, D = 800, step size "
        f"{ETA} ({SCHEDULE}), unless stated.",
        "",
        "| machine | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in env.items()],
        f"| CPU time stolen by the hypervisor during the run | {100 * R['steal']:.1f}% |",
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
    ]
    fig = R.get("figure1")
    if fig:
        L.append(
            f"| `ilnrun run configs/figure1_paper_grid.yaml --jobs {fig['jobs']}` ≤ 60 s | "
            f"{fig['wall_s']:.1f} s | {verdict(fig['wall_s'] <= 60)} |"
        )
    L += [
        f"| SG `wall_s` ×1.6–2.3 when m doubles (CLI, T = {cli['T1']:,}, m = {cli['m1']:,} → "
        f"{2 * cli['m1']:,}, median of {cli['reps']}) | ×{cli['ratio_m_median']:.2f} | "
        f"{verdict(1.6 <= cli['ratio_m_median'] <= 2.3)} |",
        f"| SG `wall_s` ≤ ×2.3 when T doubles (CLI, m = {cli['m1']:,}, T = {cli['T1']:,} → "
        f"{2 * cli['T1']:,}) | ×{cli['ratio_T_median']:.2f} | "
        f"{verdict(cli['ratio_T_median'] <= 2.3)} |",
        f"| SG ≥ 3× faster than the literal Algorithms 1–2 (T = {lit['T']:,}, m = {lit['m']:,})"
        f" | ×{lit['speedup']:.2f} | {verdict(lit['speedup'] >= 3)} |",
        "",
        "## 1. Shrinking Gradient against a numpy roofline",
        "",
        "The roofline is measured in the same process on the same data: per round only the "
        "primitive numpy operations of Algorithm 2 — `u = random(m)`, `i = searchsorted(cum, u·"
        "total)`, `w = integers(0, D, m)`, `dot(X[i, w], X[t, w])` — for the same m, T and D. "
        "*Plain* uses numpy's `searchsorted` on the keys as drawn; *sorted* searches them in "
        "sorted order as SG does for m, t ≥ 512 (`draw_indices`: the same indices, fewer "
        "mispredicted branches). SG additionally applies the signs of α, keeps its counters, "
        "the loss, the shrink test and the averaged predictor.",
        "",
        "| T | m | SG wall (s) | SG samples/s | roofline, plain search | roofline, sorted search "
        "| SG / plain | SG / sorted |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in R["roofline"]:
        L.append(
            f"| {r['T']:,} | {r['m']:,} | {r['sg_wall_s']:.2f} | {r['sg_samples_per_s'] / 1e6:.2f}"
            f" M | {r['roofline_plain'] / 1e6:.2f} M | {r['roofline_sorted'] / 1e6:.2f} M | "
            f"{r['sg_over_plain']:.2f} | {r['sg_over_sorted']:.2f} |"
        )
    L += [
        "",
        "## 2. Against a literal transcription of Algorithms 1–2",
        "",
        "`bench/literal.py` recomputes |α|₁ and q(i) = |α_i|/|α|₁ every round, draws the m "
        "indices with `Generator.choice(t, size=m, p=q)` and divides every coefficient by 4 on a "
        "shrink — O(t) passes every round on top of the m draws.",
        "",
        "| T | m | SG (s) | literal (s) | speed-up | SG, systematic sampler (s) |",
        "|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {r['T']:,} | {r['m']:,} | {r['sg_wall_s']:.1f} | {r['literal_wall_s']:.1f} | "
            f"×{r['speedup']:.2f} | "
            + ("" if math.isnan(r["systematic_wall_s"]) else f"{r['systematic_wall_s']:.1f}")
            + " |"
            for r in R["literal"]
        ],
        "",
        "Both sides draw the same m indices and w's and gather the same features, so the speed-up "
        "is bounded by what the literal version does on top: its O(t) passes, and numpy's plain "
        "search of m random keys inside `choice`, where SG searches them in sorted order. When m "
        "is small against t the O(t) passes dominate the literal rounds; at m ≈ t the shared "
        "O(m log t) work does, and the gather of x_i[w] from a T × D array much larger than the "
        "cache (random rows) costs both the same. The systematic sampler's keys arrive sorted "
        "(timing only: a different, lower-variance estimator).",
        "",
        "**Equal predictions.** Two checks:",
        "",
        "- *Same seed (paired), every run above:* `choice(p=q)` draws its uniforms with "
        "`random(m)` and `w` is drawn next, exactly as SG draws them, so both draw the same "
        "(i, w) pairs and must agree to rounding. Largest difference of the online losses "
        "ℓ_t = ½(E_t − y_t)² over the rounds, largest difference of the final coefficients "
        "relative to the largest, and the exact test loss of each final predictor:",
        "",
        "| T | m | max Δℓ_t | mean ℓ_t | max Δα / max α | test loss SG | test loss literal "
        "| shrinks |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {r['T']:,} | {r['m']:,} | {r['paired_max_dloss']:.1e} | "
            f"{r['paired_mean_loss']:.2e} | {r['paired_max_dalpha']:.1e} | "
            f"{r['paired_test_sg']:.6f} | {r['paired_test_literal']:.6f} | {r['shrinks']} |"
            for r in R["literal"]
        ],
        "",
        f"- *Independent seeds (two-sample):* SG with seeds 0..{st['stat_seeds'] - 1} and the "
        f"literal transcription with seeds {st['stat_seeds']}..{2 * st['stat_seeds'] - 1}, "
        f"T = {st['stat_T']:,}, m = {st['stat_m']}, D = {st['stat_D']}, one dataset. The "
        "tolerance is derived from the variance: the difference of the means must be within 3 "
        "standard errors, SE = √(s²_SG/R + s²_lit/R) with the sample variances s² "
        "(|z| < 3; two-sided level ≈ 0.3% if both are the same algorithm).",
        "",
        "| quantity | SG mean | literal mean | difference | SE | z | |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, label in (("test", "exact test loss of f_{T+1}"), ("online", "mean online loss")):
        z = st[f"stat_{name}_z"]
        L.append(
            f"| {label} | {st[f'stat_{name}_sg']:.6f} | {st[f'stat_{name}_literal']:.6f} | "
            f"{st[f'stat_{name}_diff']:+.2e} | {st[f'stat_{name}_se']:.1e} | {z:+.2f} | "
            f"{'equal' if abs(z) < 3 else 'DIFFERENT'} |"
        )
    L += [
        "",
        "## 3. Time against m and against T",
        "",
        f"SG training pass (`fit`, in process). Against m at T = {sc['T_fixed']:,}; against T at "
        f"m = {sc['m_fixed']:,}. Slopes are least-squares fits of log(time) on log(m) and log(T): "
        "1 means time proportional to the budget; below 1 in m is the fixed per-round cost (a few "
        "numpy calls), above 1 in T the log t of the search and the cache misses of a larger X.",
        "",
        "| m | " + " | ".join(f"{m:,}" for m in sc["ms"]) + " | slope |",
        "|---|" + "---:|" * (len(sc["ms"]) + 1),
        "| wall (s) | "
        + " | ".join(f"{t:.2f}" for t in sc["by_m"])
        + f" | **{sc['slope_m']:.2f}** |",
        "",
        "| T | " + " | ".join(f"{T:,}" for T in sc["Ts"]) + " | slope |",
        "|---|" + "---:|" * (len(sc["Ts"]) + 1),
        "| wall (s) | "
        + " | ".join(f"{t:.2f}" for t in sc["by_T"])
        + f" | **{sc['slope_T']:.2f}** |",
        "",
        "**The issue's check, through the command line** (`ilnrun run`, `--jobs 1`, SG alone, "
        f"D = 800, `budget: {{match: samples, dsgd_k: M}}` so m = M; one cell per setting, the "
        f"three settings run in turn {cli['reps']} times; `wall_s` of every run):",
        "",
        "| setting | wall_s of each run |",
        "|---|---|",
        *[f"| {k} | {', '.join(f'{v:.2f}' for v in vs)} |" for k, vs in cli["walls"].items()],
        "",
        f"Ratios of medians (of minima): m doubled ×{cli['ratio_m_median']:.2f} "
        f"(×{cli['ratio_m_min']:.2f}), target 1.6–2.3; T doubled ×{cli['ratio_T_median']:.2f} "
        f"(×{cli['ratio_T_min']:.2f}), target ≤ 2.3.",
        "",
        "## 4. Feature evaluations per second",
        "",
        "`train_evals / wall` of one training pass (the budget unit: one ψ(x; w)).",
        "",
        "| learner | T | size | train_evals | wall (s) | evaluations/s |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for r in R["feature"]:
        size = ", ".join(f"{k} = {v:,}" for k, v in r["size"].items())
        L.append(
            f"| {r['learner']} | {r['T']:,} | {size} | {r['train_evals']:,} | {r['wall_s']:.2f} |"
            f" {r['evals_per_s'] / 1e6:.0f} M |"
        )
    if fig:
        cells = R["figure1_cells"]
        L += [
            "",
            "## 5. `configs/figure1_paper_grid.yaml`",
            "",
            f"`ilnrun run configs/figure1_paper_grid.yaml --jobs {fig['jobs']}` "
            f"({fig['cells']:,} cells, "
            f"T = 200): **{fig['wall_s']:.1f} s** wall, {fig['cpu_s']:.0f} s of CPU in the command "
            f"and its workers; {100 * fig['steal']:.1f}% of the machine's CPU time was stolen by "
            "the hypervisor meanwhile.",
            "",
            "Per cell (D = 800, one repetition, in process, mean over the cells of the learner; "
            "*train* is `wall_s`, the rest is evaluation — for Shrinking Gradient mostly "
            "`test_loss_estimated`, Algorithm 2 with `m_test` samples on `n_test_estimated` test "
            "points, whose multinomial draws alone take about 8 ms — plus bookkeeping):",
            "",
            "| learner | cells | train (ms) | evaluation and rest (ms) | total (ms) |",
            "|---|---:|---:|---:|---:|",
            *[
                f"| {m} | {int(r.cells)} | {r.train_ms:.1f} | {r.eval_and_rest_ms:.1f} | "
                f"{r.total_ms:.1f} |"
                for m, r in cells.iterrows()
            ],
        ]
    if R.get("jax"):
        L += jax_section(R)
    L += ["", "## Notes", "", *NOTES, ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(L))


NOTES = [
    "- **Identical results.** The optimizations keep every learner's random draws (the same "
    "calls in the same order) and its arithmetic, so `runs.csv` is unchanged bit for bit apart "
    "from `wall_s`: the test suite (`tests/test_fast_paths.py` compares every fast path with the "
    "plain one) and a before/after comparison of `ilnrun run` on coordinate, ReLU and Fourier "
    "configs check this.",
    "- **Where the time goes.** SG's round is O(m log t): the search of the m keys in the "
    "cumulative sums (in sorted order for m, t ≥ 512), the draw of w, and the gather of x_i[w] "
    "from rows spread over the whole T × D array — random memory accesses whose cost grows "
    "once the array outgrows the cache. That, with the log t of the search, is why the T slope "
    "is a little above 1. A round also pays a fixed cost of about ten numpy calls; "
    "`Generator.integers` alone costs about 6 µs a call (half of it `np.prod(size)` inside "
    "numpy), which no public API avoids without changing the random stream.",
    "- **Against the literal transcription** the speed-up is what the literal version does on "
    "top of the shared work: large when m is small against t (its O(t) passes dominate), "
    "smaller at m ≈ t, where both spend their time on the same m draws and gathers.",
    "- **figure1.** At T = 200 the per-call overhead dominates training; Shrinking Gradient's "
    "`test_loss_estimated` (Algorithm 2 on `n_test_estimated` test points with `m_test` samples "
    "each) is about two thirds of its cell time, and its multinomial draws (one binomial per "
    "stored example per test point) cannot be made cheaper without changing the numbers; "
    "`evaluation.n_test_estimated` scales that part.",
    "- **Compiled kernels.** Shrinking Gradient's pass and its Algorithm-2 test estimates run "
    "compiled with numba where it is installed (section 0, `bench/compiled.py`), with the numpy "
    "code's draws and sums (the same BLAS calls, numpy's einsum and pairwise orders written "
    "out), so the numbers are unchanged bit for bit; sections 1-6 time `fit`, i.e. the compiled "
    "path when it ran.",
]


# ----------------------------------------------------------------------------------------------


def _has_jax() -> bool:
    from ilnrun.engines import jax_available

    return jax_available()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test only")
    ap.add_argument("--jobs", type=int, default=2, help="workers for the figure1 run")
    ap.add_argument("--repeat", type=int, default=2, help="repeats of each timed run")
    ap.add_argument("--skip-figure1", action="store_true", help="skip the figure1 run")
    ap.add_argument("--skip-jax", action="store_true", help="skip the jax engine (section 7)")
    ap.add_argument(
        "--only-jax",
        action="store_true",
        help="only section 7 (and figure1 with numpy); prints it, writes no report",
    )
    ap.add_argument(
        "--against",
        default="HEAD~1",
        help="a git revision whose code the figure1 run of section 0 also times (default HEAD~1)",
    )
    ap.add_argument("--out", default=str(ROOT / "experiments" / "performance" / "REPORT.md"))
    args = ap.parse_args()
    q = args.quick
    R: dict = {"env": environment(), "repeat": args.repeat}
    steal = CpuClock()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.only_jax:
            skip = args.skip_figure1 or q  # --quick runs a reduced figure1 in bench_jax
            R["figure1"] = None if skip else bench_figure1_run(tmp, args.jobs)
            R["jax"] = bench_jax(tmp, q, args.jobs, not args.skip_figure1)
            print("\n".join(jax_section(R)))
            return
        print("1. SG against the roofline", flush=True)
        R["roofline"] = bench_roofline(
            [(2_000, 100)] if q else [(20_000, 1_000), (20_000, 10_000)], args.repeat
        )
        print("2. SG against the literal transcription", flush=True)
        R["stat"] = bench_statistical(*((300, 50, 50, 6) if q else (2_000, 200, 100, 40)))
        sizes = (
            [(2_000, 50), (2_000, 500)] if q else [(20_000, 100), (20_000, 1_000), (20_000, 10_000)]
        )
        R["literal"] = [bench_literal(T, m, systematic=(T, m) == sizes[-1]) for T, m in sizes]
        print("3. time against m and T", flush=True)
        R["scaling"] = (
            bench_scaling([100, 200], [1_000, 2_000], 100, 1_000, 1)
            if q
            else bench_scaling(
                [500, 1_000, 2_000, 4_000], [10_000, 20_000, 40_000], 1_000, 10_000, args.repeat
            )
        )
        R["cli"] = bench_cli_check(tmp, *((1_000, 100, 2) if q else (10_000, 1_000, 5)))
        print("4. feature evaluations per second", flush=True)
        R["feature"] = bench_feature_learners(
            *((500, 4, 1_000, 100, 1) if q else (10_000, 4, 20_000, 1_000, args.repeat))
        )
        if not args.skip_figure1:
            print("5. figure1", flush=True)
            R["figure1_cells"] = bench_figure1_cells(1 if q else args.repeat)
            R["figure1"] = bench_figure1_run(tmp, args.jobs)
        if not args.skip_jax and _has_jax():
            print("7. the jax engine", flush=True)
            R["jax"] = bench_jax(tmp, q, args.jobs, not args.skip_figure1)
    R["steal"] = steal.steal_share()
    R["env"]["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    R["env"]["bench_wall_s"] = f"{time.perf_counter() - t_start:.0f}"
    write_report(Path(args.out), R)
    # section 0: the compiled kernels against numpy, put into the report just written
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compiled.py"), "--out", args.out]
        + (["--quick"] if q else [])
        + ([] if args.skip_figure1 or q else ["--figure1", "--against", args.against])
        + ["--jobs", str(args.jobs)],
        check=True,
    )
    # section 8: GPU figures where a GPU is at hand, else the recorded ones (--quick: those)
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu.py"), "--report", args.out]
        + (["--render-only"] if q else ["--record"]),
        check=True,
    )
    print(f"wrote {args.out}")
    print(Path(args.out).read_text().split("## 1.")[0])


if __name__ == "__main__":
    main()
