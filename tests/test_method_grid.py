"""``method_grid``: a learner's settings, expanded once per learner and parameters and given as
new mappings at every call; the same settings, in the same order, as the product of the lists
with the unused keys ``None``, each distinct setting (as JSON) once, less the skipped ones."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from ilnrun import config as C
from ilnrun.config import grid
from ilnrun.config.keys import grid_params
from ilnrun.learners import LEARNERS

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))


def _reference(name: str, params: dict, skip: bool) -> list[dict]:
    """Every combination of the lists, the unused keys ``None``, the left-out settings dropped
    (``skip``), each JSON once: the grid as written before it was kept."""
    spec = LEARNERS[name]
    params = grid_params(params)
    keys = list(params)
    seen, out = set(), []
    for combo in itertools.product(*[grid.as_list(params[k]) for k in keys]):
        h = dict(zip(keys, combo, strict=True))
        for key in spec.unused(h):
            if key in h:
                h[key] = None
        if skip and spec.skip is not None and spec.skip(h):
            continue
        sig = json.dumps(h, sort_keys=True)
        if sig not in seen:
            seen.add(sig)
            out.append(h)
    return out


def _sections() -> list[tuple[str, dict]]:
    out = []
    for path in CONFIGS:
        raw = C.load_yaml(path)
        for name, section in (raw.get("methods") or {}).items():
            out.append((name, section))
    # values given twice once unused (ridge's eta), a null in a list, list and single values
    out.append(("fixed_random", {"eta": [0.1, 1.0], "solver": ["ridge", "sgd"], "lam": [0, 1]}))
    out.append(("doubly_sgd", {"eta": 0.3, "block": [None, 3], "batch": [1, 2]}))
    return out


@pytest.mark.parametrize("skip", [True, False])
def test_the_grid_is_the_product_less_duplicates_and_skips(skip):
    for name, section in _sections():
        got = grid.method_grid(name, section, skip)
        want = _reference(name, section, skip)
        assert [list(h.items()) for h in got] == [list(h.items()) for h in want], name


def test_each_call_gives_new_settings():
    section = {"eta": [0.1, 1.0], "schedule": ["constant", "inv_sqrt"]}
    first = grid.method_grid("shrinking_gradient", section)
    first[0]["eta"] = 99.0
    first.append({"eta": 5.0})
    again = grid.method_grid("shrinking_gradient", section)
    assert [h["eta"] for h in again] == [0.1, 0.1, 1.0, 1.0]


def test_the_order_of_the_keys_is_the_order_of_the_product():
    """Two sections with the same keys in another order are two grids (the product's order
    follows the keys), not one kept grid given for both."""
    a = grid.method_grid("shrinking_gradient", {"eta": [0.1, 1.0], "B": [1.0, 2.0]})
    b = grid.method_grid("shrinking_gradient", {"B": [1.0, 2.0], "eta": [0.1, 1.0]})
    assert [(h["eta"], h["B"]) for h in a] == [(0.1, 1.0), (0.1, 2.0), (1.0, 1.0), (1.0, 2.0)]
    assert [(h["eta"], h["B"]) for h in b] == [(0.1, 1.0), (1.0, 1.0), (0.1, 2.0), (1.0, 2.0)]
    assert list(a[0]) == ["eta", "B"] and list(b[0]) == ["B", "eta"]
