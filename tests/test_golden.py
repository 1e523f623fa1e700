"""The golden values (``tests/golden_values.py``): they are the numbers the first goldens
digested, and the tolerance separates a CPU's last bits from a real change of the numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_values as gv  # noqa: E402

TABLES = tuple(gv.sources())


@pytest.mark.parametrize("name", TABLES)
def test_golden_values_are_the_digested_numbers(name):
    """The stored values hash to the digests written before the compiled kernels existed."""
    ids, _, digests = gv.sources()[name]
    recorded = json.loads((gv.GOLDEN_DIR / f"{name}.json").read_text())
    stored = gv.golden(name)
    assert sorted(stored) == sorted(ids) == sorted(recorded)
    assert {i: digests(stored[i]) for i in ids} == recorded


def test_distance_is_normwise_and_strict_on_the_rest():
    g = np.array([1e-20, -3.0, 2.0, np.inf, np.nan])
    assert gv.distance(g.copy(), g) == 0.0
    near = g.copy()
    near[0] = 1e-12  # a cancellation's entry: far in its own scale, near in the array's
    assert gv.distance(near, g) == pytest.approx(1e-12 / 3.0)
    for bad in (np.array([1e-20, -3.0, 2.0, -np.inf, np.nan]), g[:4], g.astype(np.float32)):
        assert gv.distance(bad, g) == float("inf")
    assert gv.distance(np.array([1, 2]), np.array([1, 3])) == float("inf")
    assert gv.beyond({"a": g}, {"a": g, "b": g}) == {"b": float("inf")}


def test_tolerance_catches_a_changed_number():
    """A step of another size in one round moves a stored pass far beyond ``RTOL``, while a
    relative change of 1e-13, a CPU's last bits, stays inside it."""
    case = gv.golden("sg_numpy")["coordinate-iid-small"]
    last_bits = {k: v * (1 + 1e-13) if v.dtype.kind == "f" else v for k, v in case.items()}
    assert not gv.beyond(last_bits, case)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import compiled_cases as cc

    name, T, D, m, eta, *rest = cc.SHAPES[0]
    changed = cc.run_case("coordinate", "iid", (name, T, D, m, eta * (1 + 1e-6), *rest), "numpy")
    assert {"losses", "alpha"} <= set(gv.beyond(changed, case))
