"""Small Doubly SGD and Fixed-Random passes on which the compiled kernels and the numpy code must
agree bit for bit, and their golden digests.

``tests/golden/random_features_numpy.json`` was written by the numpy code as it was before the
compiled passes existed (``python tests/random_feature_cases.py``): the digest of every array a
fit returns (losses, the stored parameters ``W`` and coefficients, the counters, the flags) and
of the predictor's values on held-out points, for every feature map x step schedule x k (or r),
with the regularisation's decay (global scale, its rescale, a non-positive factor), a divergent
pass and a deadline already past.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from compiled_cases import digests  # the same digests as the Shrinking Gradient cases

GOLDEN = Path(__file__).resolve().parent / "golden" / "random_features_numpy.json"

MAPS = ("coordinate", "relu", "fourier")
# Doubly SGD: (name, T, D, k, eta, schedule, decay, nu, deadline)
DSGD_SHAPES = (
    ("k1", 40, 7, 1, 0.5, "constant", None, 0.0, None),
    ("k3-nu", 50, 6, 3, 0.4, "inv_sqrt", None, 0.05, None),
    ("k16", 120, 30, 16, 0.3, "inv_sqrt", None, 0.0, None),
    # decay factor 1e-6 a round: the global scale is folded into c below RESCALE_BELOW
    ("rescale", 60, 5, 2, 1.0, "constant", None, 0.999999, None),
    # 1 - gamma nu = -0.5: applied to the stored coefficients directly
    ("negative-factor", 30, 5, 2, 2.0, "constant", None, 0.75, None),
    # the dai preset: nu = 0.01, theta = 150 (inv_t) and its capped form (inv)
    ("dai", 50, 6, 4, 150.0, "inv_t", None, 0.01, None),
    ("dai-cap", 50, 6, 4, 1.0, "inv", 1 / 150, 0.01, None),
    ("diverges", 80, 6, 4, 40.0, "constant", None, 0.0, None),
    ("deadline", 30, 6, 3, 0.5, "constant", None, 0.0, 0.0),
)
# Fixed-Random: (name, T, D, r, eta, schedule, decay, lam, deadline)
FR_SHAPES = (
    ("r1", 40, 7, 1, 0.5, "constant", None, 0.0, None),
    ("r37-lam", 60, 6, 37, 0.4, "inv_sqrt", None, 0.1, None),
    ("r200", 150, 30, 200, 0.3, "inv", 0.01, 0.0, None),
    ("diverges", 80, 6, 16, 60.0, "constant", None, 0.0, None),
    ("deadline", 30, 6, 8, 0.5, "constant", None, 0.0, 0.0),
)
LEARNERS = {"doubly_sgd": DSGD_SHAPES, "fixed_random": FR_SHAPES}


def make_map(kind: str, D: int):
    """A registered feature map of dimension ``D`` (Fourier with ``sigma = 1.3``)."""
    from ilnrun.features import FEATURE_MAPS

    if kind == "fourier":
        return FEATURE_MAPS[kind](D, 1.3)
    return FEATURE_MAPS[kind](D)


def cases() -> list[tuple[str, str, tuple]]:
    return [(name, f, shape) for name, shapes in LEARNERS.items() for f in MAPS for shape in shapes]


def case_id(learner: str, fmap: str, shape: tuple) -> str:
    return f"{learner}-{fmap}-{shape[0]}"


def data(T: int, D: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((T + 30, D)), -1.5, 1.5) / np.sqrt(D) * 2.0
    y = np.tanh(X[:T] @ rng.standard_normal(D))
    return X[:T], y, X[T:]


def run_case(learner: str, kind: str, shape: tuple, path: str = "auto") -> dict[str, np.ndarray]:
    """Every array of one fit and its predictor's values on held-out points, by the ``numpy`` or
    the ``compiled`` path, or as ``fit`` chooses (``auto``)."""
    import importlib

    module = importlib.import_module(f"ilnrun.learners.{learner}")
    _, T, D, size, eta, schedule, decay, reg, deadline = shape
    X, y, X_eval = data(T, D)
    fmap = make_map(kind, D)
    fit = {"auto": "fit", "numpy": "fit_numpy", "compiled": "fit_compiled"}[path]
    kw = {"k": size, "nu": reg} if learner == "doubly_sgd" else {"r": size, "lam": reg}
    res = getattr(module, fit)(
        X,
        y,
        fmap,
        np.random.default_rng(11),
        eta=eta,
        schedule=schedule,
        decay=decay,
        deadline=deadline,
        **kw,
    )
    return {
        "losses": res.losses,
        "W": res.predictor.W,
        "coef": res.predictor.coef,
        "predict": res.predictor.predict(X_eval),
        "counters": np.array([res.counters[k] for k in sorted(res.counters)], dtype=np.int64),
        "flags": np.array([res.diverged, res.timed_out, res.averaged is None, bool(res.extras)]),
    }


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    table = {case_id(*c): digests(run_case(*c)) for c in cases()}
    GOLDEN.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({len(table)} cases)")


if __name__ == "__main__":
    main()
