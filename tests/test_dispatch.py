"""Worker tasks of the local engine: chunks of cells, the compiled kernels warmed once."""

from __future__ import annotations

import json
from collections import Counter

import ilnrun.config as C
from ilnrun.engines import local
from ilnrun.engines.local import CHUNK_ROUNDS, chunks


def _figure1_cells():
    return C.cells(C.load("configs/figure1.yaml"))


def test_chunks_keep_order_and_one_instance_per_task():
    cells = _figure1_cells()
    parts = chunks(cells, 2)
    assert [c.id for p in parts for c in p] == [c.id for c in cells]
    for p in parts:
        assert len({json.dumps(c.data_key, sort_keys=True) for c in p}) == 1
        assert sum(c.data["T"] for c in p) <= CHUNK_ROUNDS
    # figure1: T = 200, so 32 cells a task: ceil(n / 32) tasks for the n cells of an instance
    per_instance = Counter(json.dumps(c.data_key, sort_keys=True) for c in cells)
    assert len(parts) == sum(-(-n // 32) for n in per_instance.values())


def test_an_instance_whose_cells_are_short_is_one_task():
    """figure1_paper_grid: the 160 cells of T = 200 of an instance (32 000 rounds) are one task,
    so one worker builds the instance; figure1's 1 264 (252 800 rounds) are cut as before."""
    cells = C.cells(C.load("configs/figure1_paper_grid.yaml"))
    parts = chunks(cells, 2)
    per_instance = Counter(json.dumps(c.data_key, sort_keys=True) for c in cells)
    assert len(parts) == len(per_instance) == 60
    assert [len(p) for p in parts] == list(per_instance.values())
    assert [c.id for p in parts for c in p] == [c.id for c in cells]
    assert max(sum(c.data["T"] for c in p) for p in parts) <= local.INSTANCE_ROUNDS
    # a run too short for whole instances to keep both workers busy is cut by the cap
    assert all(len(p) <= 100 // (4 * 2) for p in chunks(cells[:100], 2))


def test_short_runs_and_long_cells_get_one_cell_per_task():
    cells = _figure1_cells()
    assert [len(p) for p in chunks(cells[:10], 2)] == [1] * 10
    big = [
        C.Cell(c.index, {**c.data, "T": CHUNK_ROUNDS}, c.rep, c.method, c.hyper, c.per_round)
        for c in cells[:40]
    ]
    assert all(len(p) == 1 for p in chunks(big, 2))


def test_cell_id_is_computed_once_and_equals_the_key_digest():
    c = _figure1_cells()[5]
    assert c.id == C.digest(c.key)[:20]
    assert "id" in c.__dict__  # cached on the object


def test_warm_up_runs_the_first_cell_of_each_learner_in_the_parent(monkeypatch):
    cells = _figure1_cells()
    exp = C.load("configs/figure1.yaml")
    ran, got = [], []
    monkeypatch.setattr(local, "run_cell", lambda e, c: ran.append(c) or {"id": c.id})
    rest = local.warm_up(exp, cells, got.append)
    methods = list(dict.fromkeys(c.method for c in cells))
    assert [c.method for c in ran] == methods
    assert [r["id"] for r in got] == [c.id for c in ran]
    assert len(rest) == len(cells) - len(methods)
    assert {c.id for c in rest} | {c.id for c in ran} == {c.id for c in cells}
