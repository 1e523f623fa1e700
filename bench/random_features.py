"""Doubly SGD and Fixed-Random: the compiled passes against the numpy code, per cell
(``python bench/random_features.py [--T 5000] [--repeat 5]``).

Side by side in one process, the two paths interleaved ``--repeat`` times, CPU time of this
process (``time.process_time``), BLAS on one thread as in every cell; each ratio is
min / median / max over the repeats (the machine may be shared). Every pair of fits is first
checked to be identical (losses, parameters, coefficients, counters).

Cells: figure1's shape (coordinate features, T = 200, D = 800; Doubly SGD k = 1, 4, 16,
Fixed-Random r = 200, 3 200) and a diamonds-shaped cell (d = 9, Fourier and ReLU features,
Doubly SGD k = 1 and Fixed-Random r = 2 000) at ``--T`` rounds.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from ilnrun.features import Coordinate, Fourier, ReLU  # noqa: E402
from ilnrun.learners import doubly_sgd, fixed_random  # noqa: E402


def data(T: int, D: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((T, D)), -1.5, 1.5) / np.sqrt(D) * 2
    return X, np.tanh(X @ rng.standard_normal(D))


def identical(a, b) -> bool:
    return (
        np.array_equal(a.losses, b.losses)
        and np.array_equal(a.predictor.coef, b.predictor.coef)
        and np.array_equal(a.predictor.W, b.predictor.W)
        and a.counters == b.counters
    )


def cells(T: int) -> list[tuple]:
    fig1 = data(200, 800)
    diamonds = data(T, 9)
    out = [
        (f"DSGD coordinate T=200 D=800 k={k}", doubly_sgd, Coordinate(800), fig1,
         dict(eta=0.3, k=k, schedule="inv_sqrt"))
        for k in (1, 4, 16)
    ]  # fmt: skip
    out += [
        (f"FR coordinate T=200 D=800 r={r}", fixed_random, Coordinate(800), fig1,
         dict(eta=0.3, r=r))
        for r in (200, 3200)
    ]  # fmt: skip
    out += [
        (f"DSGD fourier T={T} d=9 k=1", doubly_sgd, Fourier(9, 3.0), diamonds,
         dict(eta=0.3, k=1, schedule="inv_sqrt")),
        (f"DSGD relu T={T} d=9 k=1", doubly_sgd, ReLU(9), diamonds,
         dict(eta=0.1, k=1, schedule="inv_sqrt")),
        (f"FR fourier T={T} d=9 r=2000", fixed_random, Fourier(9, 3.0), diamonds,
         dict(eta=0.3, r=2000)),
    ]  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=5000, help="rounds of the diamonds-shaped cells")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min)")
    for name, module, fmap, (X, y), kw in cells(args.T):
        a = module.fit_compiled(X, y, fmap, np.random.default_rng(1), **kw)
        b = module.fit_numpy(X, y, fmap, np.random.default_rng(1), **kw)
        assert identical(a, b), name
        tn, tc = [], []
        for _ in range(args.repeat):
            for fit, times in ((module.fit_numpy, tn), (module.fit_compiled, tc)):
                t0 = time.process_time()
                fit(X, y, fmap, np.random.default_rng(1), **kw)
                times.append(time.process_time() - t0)
        ratio = np.sort(np.array(tn) / np.array(tc))
        print(
            f"{name:32s} numpy {np.median(tn) * 1e3:8.2f} ms  compiled {np.median(tc) * 1e3:8.2f}"
            f" ms  ratio {ratio[0]:.2f} / {np.median(ratio):.2f} / {ratio[-1]:.2f}  identical",
            flush=True,
        )
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
