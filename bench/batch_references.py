"""CPU seconds of the batch references' fits, against ``ilnrun validate``'s estimate
(``python bench/batch_references.py [--map relu] [--d 8]``).

Kernel ridge (``O(T^2)`` kernel values, ``O(T^3)`` Cholesky and triangular inverse) and Nyström
kernel ridge (``T r + r^2`` kernel values, ``O(T r^2 + r^3)`` flops) are fitted once at each of
three sizes, in this process, with every native thread pool pinned to one thread (as a cell runs:
:func:`ilnrun.engines.local.one_thread`), timed with ``time.process_time`` around the fit alone
(the data are made before). Each line prints the measured seconds beside the estimate of
:func:`ilnrun.cost.seconds` (the learner's ``seconds`` hook) and their ratio; the
``MEASURED`` literal at the end is what ``tests/test_estimates.py`` keeps (the model's constants
are calibrated against it, on one core of the project's 2-core AMD EPYC build machine).

Peak memory: kernel ridge at the largest size holds ~5 T^2 doubles (5.8 GiB at T = 12 000).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ilnrun import cost  # noqa: E402
from ilnrun.engines.local import one_thread  # noqa: E402
from ilnrun.features import FEATURE_MAPS  # noqa: E402
from ilnrun.learners import LEARNERS  # noqa: E402

# (learner, T, fit arguments): three sizes each, every fit under a couple of minutes
SIZES = [
    ("kernel_ridge", 2_000, {"ridge": 1e-3}),
    ("kernel_ridge", 6_000, {"ridge": 1e-3}),
    ("kernel_ridge", 12_000, {"ridge": 1e-3}),
    ("nystroem_ridge", 5_000, {"rank": 500, "ridge": 1e-3}),
    ("nystroem_ridge", 20_000, {"rank": 1_000, "ridge": 1e-3}),
    ("nystroem_ridge", 40_000, {"rank": 2_000, "ridge": 1e-3}),
]


def measure(name: str, T: int, args: dict, fmap_kind: str, d: int) -> float:
    """CPU seconds of one fit of ``name`` on ``T`` random rows of ``d`` inputs."""
    rng = np.random.default_rng(0)
    X = np.clip(rng.standard_normal((T, d)) / 2.0, -1.0, 1.0)
    y = np.tanh(X.sum(axis=1) / 3.0)
    fmap = FEATURE_MAPS[fmap_kind](d)
    with one_thread():
        t = time.process_time()
        LEARNERS[name].fit(X, y, fmap, np.random.default_rng(1), **args)
        return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", default="relu", choices=sorted(FEATURE_MAPS))
    ap.add_argument("--d", type=int, default=8, help="input dimensions")
    ap.add_argument("--only", default=None, help="one learner's sizes only")
    a = ap.parse_args()
    for name in {n for n, _, _ in SIZES}:  # imports (sklearn's, inside Nyström's fit) untimed
        measure(name, 50, {"rank": 10} if name == "nystroem_ridge" else {}, a.map, a.d)
    rows = []
    for name, T, args in SIZES:
        if a.only and name != a.only:
            continue
        s = measure(name, T, args, a.map, a.d)
        est = cost.seconds(name, None, T, a.d, 0, args, a.map)
        rows.append((name, T, args.get("rank"), round(s, 2)))
        print(f"{name} T={T} {args}: {s:.2f} CPU-s, estimate {est:.2f} s (x{est / s:.2f})")
        sys.stdout.flush()
    print(f"MEASURED = {rows!r}  # map {a.map}, d = {a.d}")


if __name__ == "__main__":
    main()
