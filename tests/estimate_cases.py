"""Algorithm-2 test estimates with coordinate features on which the compiled estimates are
checked against the numpy code (``tests/test_estimates_compiled.py``).

``python tests/estimate_cases.py`` writes ``tests/golden/estimates_numpy.json``: the sha256 of
every case's estimates by ``KernelExpansion.estimate_numpy``, written before the compiled
coordinate estimates existed. ``python tests/estimate_cases.py --stream NAME`` writes
``tests/golden/estimates_NAME.json`` and ``.npz``: the same cases drawn by the versioned stream
``NAME`` (``inverse_cdf_v1``, ``inverse_cdf_v2``: ``ilnrun.learners.estimate_draws``), when it
was defined; they keep that stream from changing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from compiled_cases import digest  # the same digests as the Shrinking Gradient cases

GOLDEN = Path(__file__).resolve().parent / "golden" / "estimates_numpy.json"
# the versioned streams (ilnrun.learners.estimate_draws.INVERSE_CDF_V1, INVERSE_CDF_V2)
STREAMS = ("inverse_cdf_v1", "inverse_cdf_v2")

# (name, stored examples n, D, m, eval points, chunk_pairs, alpha kind, layout)
CASES = [
    ("tiny", 1, 1, 1, 1, 1 << 20, "normal", "c"),
    ("small", 7, 5, 13, 9, 50, "normal", "c"),
    ("zeros", 30, 6, 40, 11, 1 << 20, "zeros", "c"),
    ("all_zero", 12, 4, 10, 5, 1 << 20, "all_zero", "c"),
    ("one_dominant", 25, 8, 300, 12, 1000, "dominant", "c"),  # BTPE and p > 0.5
    ("two_heavy", 40, 9, 500, 7, 1 << 20, "heavy", "c"),
    ("last_zero", 20, 3, 64, 8, 130, "last_zero", "c"),
    ("positive", 50, 7, 77, 10, 1 << 20, "positive", "c"),
    ("fortran", 15, 6, 21, 9, 1 << 20, "normal", "f"),
    ("strided", 15, 6, 21, 9, 60, "normal", "strided"),
    ("rows_one_per_chunk", 33, 10, 200, 6, 1, "normal", "c"),
    ("figure1_like", 200, 40, 1000, 20, 1 << 20, "shrunk", "c"),
    ("signed_copy", 4, 3, 200, 3, 1 << 20, "normal", "c"),  # n * D <= pairs: signed copy
    ("flat_sign", 90, 50, 30, 2, 1 << 20, "normal", "c"),  # n * D > pairs: sign per product
]


def alpha_of(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    a = rng.standard_normal(n)
    if kind == "zeros":
        a[rng.random(n) < 0.5] = 0.0
    elif kind == "all_zero":
        a[:] = 0.0
    elif kind == "dominant":
        a *= 1e-3
        a[n // 2] = -5.0
    elif kind == "heavy":
        a *= 1e-2
        a[3], a[-5] = 2.0, -1.5
    elif kind == "last_zero":
        a[-3:] = 0.0
    elif kind == "positive":
        a = np.abs(a)
    elif kind == "shrunk":
        a *= 0.25 ** np.sort(rng.integers(0, 6, n))[::-1]
    return a


def data(case: tuple):
    """``alpha, X_train, X_eval`` of a case (fixed seeds)."""
    name, n, D, m, n_eval, chunk, kind, layout = case
    rng = np.random.default_rng(len(name) * 7919 + n)
    X = rng.standard_normal((n + 3, D)) / 2.0
    X_eval = rng.standard_normal((n_eval, D))
    if layout == "f":
        X, X_eval = np.asfortranarray(X), np.asfortranarray(X_eval)
    elif layout == "strided":
        X = np.repeat(X, 2, axis=1)[:, ::2]
        X_eval = np.repeat(X_eval, 2, axis=1)[:, ::2]
    return alpha_of(kind, n, rng), X, X_eval


def run(case: tuple, method: str = "estimate_numpy", draws: str | None = None) -> np.ndarray:
    """The case's estimates by ``KernelExpansion.<method>`` (generator seeded 17), with the
    stream ``draws`` (``None``: the method's default, ``multinomial``)."""
    from ilnrun.features import Coordinate
    from ilnrun.learners.base import KernelExpansion

    alpha, X, X_eval = data(case)
    _, _, D, m, _, chunk, _, _ = case
    pred = KernelExpansion(alpha)
    rng = np.random.default_rng(17)
    kw = {} if draws is None else {"draws": draws}
    first = getattr(pred, method)(X, X_eval, Coordinate(D), m, rng, chunk, **kw)
    second = getattr(pred, method)(X, X_eval[::-1], Coordinate(D), m, rng, chunk, **kw)
    return np.concatenate([first, second, rng.random(2)])  # and the generator's state after


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if "--stream" in sys.argv[1:]:
        import golden_values as gv

        stream = sys.argv[sys.argv.index("--stream") + 1]
        if stream not in STREAMS:
            sys.exit(f"--stream: one of {', '.join(STREAMS)}")
        table = {c[0]: {"estimates": run(c, draws=stream)} for c in CASES}
        path = GOLDEN.with_name(f"estimates_{stream}.json")
        digests = {i: digest(a["estimates"]) for i, a in table.items()}
        path.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        gv.write(path.with_suffix(".npz"), table)
        return
    GOLDEN.write_text(
        json.dumps({c[0]: digest(run(c)) for c in CASES}, indent=1, sort_keys=True) + "\n"
    )


if __name__ == "__main__":
    main()
