"""CPU seconds of the first compilation of the compiled (numba) passes, per feature-map family
(``python bench/first_compile.py [--repeat 3] [--tree PATH]``).

For each family (coordinate, ReLU, Fourier, random-net) a small config that runs every compiled
pass the map has (Shrinking Gradient final and averaged, with its Algorithm-2 test estimates;
Doubly SGD final and averaged; Fixed-Random by SGD and by ridge; kernel OGD and the regret's
replay where the map has a closed-form kernel) is run by ``ilnrun run --jobs 1`` twice in fresh
processes: first on an empty numba cache (``NUMBA_CACHE_DIR`` a new directory), then on the cache
that run filled. The first run's CPU seconds (user + system of the whole process, its start-up
included) less the second's are what compiling costs a first run. ``--repeat`` pairs per family,
alternated; min / median printed. ``--tree`` runs the ``ilnrun`` of another checkout (its root);
``--estimate-draws NAME`` sets ``evaluation.estimate_draws`` (the Algorithm-2 stream, whose
kernels are compiled in place of the default ``multinomial``'s).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

FAMILIES = {
    "coordinate": {"kind": "coordinate"},
    "relu": {"kind": "relu"},
    "fourier": {"kind": "fourier", "sigma": 2.0},
    "random_net": {"kind": "random_net", "h": 8},
}


def config(family: str, draws: str | None = None) -> dict:
    """A small config running every compiled pass of the family's map (its Algorithm-2
    estimates with the stream ``draws``; ``None``: the default)."""
    kernel = family != "random_net"
    methods = {
        "shrinking_gradient": {"eta": 0.3, "average": [False, True]},
        "doubly_sgd": {"eta": 0.3, "nu": [0.0, 0.01], "average": [False, True]},
        "fixed_random": {"eta": 0.3, "solver": ["sgd", "ridge"], "lam": [0.0, 0.1]},
    }
    if kernel:
        methods["kernel_ogd"] = {"eta": 0.3}
    evaluation = {"m_test": 100, "n_test_estimated": 20, "curve_points": 5}
    if kernel:
        evaluation["regret_B"] = 1.0
    if draws is not None:
        evaluation["estimate_draws"] = draws
    return {
        "name": f"first_compile_{family}",
        "seed": 0,
        "repetitions": 1,
        "dataset": {
            "kind": "clipped_gaussian",
            "D": 10,
            "T": 40,
            "n_val": 20,
            "n_test": 40,
            "sparsity": 3,
        },
        "feature_map": FAMILIES[family],
        "budget": {"match": "evaluations", "dsgd_k": 2},
        "evaluation": evaluation,
        "methods": methods,
    }


def cpu_of(cmd: list[str], env: dict, cwd: Path) -> float:
    """User + system CPU seconds of ``cmd`` run to its end (its children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(
    tree: Path, families: list[str], repeat: int, draws: str | None = None, log=print
) -> dict[str, list[tuple[float, float]]]:
    """Per family, ``repeat`` pairs ``(cold, warm)``: CPU seconds of ``ilnrun run --jobs 1`` of
    :func:`config` by the checkout ``tree``, on an empty numba cache and then on the cache that
    run filled (fresh processes; families alternated). ``log`` gets a line per pair."""
    results: dict[str, list[tuple[float, float]]] = {f: [] for f in families}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i in range(repeat):
            for family in families:
                cfg = tmp / f"{family}.yaml"
                cfg.write_text(yaml.safe_dump(config(family, draws), sort_keys=False))
                cache = tmp / f"cache-{family}-{i}"
                cache.mkdir()
                env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(tree)}
                env.pop("ILNRUN_NO_NUMBA", None)
                runs = []
                for label in ("cold", "warm"):
                    out = tmp / f"out-{family}-{i}-{label}"
                    cmd = [sys.executable, "-m", "ilnrun.cli", "run", str(cfg), "--out", str(out)]
                    runs.append(cpu_of([*cmd, "--jobs", "1", "--quiet"], env, tree))
                results[family].append((runs[0], runs[1]))
                log(
                    f"{family:11s} run {i + 1}: cold {runs[0]:6.2f}  warm {runs[1]:6.2f}  "
                    f"compile {runs[0] - runs[1]:6.2f} CPU-s"
                )
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose ilnrun runs")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--estimate-draws", default=None, help="evaluation.estimate_draws")
    args = ap.parse_args()
    tree = args.tree.resolve()
    results = measure(
        tree,
        args.families.split(","),
        args.repeat,
        args.estimate_draws,
        log=lambda line: print(line, flush=True),
    )
    draws = f", estimate_draws {args.estimate_draws}" if args.estimate_draws else ""
    print(
        f"\nfirst compilation, CPU seconds (cold - warm), min / median of {args.repeat}; "
        f"{tree}{draws}"
    )
    for family, pairs in results.items():
        d = [c - w for c, w in pairs]
        cold = [c for c, _ in pairs]
        print(
            f"  {family:11s} compile {min(d):6.2f} / {statistics.median(d):6.2f}   "
            f"cold run {min(cold):6.2f} / {statistics.median(cold):6.2f}"
        )


if __name__ == "__main__":
    main()
