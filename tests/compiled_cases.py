"""Small Shrinking Gradient fits and Algorithm-2 test estimates on which the compiled kernels
and the numpy code must agree bit for bit, and their golden digests.

``tests/golden/sg_numpy.json`` was written by the numpy code as it was before the compiled
kernels existed (``python tests/compiled_cases.py``): the digest of every array a fit returns and
of every test estimate, so any change of the numbers of either path shows up.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).resolve().parent / "golden" / "sg_numpy.json"

SAMPLERS = ("iid", "systematic")
# (name, T, D, m, eta, schedule, B, printed_sign): a plain pass, one that shrinks, the printed
# (ascent) sign that diverges, and one long enough for the sorted search (m, t >= 512)
SHAPES = (
    ("small", 40, 7, 9, 0.5, "constant", 1.0, False),
    ("shrinks", 60, 5, 16, 3.0, "constant", 1 / 16, False),
    ("diverges", 80, 6, 8, 3.0, "inv_sqrt", 1e6, True),
    ("sorted", 560, 12, 520, 0.3, "inv_sqrt", 1.0, False),
)


def make_map(kind: str, D: int):
    """A registered feature map of dimension ``D`` (Fourier with ``sigma = 1.3``)."""
    from ilnrun.features import FEATURE_MAPS

    if kind == "fourier":
        return FEATURE_MAPS[kind](D, 1.3)
    return FEATURE_MAPS[kind](D)


def compiled_maps() -> tuple[str, ...]:
    """Every registered feature map the compiled kernels know (``kernels.kind_of``): derived
    from the registry, so a map given compiled code is checked with no test edited."""
    from ilnrun.features import FEATURE_MAPS
    from ilnrun.learners import shrinking_gradient_kernels as kernels

    return tuple(k for k in FEATURE_MAPS if kernels.kind_of(make_map(k, 4)) is not None)


def compiled_learners() -> tuple[str, ...]:
    """Every registered learner whose module has compiled code (a ``fit_compiled`` beside its
    ``fit_numpy``)."""
    import sys

    from ilnrun.learners import LEARNERS

    return tuple(
        name
        for name, spec in LEARNERS.items()
        if hasattr(sys.modules[spec.fit.__module__], "fit_compiled")
    )


# the learners with compiled code and their cases (a learner added there must be added here):
# Shrinking Gradient here, Doubly SGD and Fixed-Random in tests/random_feature_cases.py
CHECKED_LEARNERS = ("shrinking_gradient", "doubly_sgd", "fixed_random")
MAPS = compiled_maps()


# the maps the golden digests were written for; a map given compiled code later (random_net)
# is checked compiled == numpy bit for bit on the same cases, without golden values
GOLDEN_MAPS = ("coordinate", "relu", "fourier")


def cases() -> list[tuple[str, str, tuple]]:
    return [(f, s, shape) for f in MAPS for s in SAMPLERS for shape in SHAPES]


def golden_cases() -> list[tuple[str, str, tuple]]:
    """The cases with golden digests."""
    return [c for c in cases() if c[0] in GOLDEN_MAPS]


def case_id(fmap: str, sampler: str, shape: tuple) -> str:
    return f"{fmap}-{sampler}-{shape[0]}"


def data(T: int, D: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((T + 30, D)), -1.5, 1.5) / np.sqrt(D) * 2.0
    y = np.tanh(X[:T] @ rng.standard_normal(D))
    return X[:T], y, X[T:]


def run_case(kind: str, sampler: str, shape: tuple, path: str = "auto") -> dict[str, np.ndarray]:
    """Every array of one fit and of two Algorithm-2 test estimates of its predictors, by the
    ``numpy`` or the ``compiled`` path, or as ``fit`` chooses (``auto``)."""
    from ilnrun.learners import shrinking_gradient

    _, T, D, m, eta, schedule, B, printed = shape
    X, y, X_eval = data(T, D)
    fmap = make_map(kind, D)
    fit = {
        "auto": shrinking_gradient.fit,
        "numpy": shrinking_gradient.fit_numpy,
        "compiled": shrinking_gradient.fit_compiled,
    }[path]
    estimate = {"auto": "predict_estimated", "numpy": "estimate_numpy"}.get(
        path, "estimate_compiled"
    )
    res = fit(
        X,
        y,
        fmap,
        np.random.default_rng(11),
        eta=eta,
        m=m,
        B=B,
        schedule=schedule,
        sampler=sampler,
        printed_sign=printed,
    )
    out = {
        "losses": res.losses,
        "alpha": res.predictor.alpha,
        "alpha_avg": res.averaged.alpha,
        "counters": np.array([res.counters[k] for k in sorted(res.counters)], dtype=np.int64),
        "flags": np.array([res.diverged, res.timed_out]),
        **{k: np.asarray(v) for k, v in res.extras.items()},
    }
    rng = np.random.default_rng(5)
    for name, pred in (("est", res.predictor), ("est_avg", res.averaged)):
        out[name] = getattr(pred, estimate)(X, X_eval, fmap, 37, rng, chunk_pairs=200)
    return out


def digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes()).hexdigest()


def digests(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    return {k: digest(v) for k, v in sorted(arrays.items())}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    table = {case_id(*c): digests(run_case(*c)) for c in golden_cases()}
    GOLDEN.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({len(table)} cases)")


if __name__ == "__main__":
    main()
