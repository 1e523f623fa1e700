"""The compiled kernels against the numpy code (``make bench`` runs it; also on its own:
``python bench/compiled.py [--quick] [--repeat 3] [--figure1] [--out PATH]``).

Measured side by side in one process, the two paths interleaved, ``--repeat`` times; every
ratio is reported as min / median / max over the repeats (the machine may be shared: other
processes only ever add time, and they add it to both paths alike when interleaved). CPU time
of this process (``time.process_time``) and wall time are both kept; the ratios use CPU time.
Native thread pools (BLAS) run one thread, as in every cell.

1. Shrinking Gradient samples/s, compiled and numpy, at (T, m) = (200, 101), (200, 808),
   (20 000, 10 000), (100 000, 50 000), D = 800, coordinate features, iid sampler. A pass at
   T = 200 is timed whole (``fit_compiled``, ``fit_numpy``; about 4 million samples: that many
   passes in a row, each path alike). The two big sizes are timed on two windows of rounds
   (``bench/sg_windows.py``): the first rounds of the pass, and its last rounds, played from a
   stand-in state (the rounds before them played with m / 100 samples a round), the numpy
   rounds (``fit_numpy``'s estimate and step) and the compiled ones from the same state; their
   losses are compared bit for bit.
2. A roofline for the same windows (``sg_windows.roofline``): the pass's draws, made by the same
   generator calls as the numpy code, and the sum of the pass's own ``X[i, w]`` in draw order by
   a plain loop ("same draws"), and that sum alone ("gather"); the compiled pass's fraction of
   the same-draws roofline.
3. Algorithm-2 test estimates (``KernelExpansion.predict_estimated``) per second, compiled and
   numpy: figure1's setting (T = 200 stored examples, ``m_test`` = 1 000, D = 800).
4. ``threads`` 1 against 2 on one big cell (T = 100 000, m = 50 000), on the first and the last
   window: wall and CPU seconds, and whether the numbers are identical.
5. (``--figure1``) ``ilnrun run configs/figure1_paper_grid.yaml --jobs 2`` end to end: compiled
   with a warm cache, with an empty one (``NUMBA_CACHE_DIR`` a fresh directory), with numba hidden,
   and the code of ``--against`` (a git revision, default the previous commit) warm and empty;
   ``runs.csv`` compared across all of them.
6. Start-up: wall seconds of ``ilnrun --version``, ``ilnrun list`` and ``ilnrun validate
   configs/figure1_paper_grid.yaml`` (fresh processes, median of 7); and the first compilation
   of each feature-map family (``bench/first_compile.py``: CPU seconds of a run on an empty
   numba cache less those of the same run on the cache it filled; median of 3, one family with
   ``--quick``), with ``--figure1`` the code of ``--against`` too, alternated with this code's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import first_compile  # noqa: E402
import sg_windows as win  # noqa: E402

from ilnrun.features import Coordinate, ReLU  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402
from ilnrun.learners import shrinking_gradient_kernels as kernels  # noqa: E402
from ilnrun.numeric_env import one_thread  # noqa: E402

D = 800
ETA, SCHEDULE = 0.3, "inv_sqrt"
BEGIN, END = "<!-- compiled kernels: bench/compiled.py -->", "<!-- end compiled kernels -->"


data = win.data


def timed(f):
    """(CPU seconds, wall seconds, result) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = f()
    return time.process_time() - c0, time.perf_counter() - w0, out


def spread(v) -> str:
    v = np.sort(np.asarray(v, dtype=float))
    return f"{v[0]:.2f} / {np.median(v):.2f} / {v[-1]:.2f}"


def _row(T, m, rounds, samples, cpu) -> dict:
    """A table row: samples/s of each path (CPU time), compiled / numpy, compiled / roofline."""
    rate = {k: samples / np.array(v) for k, v in cpu.items()}
    row = dict(T=T, m=m, rounds=rounds, samples=samples, **rate)
    row["speedup"] = rate["compiled"] / rate["numpy"]
    row["fraction"] = rate["compiled"] / rate["roofline"]
    print(
        f"  SG T={T:,} m={m:,} ({rounds}): numpy {np.median(rate['numpy']) / 1e6:.1f}, "
        f"compiled {np.median(rate['compiled']) / 1e6:.1f}, roofline (same draws) "
        f"{np.median(rate['roofline']) / 1e6:.1f}, gather {np.median(rate['gather']) / 1e6:.1f} "
        f"M samples/s; x{spread(row['speedup'])} numpy; {spread(row['fraction'])} of roofline",
        flush=True,
    )
    return row


def bench_whole(T: int, m: int, repeat: int) -> dict:
    """Whole passes (``fit_numpy``, ``fit_compiled``) and the roofline of the same pass."""
    X, y = data(T)
    fmap = Coordinate(D)

    def run(fit):
        return fit(X, y, fmap, np.random.default_rng(1), eta=win.ETA, m=m, schedule=win.SCHEDULE)

    run(sg.fit_compiled)  # load the compiled code
    # the prefix sums of the pass, for the roofline's indices (the compiled rounds of fit)
    st = win.new_pass(X, y, np.random.default_rng(1), m)
    st.rounds(0, T)
    start = np.random.default_rng(1).bit_generator.state
    cpu = {"numpy": [], "compiled": [], "roofline": [], "gather": []}
    # a pass is timed over about 4 million samples (that many passes in a row, each path alike)
    reps = max(1, int(4e6 // (m * T)))
    samples = 0
    for _ in range(repeat):
        c, _, res = timed(lambda: [run(sg.fit_numpy) for _ in range(reps)])
        cpu["numpy"].append(c / reps)
        c, _, res2 = timed(lambda: [run(sg.fit_compiled) for _ in range(reps)])
        cpu["compiled"].append(c / reps)
        assert np.array_equal(res[-1].losses, res2[-1].losses)
        assert np.array_equal(res[-1].losses, st.losses)
        samples = res[-1].counters["features_sampled"]
        both, alone = win.roofline(X, st.cum, start, 0, T, m, reps)
        cpu["roofline"].append(both)
        cpu["gather"].append(alone)
    return _row(T, m, f"whole pass, {T:,} rounds", samples, cpu)


def window_start(X, y, t0: int, m: int):
    """The state a window from round ``t0`` starts from (round 0 of a new pass, or the
    stand-in before ``t0``) and its generator's state."""
    if t0 == 0:
        rng0 = np.random.default_rng(1)
        st0 = win.new_pass(X, y, rng0, m)
    else:
        st0, rng0 = win.stand_in(X, y, t0, m)
    return st0, rng0.bit_generator.state


def bench_window(X, y, m: int, t0: int, t1: int, repeat: int) -> dict:
    """Rounds ``t0 .. t1 - 1`` of the pass over ``(X, y)``, numpy and compiled from the same
    state (from round 0, or a stand-in), and their roofline."""
    T = len(y)
    st0, start = window_start(X, y, t0, m)
    cpu = {"numpy": [], "compiled": [], "roofline": [], "gather": []}
    for _ in range(repeat):
        out = {}
        for name in ("numpy", "compiled"):
            rng = np.random.default_rng()
            rng.bit_generator.state = start
            st = win.new_pass(X, y, rng, m, like=st0)
            if name == "numpy":
                c, _, _ = timed(lambda st=st, rng=rng: win.numpy_rounds(st, X, y, rng, t0, t1, m))
            else:
                c, _, _ = timed(lambda st=st: st.rounds(t0, t1))
            cpu[name].append(c)
            out[name] = st
        assert np.array_equal(out["numpy"].losses[t0:t1], out["compiled"].losses[t0:t1])
        both, alone = win.roofline(X, out["compiled"].cum, start, t0, t1, m)
        cpu["roofline"].append(both)
        cpu["gather"].append(alone)
    samples = int(out["compiled"].counts[1] - st0.counts[1])
    where = "first" if t0 == 0 else "last"
    return _row(T, m, f"{where} {t1 - t0:,} rounds ({t0:,}-{t1 - 1:,})", samples, cpu)


def bench_sg(sizes, repeat: int) -> list[dict]:
    """Section 1's table: whole passes (``k = None``) or the first and last ``k`` rounds."""
    rows = []
    for T, m, k in sizes:
        if k is None:
            rows.append(bench_whole(T, m, repeat))
            continue
        X, y = data(T)
        win.new_pass(X[:300], y[:300], np.random.default_rng(1), m).rounds(0, 300)  # compiles
        rows.append(bench_window(X, y, m, 0, k, repeat))
        rows.append(bench_window(X, y, m, T - k, T, repeat))
        del X, y
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


def bench_threads(T: int, m: int, k: int, repeat: int) -> list[dict]:
    """1 against 2 threads on the first and the last ``k`` rounds of one pass (the last from
    the stand-in state): wall and CPU seconds of this process, identical numbers."""
    X, y = data(T)
    out = []
    for t0 in (0, T - k):
        win.new_pass(X[:300], y[:300], np.random.default_rng(1), m, 2).rounds(0, 300)  # compiles
        st0, start = window_start(X, y, t0, m)
        wall, cpu, res = {1: [], 2: []}, {1: [], 2: []}, {}
        for _ in range(repeat):
            for n in (1, 2):
                rng = np.random.default_rng()
                rng.bit_generator.state = start
                st = win.new_pass(X, y, rng, m, n, like=st0)
                c, w, _ = timed(lambda st=st, t0=t0: st.rounds(t0, t0 + k))
                wall[n].append(w)
                cpu[n].append(c)
                res[n] = (st, rng.bit_generator.state)
        played = t0 + k  # past it the arrays hold what np.empty left: not the pass's numbers
        same = res[1][1] == res[2][1] and all(
            np.array_equal(getattr(res[1][0], a)[:played], getattr(res[2][0], a)[:played])
            for a in ("losses", "a", "cum")
        )
        same = same and np.array_equal(res[1][0].counts, res[2][0].counts)
        row = dict(T=T, m=m, t0=t0, k=k, wall1=wall[1], wall2=wall[2], cpu1=cpu[1], cpu2=cpu[2])
        row["identical"] = same
        row["speedup"] = np.array(wall[1]) / np.array(wall[2])
        print(
            f"  threads T={T:,} m={m:,} rounds {t0:,}-{t0 + k - 1:,}: 1 thread "
            f"{np.median(wall[1]):.2f} s, 2 threads {np.median(wall[2]):.2f} s (wall; CPU "
            f"{np.median(cpu[1]):.2f} / {np.median(cpu[2]):.2f} s); x{spread(row['speedup'])}; "
            f"identical {same}",
            flush=True,
        )
        out.append(row)
    return out


TIMING = ("wall_s", "eval_s", "train_s", "cell_s")
# figure1's variant with the opt-in estimate stream (docs/protocol.md §5.7): other numbers
OPT_IN_SET = "evaluation.estimate_draws=inverse_cdf_v2"
OPT_IN = "this code, compiled, warm cache, `--set " + OPT_IN_SET + "`"
IDENTICAL = {True: "yes", False: "**no**", None: "— (another stream)"}


def checkout(rev: str, where: Path) -> tuple[str, Path]:
    """The files of git revision ``rev`` extracted into ``where`` (``git archive``); returns
    ``("REV (SHA)", where)``, or ``("SHA", where)`` where ``rev`` is that short hash."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, text=True, capture_output=True
    ).stdout.strip()
    where.mkdir(parents=True)
    tar = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(where)], input=tar.stdout, check=True)
    return (sha if rev == sha else f"{rev} ({sha})"), where


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
            label, old = checkout(against, tmp / "old")
            trees[label] = old
        hidden = tmp / "hidden"
        (hidden / "numba").mkdir(parents=True)
        (hidden / "numba" / "__init__.py").write_text('raise ImportError("numba hidden")\n')

        def once(
            tree: Path, cache: Path, extra_path: str = "", sets: tuple[str, ...] = ()
        ) -> tuple[float, float, Path]:
            out = tmp / f"f1-{len(list(tmp.iterdir()))}"
            env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "MPLBACKEND": "Agg"}
            env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, str(tree)) if p)
            cmd = [sys.executable, "-m", "ilnrun.cli", "run", "configs/figure1_paper_grid.yaml"]
            cmd += ["--out", str(out), "--jobs", str(jobs), "--fresh", "--quiet"]
            cmd += [a for kv in sets for a in ("--set", kv)]
            r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cmd, check=True, cwd=tree, env=env)
            wall, r1 = time.perf_counter() - w0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            return wall, cpu, out

        variants = []
        for label, tree in trees.items():
            warm = tmp / f"cache-{len(variants)}"
            once(tree, warm)  # fills the warm cache (not counted)
            if tree == ROOT:
                once(tree, warm, "", (OPT_IN_SET,))  # ... with the opt-in stream's kernels too
            variants.append((f"{label}, compiled, warm cache", tree, lambda w=warm: w, "", ()))
            variants.append((f"{label}, empty cache", tree, None, "", ()))
            if tree == ROOT:  # the opt-in stream (other numbers: compared with nothing)
                variants.append((OPT_IN, tree, lambda w=warm: w, "", (OPT_IN_SET,)))
        variants.append(("this code, numba hidden", ROOT, tmp / "never", str(hidden), ()))
        wall: dict = {v[0]: [] for v in variants}
        cpu: dict = {v[0]: [] for v in variants}
        outs: dict = {}
        for i in range(repeat):
            for label, tree, cache, extra, sets in variants:
                where = cache() if callable(cache) else cache or tmp / f"empty-{label[:4]}-{i}"
                w, c, outs[label] = once(tree, Path(where), extra, sets)
                wall[label].append(w)
                cpu[label].append(c)
                print(
                    f"  figure1 --jobs {jobs}, {label}: {w:.1f} s wall, {c:.1f} s CPU", flush=True
                )

        def numbers(d: Path) -> pd.DataFrame:
            runs = pd.read_csv(d / "runs.csv")
            runs = runs.drop(columns=[c for c in TIMING if c in runs.columns])
            return runs.sort_values("cell_id").reset_index(drop=True)

        def backend(d: Path) -> str:
            return str(json.loads((d / "meta.json").read_text()).get("backend", "?"))

        ref, same = numbers(outs[variants[0][0]]), {}
        for label in outs:
            if label == OPT_IN:
                same[label] = None
                continue
            try:
                pd.testing.assert_frame_equal(ref, numbers(outs[label]), check_exact=True)
                same[label] = True
            except AssertionError:
                same[label] = False
        workers = {label: backend(d) for label, d in outs.items()}
        return {
            "jobs": jobs,
            "repeat": repeat,
            "wall": wall,
            "cpu": cpu,
            "identical": same,
            "backend": workers,
        }


STARTUP = (
    ("ilnrun --version", ["--version"]),
    ("ilnrun list", ["list"]),
    (
        "ilnrun validate configs/figure1_paper_grid.yaml",
        ["validate", "configs/figure1_paper_grid.yaml"],
    ),
)


def bench_startup(repeat: int) -> dict[str, list[float]]:
    """Wall seconds of each :data:`STARTUP` command, ``repeat`` fresh processes each (the
    commands alternated): the ``ilnrun`` script installed beside this Python, else
    ``python -m ilnrun.cli``."""
    script = Path(sys.executable).with_name("ilnrun")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "ilnrun.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: dict[str, list[float]] = {label: [] for label, _ in STARTUP}
    for _ in range(repeat):
        for label, args in STARTUP:
            t = time.perf_counter()
            subprocess.run([*head, *args], cwd=ROOT, env=env, check=True, capture_output=True)
            out[label].append(time.perf_counter() - t)
    return out


def bench_first_compile(quick: bool, against: str | None = None) -> dict:
    """Per feature-map family, the first compilation's CPU seconds (cold less warm run of
    ``bench/first_compile.py``'s config, which runs every compiled pass of the family): three
    pairs each (a median that one disturbed run does not move), one family (ReLU) once with
    ``quick``. With ``against`` (a git revision) that revision's code is measured too,
    alternated with this code's (the machine's speed drifts by up to 10% within an hour: the
    difference in one run is what compares).
    ``{"this code": {family: [seconds]}, "REV (SHA)": {...}}``."""
    families, repeat = (["relu"], 1) if quick else (list(first_compile.FAMILIES), 3)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this code": ROOT}
        if against:
            label, old = checkout(against, Path(tmp) / "old")
            trees[label] = old
        out: dict = {label: {f: [] for f in families} for label in trees}
        for i in range(repeat):
            order = list(trees.items())
            for label, tree in order if i % 2 == 0 else order[::-1]:
                pairs = first_compile.measure(
                    tree,
                    families,
                    1,
                    log=lambda line, lb=label: print(f"  {lb}: {line}", flush=True),
                )
                for f, p in pairs.items():
                    out[label][f] += [cold - warm for cold, warm in p]
    return out


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
        "roofline (same draws) samples/s | gather alone samples/s | compiled / roofline |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sgr:
        L.append(
            f"| {r['T']:,} | {r['m']:,} | {r['rounds']} | {np.median(r['numpy']) / 1e6:.1f} M | "
            f"{np.median(r['compiled']) / 1e6:.1f} M | ×{spread(r['speedup'])} | "
            f"{np.median(r['roofline']) / 1e6:.1f} M | {np.median(r['gather']) / 1e6:.1f} M | "
            f"{spread(r['fraction'])} |"
        )
    L += [
        "",
        "*Rounds timed*: a pass at T = 200 whole, over about 4 million samples (passes in a row, "
        "the same number for each path). The big sizes on two windows of their pass "
        "(`bench/sg_windows.py`): its first rounds, and its last ones, whose search and gather "
        "run among all the stored rows (640 MB at T = 100 000), played from a stand-in state: "
        "the rounds before them played by the compiled pass with m / 100 samples a round; numpy "
        "(the rounds of `fit_numpy`) and compiled start from the same state, and their losses "
        "are compared bit for bit. `python bench/sg_windows.py` times one whole pass at "
        "T = 100 000, m = 50 000 against its roofline (about ten minutes). "
        "*Roofline (same draws)*: the pass's draws, made by the generator calls of the numpy "
        "code (`random()` m times, `integers(0, D, m)`), and the sum of the pass's own "
        "`X[i, w]` in draw order by a plain loop, compiled (the indices found beforehand, "
        "untimed); *gather alone*: that sum without the draws. The compiled pass makes the same "
        "numbers itself, four at a time (`pcg64_kernels`), and starts its reads from memory a "
        "chunk of samples ahead: it can run faster than this roofline's plain loop.",
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
        f"**Threads** (one cell, T = {thr[0]['T']:,}, m = {thr[0]['m']:,}, the first and the "
        f"last {thr[0]['k']:,} rounds as above; wall and CPU seconds of the process, median): "
        + "; ".join(
            f"rounds {r['t0']:,}-{r['t0'] + r['k'] - 1:,}: 1 thread "
            f"{np.median(r['wall1']):.2f} s, 2 threads {np.median(r['wall2']):.2f} s "
            f"(CPU {np.median(r['cpu1']):.2f} / {np.median(r['cpu2']):.2f} s): "
            f"×{spread(r['speedup'])}, identical numbers: {r['identical']}"
            for r in thr
        )
        + ". Each thread draws, orders, searches and gathers its own block of a round's samples "
        "(the stream's numbers for its block, reached by jump-ahead); the threads meet once a "
        "round, for the estimate's sum. On a busy machine (load above the cores) the wall-time "
        "ratio is not a measure of the parallel speed-up.",
    ]
    if R.get("figure1"):
        f1 = R["figure1"]
        L += [
            "",
            "**figure1 end to end** (`ilnrun run configs/figure1_paper_grid.yaml "
            f"--jobs {f1['jobs']}`, "
            f"{f1['repeat']} runs of each variant, interleaved; min / median / max seconds; "
            "runs.csv compared with this code's warm run, timing columns aside; the workers: "
            "the backend `meta.json` records, `fork` or `loky`, the default of each code):",
            "",
            "| variant | workers | wall s | CPU s | runs.csv identical |",
            "|---|---|---:|---:|---|",
        ]
        for k in f1["wall"]:
            w, c = np.array(f1["wall"][k]), np.array(f1["cpu"][k])
            L.append(
                f"| {k} | {f1.get('backend', {}).get(k, '?')} | "
                f"{w.min():.1f} / {np.median(w):.1f} / {w.max():.1f} | "
                f"{c.min():.1f} / {np.median(c):.1f} / {c.max():.1f} | "
                f"{IDENTICAL[f1['identical'][k]]} |"
            )
    if R.get("startup") and R.get("first_compile"):
        fc_this = R["first_compile"]["this code"]
        L += [
            "",
            "**Start-up and first compilation.** Wall seconds of a fresh process, median of "
            f"{len(next(iter(R['startup'].values())))}: "
            + "; ".join(f"`{k}` {np.median(v):.2f} s" for k, v in R["startup"].items())
            + ". The first compilation of each feature-map family: CPU seconds of "
            "`bench/first_compile.py`'s run (every compiled pass of the family: Shrinking "
            "Gradient final and averaged with its Algorithm-2 estimates, Doubly SGD, Fixed-Random "
            "by SGD and by ridge, the regret's replay where the map has a kernel) on an empty "
            "numba cache, less those of the same run on the cache it filled; median of "
            f"{len(fc_this[next(iter(fc_this))])}: "
            + "; ".join(
                f"{k} {np.median(v):.2f} CPU-s"
                + "".join(
                    f" ({lb} in the same run, alternated: {np.median(o[k]):.2f})"
                    for lb, o in R["first_compile"].items()
                    if lb != "this code"
                )
                for k, v in fc_this.items()
            )
            + ". `python bench/compile_profile.py FAMILY` says where the seconds go.",
        ]
    L += targets(R)
    L += [END]
    return L


def targets(R: dict) -> list[str]:
    """Issue #28's targets that this run measures, each with its measured value and verdict:
    figure1 (the 9 600-cell paper grid the issue timed) <= 10 s wall and <= 20 CPU-s with
    ``--jobs 2`` (warm cache, median); ``ilnrun --version``, ``list`` and ``validate`` <= 0.3 s
    wall and the first compilation <= 5 CPU-s per map family (medians); two threads >= x1.6 on
    the big cell (median of each window's wall-time ratios)."""
    rows = []
    f1 = R.get("figure1")
    for warm, what in (
        ("this code, compiled, warm cache", ""),
        (OPT_IN, f" with `--set {OPT_IN_SET}`"),
    ):
        if not (f1 and warm in f1["wall"]):
            continue
        w, c = float(np.median(f1["wall"][warm])), float(np.median(f1["cpu"][warm]))
        rows.append(
            f"| figure1 paper grid{what}, `--jobs {f1['jobs']}`, warm: ≤ 10 s wall | {w:.1f} s | "
            f"{'met' if w <= 10 else 'not met'} |"
        )
        rows.append(
            f"| the same: ≤ 20 CPU-s of the process tree | {c:.1f} CPU-s | "
            f"{'met' if c <= 20 else 'not met'} |"
        )
    for label, walls in R.get("startup", {}).items():
        w = float(np.median(walls))
        rows.append(f"| `{label}` ≤ 0.3 s wall | {w:.2f} s | {'met' if w <= 0.3 else 'not met'} |")
    for family, secs in R.get("first_compile", {}).get("this code", {}).items():
        c = float(np.median(secs))
        rows.append(
            f"| first compilation, {family} features (every compiled pass): ≤ 5 CPU-s | "
            f"{c:.2f} CPU-s | {'met' if c <= 5 else 'not met'} |"
        )
    for r in R.get("threads", []):
        x = float(np.median(r["speedup"]))
        rows.append(
            f"| two threads ≥ ×1.6, rounds {r['t0']:,}-{r['t0'] + r['k'] - 1:,} of T = "
            f"{r['T']:,}, m = {r['m']:,} | ×{x:.2f} | {'met' if x >= 1.6 else 'not met'} |"
        )
    if not rows:
        return []
    return [
        "",
        "**Issue #28's targets** (measured by this run; a wall-time target needs the cores "
        f"idle; 1-minute load before / after: {R['load']}):",
        "",
        "| target | measured | |",
        "|---|---:|---|",
        *rows,
    ]


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
    # (T, m, k): a whole pass (k None), or its first and last k rounds
    sizes = (
        [(200, 101, None), (2_000, 1_000, 200)]
        if q
        else [(200, 101, None), (200, 808, None), (20_000, 10_000, 2_000), (100_000, 50_000, 1_000)]
    )
    R: dict = {"repeat": args.repeat}
    print("0. compiled kernels against numpy", flush=True)
    with one_thread():  # native thread pools on one thread, as in every cell
        R["sg"] = bench_sg(sizes, args.repeat)
        R["estimates"] = bench_estimates(args.repeat, 20 if q else 200, 100 if q else 1000)
        R["estimates_relu"] = bench_estimates(
            args.repeat, 20 if q else 200, 100 if q else 1000, relu=True
        )
        R["threads"] = bench_threads(*((2_000, 8_000, 200) if q else (100_000, 50_000, 1_000)), 3)
    print("6. start-up and first compilation", flush=True)
    R["startup"] = bench_startup(3 if q else 7)
    R["first_compile"] = bench_first_compile(q, args.against if args.figure1 else None)
    if args.figure1:
        R["figure1"] = bench_figure1(args.jobs, args.against or None, args.repeat)
    R["load"] = f"{load} / {os.getloadavg()[0]:.1f}"
    write(Path(args.out), section(R))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
