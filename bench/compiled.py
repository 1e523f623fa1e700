"""The compiled kernels against the numpy code (``make bench`` runs it; also on its own:
``python bench/compiled.py [--quick] [--repeat 3] [--figure1] [--out PATH]``).

Measured side by side in one process, the two paths interleaved, ``--repeat`` times; every
ratio is reported as min / median / max over the repeats (the machine may be shared: other
processes only ever add time, and they add it to both paths alike when interleaved). CPU time
of this process (``time.process_time``) and wall time are both kept; the ratios use CPU time.
Native thread pools (BLAS) run one thread, as in every cell.

1. Shrinking Gradient samples/s, compiled (``fit_compiled``) and numpy (``fit_numpy``), at
   (T, m) = (200, 101), (200, 808), (20 000, 10 000), (100 000, 50 000), D = 800, coordinate
   features, iid sampler. The two big sizes run only a prefix of their rounds (the pass over
   the first ``P`` examples; samples/s is per sample drawn, so it is extrapolated per sample to
   the full pass, whose later rounds search and gather from more stored rows). A pass at
   T = 200 is timed over about 4 million samples (that many passes in a row, each path alike).
2. A roofline for the same work: the same draws from the generator (``random(m)``,
   ``integers(0, D, m)``) and the same number of ``X[i, w] x_t[w]`` products, compiled, nothing
   else (``i = floor(u t)``: no search, no signs, no bookkeeping); SG's fraction of it.
3. Algorithm-2 test estimates (``KernelExpansion.predict_estimated``) per second, compiled and
   numpy: figure1's setting (T = 200 stored examples, ``m_test`` = 1 000, D = 800).
4. ``threads`` 1 against 2 on one big cell (T = 100 000, m = 50 000, a prefix of rounds).
5. (``--figure1``) ``ilnrun run configs/figure1_paper_grid.yaml --jobs 2`` end to end: compiled
   with a warm cache, with an empty one (``NUMBA_CACHE_DIR`` a fresh directory), with numba hidden,
   and the code of ``--against`` (a git revision, default the previous commit) warm and empty;
   ``runs.csv`` compared across all of them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ilnrun.features import Coordinate, ReLU  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402
from ilnrun.learners import shrinking_gradient_kernels as kernels  # noqa: E402

D = 800
ETA, SCHEDULE = 0.3, "inv_sqrt"
BEGIN, END = "<!-- compiled kernels: bench/compiled.py -->", "<!-- end compiled kernels -->"


def data(T: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Clipped-Gaussian-like inputs (D = 800) and labels of a sparse linear target."""
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((T, D)) / 2.0, -1.0, 1.0)
    y = np.tanh(X[:, :10].sum(axis=1) / 3.0)
    return X, y


def timed(f):
    """(CPU seconds, wall seconds, result) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = f()
    return time.process_time() - c0, time.perf_counter() - w0, out


def spread(v) -> str:
    v = np.sort(np.asarray(v, dtype=float))
    return f"{v[0]:.2f} / {np.median(v):.2f} / {v[-1]:.2f}"


if kernels.available():
    import numba

    @numba.njit(cache=True)
    def _roofline(X, m, rng):
        """The draws and products of SG's pass over ``X``, nothing else."""
        T, d = X.shape
        acc = 0.0
        for t in range(1, T):
            u = rng.random(m)
            w = rng.integers(0, d, m)
            s = 0.0
            for k in range(m):
                s += X[int(u[k] * t), w[k]] * X[t, w[k]]
            acc += s
        return acc


def bench_sg(sizes, repeat: int) -> list[dict]:
    rows = []
    for T, m, P in sizes:
        X, y = data(T)
        X, y = X[:P], y[:P]
        fmap = Coordinate(D)

        def run(fit, X=X, y=y, m=m, fmap=fmap):
            return fit(X, y, fmap, np.random.default_rng(1), eta=ETA, m=m, schedule=SCHEDULE)

        run(sg.fit_compiled) if P * m < 1e8 else None  # load the compiled code
        cpu = {"numpy": [], "compiled": [], "roofline": []}
        samples = 0
        # a small pass is timed over several passes in a row (timer noise; the same number for
        # the three, so that each runs with the caches it leaves itself)
        reps = max(1, int(4e6 // (m * len(X))))
        for _ in range(repeat):
            c, _, res = timed(lambda run=run, reps=reps: [run(sg.fit_numpy) for _ in range(reps)])
            cpu["numpy"].append(c / reps)
            c, _, res2 = timed(
                lambda run=run, reps=reps: [run(sg.fit_compiled) for _ in range(reps)]
            )
            cpu["compiled"].append(c / reps)
            res, res2 = res[-1], res2[-1]
            assert np.array_equal(res.losses, res2.losses)
            samples = res.counters["features_sampled"]
            c, _, _ = timed(
                lambda X=X, m=m, reps=reps: [
                    _roofline(X, m, np.random.default_rng(1)) for _ in range(reps)
                ]
            )
            cpu["roofline"].append(c / reps * samples / (m * (len(X) - 1)))
        rate = {k: samples / np.array(v) for k, v in cpu.items()}
        rows.append(
            dict(
                T=T,
                m=m,
                P=P,
                samples=samples,
                numpy=rate["numpy"],
                compiled=rate["compiled"],
                roofline=rate["roofline"],
                speedup=rate["compiled"] / rate["numpy"],
                fraction=rate["compiled"] / rate["roofline"],
            )
        )
        print(
            f"  SG T={T:,} m={m:,} (rounds {P:,}): numpy {np.median(rate['numpy']) / 1e6:.1f}, "
            f"compiled {np.median(rate['compiled']) / 1e6:.1f}, roofline "
            f"{np.median(rate['roofline']) / 1e6:.1f} M samples/s; x{spread(rows[-1]['speedup'])}",
            flush=True,
        )
    return rows


def bench_estimates(repeat: int, n_points: int = 200, m_test: int = 1000, relu: bool = False):
    X, y = data(200 + n_points, seed=3)
    fmap = Coordinate(D)
    if relu:  # relu_iln's setting: unit-norm inputs in 80 dimensions
        X = X[:, :80] / np.linalg.norm(X[:, :80], axis=1, keepdims=True)
        fmap = ReLU(80)
    res = sg.fit_numpy(X[:200], y[:200], fmap, np.random.default_rng(1), eta=ETA, m=101)
    p = res.averaged
    paths = {"numpy": p.estimate_numpy, "compiled": p.predict_estimated}  # the dispatch
    p.predict_estimated(X[:200], X[200:], fmap, m_test, np.random.default_rng(2))  # compiles
    cpu, got = {"numpy": [], "compiled": []}, {}
    for _ in range(repeat):
        for name in cpu:
            f = paths[name]
            c, _, got[name] = timed(
                lambda f=f: f(X[:200], X[200:], fmap, m_test, np.random.default_rng(2))
            )
            cpu[name].append(c)
    assert np.array_equal(got["numpy"], got["compiled"]), "compiled estimates differ from numpy"
    rate = {k: n_points / np.array(v) for k, v in cpu.items()}
    out = dict(n=n_points, m_test=m_test, **rate, speedup=rate["compiled"] / rate["numpy"])
    print(
        f"  Algorithm-2 test estimates ({fmap.name}): numpy {np.median(rate['numpy']):,.0f}, "
        f"compiled {np.median(rate['compiled']):,.0f} points/s; x{spread(out['speedup'])}",
        flush=True,
    )
    return out


def bench_threads(T: int, m: int, P: int, repeat: int) -> dict:
    X, y = data(T)
    X, y = X[:P], y[:P]
    fmap = Coordinate(D)
    wall = {1: [], 2: []}
    results = {}
    for _ in range(repeat):
        for n in (1, 2):
            _, w, res = timed(
                lambda n=n: sg.fit_compiled(
                    X, y, fmap, np.random.default_rng(1), eta=ETA, m=m, schedule=SCHEDULE, threads=n
                )
            )
            wall[n].append(w)
            results[n] = res
    same = np.array_equal(results[1].losses, results[2].losses) and np.array_equal(
        results[1].predictor.alpha, results[2].predictor.alpha
    )
    out = dict(T=T, m=m, P=P, wall1=wall[1], wall2=wall[2], identical=same)
    out["speedup"] = np.array(wall[1]) / np.array(wall[2])
    print(
        f"  threads T={T:,} m={m:,} (rounds {P:,}): 1 thread {np.median(wall[1]):.2f} s, 2 "
        f"threads {np.median(wall[2]):.2f} s (wall); x{spread(out['speedup'])}; identical {same}",
        flush=True,
    )
    return out


TIMING = ("wall_s", "eval_s", "train_s", "cell_s")


def bench_figure1(jobs: int, against: str | None, repeat: int) -> dict:
    """``ilnrun run configs/figure1_paper_grid.yaml --jobs J`` end to end, wall and CPU seconds
    (this process's children), min / median / max over ``repeat`` runs, the variants interleaved:
    this code compiled with a warm cache, with an empty one, and with numba hidden (an import
    of numba fails: the numpy code); ``against`` (a git revision, e.g. the previous commit)
    warm and empty. The runs.csv of every variant is compared with this code's (timing columns
    aside, ``check_exact``)."""
    import resource

    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {"this code": ROOT}
        if against:
            sha = subprocess.run(
                ["git", "rev-parse", "--short", against],
                cwd=ROOT,
                check=True,
                text=True,
                capture_output=True,
            ).stdout.strip()
            old = tmp / "old"
            old.mkdir()
            tar = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(old)], input=tar.stdout, check=True)
            trees[f"{against} ({sha})"] = old
        hidden = tmp / "hidden"
        (hidden / "numba").mkdir(parents=True)
        (hidden / "numba" / "__init__.py").write_text('raise ImportError("numba hidden")\n')

        def once(tree: Path, cache: Path, extra_path: str = "") -> tuple[float, float, Path]:
            out = tmp / f"f1-{len(list(tmp.iterdir()))}"
            env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "MPLBACKEND": "Agg"}
            env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, str(tree)) if p)
            cmd = [sys.executable, "-m", "ilnrun.cli", "run", "configs/figure1_paper_grid.yaml"]
            cmd += ["--out", str(out), "--jobs", str(jobs), "--fresh", "--quiet"]
            r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cmd, check=True, cwd=tree, env=env)
            wall, r1 = time.perf_counter() - w0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            return wall, cpu, out

        variants = []
        for label, tree in trees.items():
            warm = tmp / f"cache-{len(variants)}"
            once(tree, warm)  # fills the warm cache (not counted)
            variants.append((f"{label}, compiled, warm cache", tree, lambda w=warm: w, ""))
            variants.append((f"{label}, empty cache", tree, None, ""))
        variants.append(("this code, numba hidden", ROOT, tmp / "never", str(hidden)))
        wall: dict = {v[0]: [] for v in variants}
        cpu: dict = {v[0]: [] for v in variants}
        outs: dict = {}
        for i in range(repeat):
            for label, tree, cache, extra in variants:
                where = cache() if callable(cache) else cache or tmp / f"empty-{label[:4]}-{i}"
                w, c, outs[label] = once(tree, Path(where), extra)
                wall[label].append(w)
                cpu[label].append(c)
                print(
                    f"  figure1 --jobs {jobs}, {label}: {w:.1f} s wall, {c:.1f} s CPU", flush=True
                )

        def numbers(d: Path) -> pd.DataFrame:
            runs = pd.read_csv(d / "runs.csv")
            runs = runs.drop(columns=[c for c in TIMING if c in runs.columns])
            return runs.sort_values("cell_id").reset_index(drop=True)

        ref, same = numbers(outs[variants[0][0]]), {}
        for label in outs:
            try:
                pd.testing.assert_frame_equal(ref, numbers(outs[label]), check_exact=True)
                same[label] = True
            except AssertionError:
                same[label] = False
        return {"jobs": jobs, "repeat": repeat, "wall": wall, "cpu": cpu, "identical": same}


def section(R: dict) -> list[str]:
    """The report's section on the compiled kernels."""
    sgr, est, thr = R["sg"], R["estimates"], R["threads"]
    L = [
        BEGIN,
        "## 0. Compiled kernels (numba) against the numpy code",
        "",
        "Generated by `bench/compiled.py` (part of `make bench`). Both paths run in one process, "
        f"interleaved, {R['repeat']} times; ratios are min / median / max over the repeats, of "
        "CPU time of the process. Coordinate features, iid sampler, D = 800. The compiled path "
        "gives the numpy path's numbers bit for bit (checked in every repeat).",
        "",
        f"Machine load during the run (1-minute load average before / after): {R['load']}.",
        "",
        "| T | m | rounds timed | numpy samples/s | compiled samples/s | compiled / numpy | "
        "roofline samples/s | compiled / roofline |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sgr:
        L.append(
            f"| {r['T']:,} | {r['m']:,} | {r['P']:,} | {np.median(r['numpy']) / 1e6:.1f} M | "
            f"{np.median(r['compiled']) / 1e6:.1f} M | ×{spread(r['speedup'])} | "
            f"{np.median(r['roofline']) / 1e6:.1f} M | {spread(r['fraction'])} |"
        )
    L += [
        "",
        "*Rounds timed*: the big sizes run the pass over their first examples only (samples/s "
        "is per sample drawn; later rounds of the full pass search and gather from more stored "
        "rows, so their rate is somewhat lower); a pass at T = 200 is timed over about 4 million "
        "samples (passes in a row, the same number for numpy, compiled and roofline). "
        "*Roofline*: the same draws from the generator and the same number of "
        "`X[i, w] · x_t[w]` products, compiled, nothing else (rows "
        "`i = ⌊u t⌋`, no search, no signs, no bookkeeping).",
        "",
        f"**Algorithm-2 test estimates** (T = 200 stored examples, `m_test` = {est['m_test']:,}, "
        f"{est['n']} points): coordinate features, D = 800: numpy "
        f"{np.median(est['numpy']):,.0f} points/s, compiled {np.median(est['compiled']):,.0f} "
        f"points/s: ×{spread(est['speedup'])}; ReLU features, D = 80 (relu_iln's setting): numpy "
        f"{np.median(R['estimates_relu']['numpy']):,.0f} points/s, compiled "
        f"{np.median(R['estimates_relu']['compiled']):,.0f} points/s: "
        f"×{spread(R['estimates_relu']['speedup'])}. Both are `predict_estimated` (compiled for "
        "every map) against `estimate_numpy`, equal bit for bit. With coordinate features the "
        "multinomial counts of every point (about 40 000 sequential binomial draws a call here, "
        "each as numpy draws it) bound the gain: the compiled counts are only about 1.6 times "
        "faster than numpy's.",
        "",
        f"**Threads** (one cell, T = {thr['T']:,}, m = {thr['m']:,}, the pass over the first "
        f"{thr['P']:,} examples; wall time): 1 thread {np.median(thr['wall1']):.2f} s, 2 threads "
        f"{np.median(thr['wall2']):.2f} s: ×{spread(thr['speedup'])}; identical numbers: "
        f"{thr['identical']}. The draws stay serial; the search and gather of each round run in "
        "parallel, so the threads meet once a round. On a busy machine this wall-time ratio is "
        "not a measure of the parallel speed-up: compare the 1-thread time with the CPU-time "
        "rate of the same size in the table above.",
    ]
    if R.get("figure1"):
        f1 = R["figure1"]
        L += [
            "",
            "**figure1 end to end** (`ilnrun run configs/figure1_paper_grid.yaml "
            f"--jobs {f1['jobs']}`, "
            f"{f1['repeat']} runs of each variant, interleaved; min / median / max seconds; "
            "runs.csv compared with this code's warm run, timing columns aside):",
            "",
            "| variant | wall s | CPU s | runs.csv identical |",
            "|---|---:|---:|---|",
        ]
        for k in f1["wall"]:
            w, c = np.array(f1["wall"][k]), np.array(f1["cpu"][k])
            L.append(
                f"| {k} | {w.min():.1f} / {np.median(w):.1f} / {w.max():.1f} | "
                f"{c.min():.1f} / {np.median(c):.1f} / {c.max():.1f} | "
                f"{'yes' if f1['identical'][k] else '**no**'} |"
            )
    L += [END]
    return L


def write(path: Path, lines: list[str]) -> None:
    """Put the section into the report (replacing an earlier one), after its machine table."""
    text = path.read_text() if path.exists() else "# Performance\n"
    block = "\n".join(lines)
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        cut = text.find("\n## ")
        cut = len(text) if cut < 0 else cut + 1
        text = text[:cut] + block + "\n\n" + text[cut:]
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test only")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--figure1", action="store_true", help="also figure1 end to end")
    ap.add_argument(
        "--against",
        default="HEAD~1",
        help="with --figure1: a git revision whose code figure1 also runs (default HEAD~1)",
    )
    ap.add_argument("--out", default=str(ROOT / "experiments" / "performance" / "REPORT.md"))
    args = ap.parse_args()
    if not kernels.available():
        print("numba is not available: nothing to compare")
        return
    q = args.quick
    load = f"{os.getloadavg()[0]:.1f}"
    sizes = (
        [(200, 101, 200), (2_000, 1_000, 500)]
        if q
        else [(200, 101, 200), (200, 808, 200), (20_000, 10_000, 4_000), (100_000, 50_000, 1_000)]
    )
    R: dict = {"repeat": args.repeat}
    print("0. compiled kernels against numpy", flush=True)
    with threadpool_limits(1, user_api="blas"):  # BLAS on one thread, as in every cell
        R["sg"] = bench_sg(sizes, args.repeat)
        R["estimates"] = bench_estimates(args.repeat, 20 if q else 200, 100 if q else 1000)
        R["estimates_relu"] = bench_estimates(
            args.repeat, 20 if q else 200, 100 if q else 1000, relu=True
        )
        R["threads"] = bench_threads(*((2_000, 8_000, 200) if q else (100_000, 50_000, 1_000)), 2)
    if args.figure1:
        R["figure1"] = bench_figure1(args.jobs, args.against or None, args.repeat)
    R["load"] = f"{load} / {os.getloadavg()[0]:.1f}"
    write(Path(args.out), section(R))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
