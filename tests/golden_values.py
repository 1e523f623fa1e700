"""Golden values: the arrays the numpy code computed on small cases, stored, and compared with
today's numbers within a stated tolerance (docs/protocol.md, "What is identical").

Why values and not digests: a BLAS kernel (OpenBLAS picks one per CPU: Nehalem, Sandybridge,
Haswell, SkylakeX, Zen, ...) sums a dot product in its own order, so the last bits of the numpy
code's numbers depend on the CPU. On one machine and software stack the numbers are identical
bit for bit (compiled == numpy, any ``--jobs``, backend, threads or resume: those tests compare
with ``assert_array_equal``); across CPUs they agree within :data:`RTOL`. The goldens were first
written as sha256 digests on an AMD EPYC (OpenBLAS Haswell kernels); the stored values were
written on the same kernel (``OPENBLAS_CORETYPE=Haswell``) and hash to those digests, which
``tests/golden/*.json`` keep (``test_golden_values_are_the_digested_numbers``).

The tolerance, array by array:

- integer and boolean arrays (counters, flags, drawn indices): equal;
- float arrays: the same shape, NaN and infinities at the same places with the same values, and
  ``max |a - g| <= RTOL * max |g|`` over the finite entries (a norm-wise bound: an entry that
  comes out of a cancellation, a loss near 0, carries an error on the scale of its operands).

``RTOL = 1e-10``: across the OpenBLAS kernels Nehalem, Sandybridge, Haswell, SkylakeX and Zen
(numpy 2.4, an AMD EPYC with AVX-512), the largest norm-wise difference of any golden array from
the stored values is 1.9e-13 (a Doubly SGD Fourier pass's losses;
``OPENBLAS_CORETYPE=K python tests/golden_values.py --measure``), so the bound leaves a margin of
about 500 for the rounds of a pass that amplify a last-bit difference; a real change of the
numbers (another draw, another step, another order of the updates) moves them by far more.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

RTOL = 1e-10

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def write(path: Path, table: dict[str, dict[str, np.ndarray]]) -> None:
    """Store every case's arrays in one compressed ``.npz`` (keys ``case/name``), byte-stable:
    the members in sorted order with a fixed timestamp, so rewriting the same numbers gives
    the same file."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for case in sorted(table):
            for key in sorted(table[case]):
                buf = io.BytesIO()
                np.save(buf, np.ascontiguousarray(table[case][key]), allow_pickle=False)
                info = zipfile.ZipInfo(f"{case}/{key}.npy", date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, buf.getvalue())


def read(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """The table :func:`write` stored."""
    table: dict[str, dict[str, np.ndarray]] = {}
    with np.load(path, allow_pickle=False) as npz:
        for name in npz.files:
            case, key = name.rsplit("/", 1)
            table.setdefault(case, {})[key] = npz[name]
    return table


def distance(actual: np.ndarray, golden: np.ndarray) -> float:
    """The norm-wise relative difference ``max |a - g| / max |g|`` over the finite entries of a
    float array (0 where both are equal; ``inf`` where shapes, dtypes or the non-finite entries
    differ, or where integer/boolean arrays are not equal)."""
    a, g = np.asarray(actual), np.asarray(golden)
    if a.shape != g.shape or a.dtype != g.dtype:
        return float("inf")
    if not np.issubdtype(g.dtype, np.floating):
        return 0.0 if np.array_equal(a, g) else float("inf")
    fa, fg = np.isfinite(a), np.isfinite(g)
    if not np.array_equal(fa, fg) or not np.array_equal(a[~fa], g[~fg], equal_nan=True):
        return float("inf")
    if not fg.any():
        return 0.0
    diff = float(np.max(np.abs(a[fa] - g[fg])))
    if diff == 0.0:
        return 0.0
    scale = float(np.max(np.abs(g[fg])))
    return diff / scale if scale > 0.0 else float("inf")


def beyond(actual: dict[str, np.ndarray], golden: dict[str, np.ndarray]) -> dict[str, float]:
    """The arrays of a case that are not within the tolerance, with their distance (a missing
    or extra array: ``inf``)."""
    far = {k: float("inf") for k in set(actual) ^ set(golden)}
    for k in set(actual) & set(golden):
        d = distance(actual[k], golden[k])
        if not d <= RTOL:
            far[k] = d
    return far


def assert_matches(actual: dict[str, np.ndarray], golden: dict[str, np.ndarray]) -> None:
    """Every array of a case within the tolerance of the module docstring."""
    far = beyond(actual, golden)
    assert not far, f"differ from the golden values beyond RTOL = {RTOL:g}: {far}"


# -- the three golden tables ----------------------------------------------------------------


def sources() -> dict[str, tuple]:
    """Each golden table's name and its cases: ``name -> (case ids, run(id) -> arrays,
    digests(arrays) -> the JSON record of the first goldens)``."""
    import compiled_cases as sg
    import estimate_cases as est
    import random_feature_cases as rf

    def by_id(module):
        # (the cases with golden values: a map given compiled code later has none)
        table = {module.case_id(*c): c for c in getattr(module, "golden_cases", module.cases)()}
        return (
            list(table),
            lambda i: module.run_case(*table[i], path="numpy"),
            sg.digests,
        )

    est_cases = {c[0]: c for c in est.CASES}
    return {
        "sg_numpy": by_id(sg),
        "random_features_numpy": by_id(rf),
        "estimates_numpy": (
            list(est_cases),
            lambda i: {"estimates": est.run(est_cases[i], "estimate_numpy")},
            lambda arrays: sg.digest(arrays["estimates"]),
        ),
        # the versioned streams of the same cases, each when it was defined
        **{
            f"estimates_{stream}": (
                list(est_cases),
                lambda i, s=stream: {"estimates": est.run(est_cases[i], "estimate_numpy", s)},
                lambda arrays: sg.digest(arrays["estimates"]),
            )
            for stream in est.STREAMS
        },
    }


def golden(name: str) -> dict[str, dict[str, np.ndarray]]:
    return read(GOLDEN_DIR / f"{name}.npz")


def main(argv: list[str]) -> None:
    """``--write``: store the numpy code's values of every case, after checking that they hash
    to the digests in ``tests/golden/<name>.json`` (run it on the kernel those were written on,
    ``OPENBLAS_CORETYPE=Haswell``). ``--measure``: print the largest distance of today's
    numbers from the stored values, table by table."""
    import json

    for name, (ids, run, digests) in sources().items():
        table = {i: run(i) for i in ids}
        if "--write" in argv:
            recorded = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
            wrong = [i for i in ids if digests(table[i]) != recorded[i]]
            if wrong:
                raise SystemExit(f"{name}: {len(wrong)} cases do not hash to the digests: {wrong}")
            write(GOLDEN_DIR / f"{name}.npz", table)
            print(f"wrote {name}.npz ({len(table)} cases, digests checked)")
        else:
            stored = golden(name)
            worst = max(
                ((distance(table[i][k], stored[i][k]), i, k) for i in ids for k in stored[i]),
                default=(0.0, "", ""),
            )
            print(f"{name}: largest distance {worst[0]:.3g} ({worst[1]} {worst[2]})")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1:])
