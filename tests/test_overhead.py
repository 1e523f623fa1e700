"""What a run does once instead of per cell, per record or per table row gives the numbers and
bytes it gave when it did it every time (issue #28 item 2):

- ``average`` twins (cells that differ only in ``average``) share one pass: the averaged pass
  keeps its final predictor (``FitResult.final``) and :meth:`FitResult.without_average` is the
  ``average: false`` pass's result, field for field, for every learner's passes;
  :func:`ilnrun.cell.run_cells` gives each twin the record :func:`ilnrun.cell.run_cell` gives
  it, and tasks never split twins;
- a cell's seeds, built from its spawn key, are ``SeedSequence(...).spawn`` 's; its record
  digest, put together from parts, is the digest of the mapping;
- a log line (:func:`ilnrun.results.sealed_line`) is the bytes of ``json.dumps(seal(record))``;
  the log is vouched for without re-reading it when it holds what this process appended, and
  not when it was edited;
- the selection, by one grouped mean per setting, selects what the per-group loop selected.
"""

from __future__ import annotations

import dataclasses
import json
import math
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import tiny_config

import ilnrun.config as C
from ilnrun import cell as K
from ilnrun.config import grid as G
from ilnrun.config.schema import resolve
from ilnrun.engines.local import chunks
from ilnrun.features import Coordinate, Fourier, ReLU
from ilnrun.learners import doubly_sgd, fixed_random, kernel_ogd, shrinking_gradient
from ilnrun.learners import random_feature_kernels as rfk
from ilnrun.learners import shrinking_gradient_kernels as sgk
from ilnrun.learners.base import FeatureExpansion, FitResult, KernelExpansion
from ilnrun.results import (
    CELL_LOG,
    CellLog,
    read_written,
    seal,
    sealed_line,
    select,
    write_manifest,
)


def _problem(T: int = 40, D: int = 7, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, D)) / 2.0
    return X, np.tanh(X[:, 0] - X[:, 1])


def _predictor_arrays(p) -> list[np.ndarray]:
    if isinstance(p, KernelExpansion):
        return [p.alpha]
    assert isinstance(p, FeatureExpansion)
    return [p.W, p.coef]


def assert_same_result(got: FitResult, want: FitResult) -> None:
    """Every field of two pass results equal, bit for bit (predictors of their own)."""
    assert type(got.predictor) is type(want.predictor)
    arrays = _predictor_arrays(got.predictor), _predictor_arrays(want.predictor)
    for a, b in zip(*arrays, strict=True):
        np.testing.assert_array_equal(a, b, strict=True)
    np.testing.assert_array_equal(got.losses, want.losses, strict=True)
    assert got.counters == want.counters
    assert (got.diverged, got.timed_out) == (want.diverged, want.timed_out)
    assert (got.averaged is None) == (want.averaged is None)
    if want.averaged is not None:
        np.testing.assert_array_equal(got.averaged.alpha, want.averaged.alpha, strict=True)
        assert got.averaged is not want.averaged
    assert got.extras.keys() == want.extras.keys()
    for k in want.extras:
        np.testing.assert_array_equal(got.extras[k], want.extras[k], strict=True)
    assert got.final is None and got.predictor.costs == {"psi": 0, "kernel": 0}


# (pass, keywords): every numpy-engine pass of the learners with ``average``, with settings that
# run to the end and settings that diverge (eta 40) or shrink (B small)
PASSES = [
    (shrinking_gradient.fit_numpy, dict(eta=0.5, m=7, B=0.005, schedule="inv_sqrt")),
    (shrinking_gradient.fit_numpy, dict(eta=0.5, m=7, B=1.0, schedule="constant")),
    (shrinking_gradient.fit, dict(eta=0.5, m=7, B=0.005, schedule="inv_sqrt")),
    (doubly_sgd.fit_numpy, dict(eta=0.4, k=2, nu=0.3, schedule="inv_sqrt")),
    (doubly_sgd.fit_numpy, dict(eta=40.0, k=3, nu=0.0, schedule="constant")),
    (doubly_sgd.fit_numpy, dict(eta=0.4, k=2, nu=0.1, schedule="constant", batch=3)),
    (doubly_sgd.fit, dict(eta=0.4, k=2, nu=0.3, schedule="inv_sqrt")),
    (doubly_sgd.fit, dict(eta=40.0, k=3, nu=0.0, schedule="constant")),
    (fixed_random.fit_numpy, dict(eta=0.4, r=15, lam=0.01, schedule="inv_sqrt")),
    (fixed_random.fit_numpy, dict(eta=40.0, r=15, lam=0.0, schedule="constant")),
    (fixed_random.fit, dict(eta=0.4, r=15, lam=0.01, schedule="inv_sqrt")),
    (fixed_random.fit, dict(eta=40.0, r=15, lam=0.0, schedule="constant")),
    (kernel_ogd.fit, dict(eta=1.5, schedule="constant", B=0.01, shrink=True)),
    (kernel_ogd.fit, dict(eta=0.3, schedule="inv_sqrt")),
]


@pytest.mark.parametrize("make_map", [Coordinate, ReLU, lambda D: Fourier(D, 1.3)])
@pytest.mark.parametrize("fit, kw", PASSES)
def test_averaged_pass_keeps_the_final_result(make_map, fit, kw):
    """The ``average=True`` pass's :meth:`~FitResult.without_average` is the ``average=False``
    pass's result (the same draws: one seed)."""
    X, y = _problem()
    fmap = make_map(X.shape[1])
    if fit is kernel_ogd.fit and not fmap.has_kernel:
        pytest.skip("kernel OGD needs a closed-form kernel")
    plain = fit(X, y, fmap, np.random.default_rng(5), **kw)
    avg = fit(X, y, fmap, np.random.default_rng(5), average=True, **kw)
    assert plain.final is None
    assert avg.final is not None
    assert_same_result(avg.without_average(), plain)


def test_compiled_passes_keep_the_final_result():
    """The compiled passes (used where they apply) keep it too, equal to the plain pass's."""
    X, y = _problem(T=60)
    fmap = Coordinate(X.shape[1])
    if not (sgk.use_compiled(fmap) and rfk.use_compiled(fmap)):
        pytest.skip("compiled passes not in use in this process")
    cases = [
        (shrinking_gradient.fit_compiled, dict(eta=0.5, m=9, B=0.005, schedule="inv_sqrt")),
        (doubly_sgd.fit_compiled, dict(eta=0.4, k=3, nu=0.3, schedule="inv_sqrt")),
        (fixed_random.fit_compiled, dict(eta=0.4, r=25, lam=0.01, schedule="constant")),
    ]
    for fit, kw in cases:
        plain = fit(X, y, fmap, np.random.default_rng(1), **kw)
        avg = fit(X, y, fmap, np.random.default_rng(1), average=True, **kw)
        assert_same_result(avg.without_average(), plain)


def test_without_average_needs_a_final_predictor():
    res = FitResult(KernelExpansion(np.ones(3)), np.zeros(3), {})
    with pytest.raises(ValueError, match="final"):
        res.without_average()


def _twin_config() -> dict:
    """Every learner with ``average`` twins (Fixed-Random's ridge settings without), a budget
    axis, two repetitions; settings that diverge (eta 30) among them."""
    cfg = tiny_config(**{"dataset.D": 20, "budget.dsgd_k": [1, 2]})
    m = cfg["methods"]
    m["shrinking_gradient"].update(eta=[0.3, 30.0], average=[False, True])
    m["doubly_sgd"].update(eta=[0.3, 30.0], nu=[0.0, 0.01], average=[False, True])
    m["fixed_random"].update(solver=["sgd", "ridge"], lam=[0.0, 0.1], average=[False, True])
    m["kernel_ogd"].update(eta=[0.3, 30.0], average=[False, True])
    return cfg


def _without_timing(rec: dict) -> dict:
    rec = json.loads(json.dumps(rec, allow_nan=True))
    for k in ("wall_s", "eval_s"):
        rec["row"].pop(k)
    return rec


def test_run_cells_gives_each_twin_its_own_record(monkeypatch):
    """:func:`run_cells` over a grid with ``average`` twins: the records of :func:`run_cell`
    run cell by cell (but for the timings), from fewer passes (one per pair of twins)."""
    exp = resolve(_twin_config())
    cells = C.cells(exp)
    twins = sum(K.twins(a, b) for a, b in pairwise(cells))
    assert twins >= len(cells) // 3
    alone = [_without_timing(K.run_cell(exp, c)) for c in cells]
    K.forget_instances()
    passes = []
    fit = K.fit_numpy
    monkeypatch.setattr(K, "fit_numpy", lambda *a: passes.append(1) or fit(*a))
    shared = [_without_timing(r) for r in K.run_cells(exp, cells)]
    assert [r["id"] for r in shared] == [c.id for c in cells]
    assert shared == alone
    assert len(passes) == len(cells) - twins
    assert any(r["row"]["diverged"] for r in shared)


def test_tasks_keep_twins_together():
    """A task of two cells or more never ends between two ``average`` twins (the first of them
    starts the next task); a task stays within its size."""
    exp = resolve(_twin_config())
    cells = C.cells(exp)
    for jobs in (1, 2, 5):
        parts = chunks(cells, jobs)
        cap = max(1, len(cells) // (4 * jobs))
        assert [c for part in parts for c in part] == cells
        assert max(len(p) for p in parts) <= cap
        for a, b in pairwise(parts):
            assert cap < 2 or not K.twins(a[-1], b[0])


def test_twins_are_the_cells_that_differ_only_in_average():
    exp = resolve(_twin_config())
    cells = C.cells(exp)
    for a, b in pairwise(cells):
        same_pass = a.seed_key == b.seed_key and a.key != b.key
        assert K.twins(a, b) == same_pass


def test_seeds_are_the_spawned_children():
    """A cell's seeds, built from its spawn key, are the children ``spawn`` makes of the cell's
    seed sequence (the seeds before they were built so), for every root seed."""
    exp = resolve(_twin_config())
    for cell in C.cells(exp)[::7]:
        for root in (0, 7, 2**40):
            want = G.seed_sequence(root, cell.seed_key).spawn(3)
            got = [*K.seeds(root, cell), K.validation_seed(root, cell)]
            for a, b in zip(got, want, strict=True):
                assert (a.entropy, a.spawn_key, a.pool_size) == (
                    b.entropy,
                    b.spawn_key,
                    b.pool_size,
                )
                np.testing.assert_array_equal(a.generate_state(4), b.generate_state(4))


@pytest.mark.parametrize(
    "config", ["figure1.yaml", "m_test_rule.yaml", "classification_teacher_total_logistic.yaml"]
)
def test_record_digest_is_the_digest_of_its_mapping(config):
    """The record digest put together from the experiment's parts rendered once is the digest
    of the whole mapping (as it was computed)."""
    from pathlib import Path

    path = Path(__file__).parent.parent / "configs" / config
    exp = resolve(yaml.safe_load(path.read_text()), base_dir=path.parent)
    other = dataclasses.replace(exp, seed=11, engine="jax")
    for e in (exp, other, exp):
        for cell in C.cells(e)[::997]:
            want = G.digest(
                {
                    "key": cell.key,
                    "seed": e.seed,
                    "feature_map": e.feature_map.as_dict(),
                    "match": e.budget.match,
                    "evaluation": e.evaluation.numbers(),
                    "data": G._files_by_content(e, G._without_added(cell.data)),
                    "engine": e.engine if e.engine == "numpy" else f"{e.engine}/{G.JAX_STREAMS}",
                }
            )
            assert G.record_digest(e, cell) == want


RECORDS = [
    {"id": "a", "row": {"x": 1.5, "y": math.nan, "z": math.inf, "w": None, "s": "é\u2028"},
     "curve": {"t": [1, 2], "v": [0.1, -0.0]}, "digest": "d"},
    {"id": "b", "row": {"n": np.float64(0.1), "t": (1, 2)}, "curve": {}},
    {"id": "c", "nested": [{"k": [1, {"j": 2}]}], "row": {}},
    {"id": "d", "row": {1: "int key"}, "curve": {}},
    {"id": "e", "row": {"1": "a", 1: "b"}},
    {"id": "f", "values_sha256": "stale", "row": {}},
    {},
    # curves formatted once for both texts: every kind of JSON number; and curves that are not
    # lists of plain numbers (encoded whole)
    {"id": "g", "row": {"a": 1}, "curve": {"t": [1, 10**20, -3], "z": [math.nan, math.inf,
     -math.inf, -0.0, 1e-05, 1.5e300, 0.1], "é,: ": [], "a": [2.5]}, "timeout_s": 3.5},
    {"id": "h", "row": {}, "curve": {"t": [1, None], "v": ["a, b"]}},
    {"id": "i", "row": {}, "curve": {"t": [True, 2], "v": (1.5, 2.5)}},
    {"id": "j", "row": {}, "curve": {"t": [np.float64(0.1), 2]}},
    {"id": "k", "row": {}, "curve": [1, 2]},
]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS)
def test_sealed_line_is_the_sealed_records_json(record):
    """The log line is, byte for byte, ``json.dumps(seal(record))`` and a newline (records with
    other keys than strings, or an old digest, are sealed as before)."""
    assert sealed_line(record) == (json.dumps(seal(record), allow_nan=True) + "\n").encode()


def test_sealed_line_of_real_records():
    exp = resolve(_twin_config())
    for cell in C.cells(exp)[:40]:
        rec = K.run_cell(exp, cell)
        assert sealed_line(rec) == (json.dumps(seal(rec), allow_nan=True) + "\n").encode()


def _log(tmp_path):
    write_manifest(tmp_path, {})
    log = CellLog(tmp_path)
    log.read()
    log.vouch()
    return log


def test_log_vouched_after_appends(tmp_path):
    """The records appended since the log was vouched for are vouched for without reading them
    back: the manifest then records the log's content."""
    from ilnrun.results import file_entry

    log = _log(tmp_path)
    exp = resolve(_twin_config())
    for cell in C.cells(exp)[:6]:
        log.append(K.run_cell(exp, cell))
    log.vouch()
    assert read_written(tmp_path)[CELL_LOG] == file_entry(tmp_path / CELL_LOG)
    assert len(log.read()) == 6


def test_edited_log_not_vouched(tmp_path):
    """A log edited after it was vouched for (a digit of a record changed) is not vouched for
    again, though this process appended records since."""
    log = _log(tmp_path)
    exp = resolve(_twin_config())
    for cell in C.cells(exp)[:3]:
        log.append(K.run_cell(exp, cell))
    log.vouch()
    before = read_written(tmp_path)[CELL_LOG]
    log.append(K.run_cell(exp, C.cells(exp)[3]))
    path = tmp_path / CELL_LOG
    data = path.read_bytes()
    i = data.index(b'"repetition": 0')
    path.write_bytes(data[:i] + b'"repetition": 1' + data[i + 15 :])
    log.vouch()
    assert read_written(tmp_path)[CELL_LOG] == before


def _select_reference(runs: pd.DataFrame, dataset_keys: list[str], modes: dict) -> pd.DataFrame:
    """The selection as it was computed, group by group (ilnrun 0.2.0)."""
    from ilnrun.results import group_columns

    def best(g, column):
        per = g.groupby("setting", sort=False).agg(
            val=(column, "mean"), failed=("failed", "any"), first=("cell_index", "min")
        )
        ok = per[~per["failed"] & np.isfinite(per["val"])]
        return None if ok.empty else ok.sort_values(["val", "first"]).index[0]

    runs = runs.copy()
    both = "val_loss_estimated" in runs and runs["val_loss_estimated"].notna().any()
    on = {mode: pd.Series(False, index=runs.index) for mode in ("exact", "estimated")}
    selected = pd.Series(False, index=runs.index)
    failed = runs["diverged"] | runs["timed_out"]
    for _, g in runs.assign(failed=failed).groupby(
        group_columns(runs, dataset_keys), dropna=False, sort=False
    ):
        has_est = "val_loss_estimated" in g and g["val_loss_estimated"].notna().any()
        exact = best(g, "val_loss")
        est = best(g, "val_loss_estimated") if has_est else None
        if exact is not None:
            on["exact"][g.index[g["setting"] == exact]] = True
        side = est if has_est else exact
        if side is not None:
            on["estimated"][g.index[g["setting"] == side]] = True
        own = est if modes.get(g["method"].iloc[0], "exact") == "estimated" else exact
        if own is not None:
            selected[g.index[g["setting"] == own]] = True
    runs["selected"] = selected
    if both:
        runs["selected_exact"] = on["exact"]
        runs["selected_estimated"] = on["estimated"]
    return runs


def _random_runs(seed: int, estimated: bool) -> pd.DataFrame:
    """Rows of 3 learners x 2 dataset settings x budgets (one learner without: NaN) x settings
    x repetitions, with tied means, failed repetitions, non-finite losses and groups where
    every setting failed."""
    rng = np.random.default_rng(seed)
    rows = []
    for method in ("a", "b", "c"):
        for D in (5, 9):
            for k in (1, 2) if method != "c" else (None,):
                for s in range(int(rng.integers(1, 6))):
                    level = float(rng.choice([0.5, 0.25, 1.0, np.inf, np.nan]))
                    for rep in range(3):
                        v = level if rng.random() < 0.5 else float(rng.choice([0.1, 0.2, 0.3]))
                        rows.append(
                            dict(
                                method=method, D=D, dsgd_k=k, setting=f"s{s}", repetition=rep,
                                val_loss=v, diverged=bool(rng.random() < 0.1),
                                timed_out=bool(rng.random() < 0.05),
                                val_loss_estimated=(
                                    float(rng.choice([0.1, 0.2, np.nan]))
                                    if estimated and method != "b"
                                    else np.nan
                                ),
                            )
                        )  # fmt: skip
    runs = pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    runs["cell_index"] = rng.permutation(len(runs))
    if not estimated:
        runs = runs.drop(columns=["val_loss_estimated"])
    return runs


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("estimated", [False, True])
def test_select_selects_what_the_group_loop_selected(seed, estimated):
    runs = _random_runs(seed, estimated)
    for modes in ({}, {"a": "estimated"}, {"a": "estimated", "b": "estimated"}):
        got, want = select(runs, ["D"], modes), _select_reference(runs, ["D"], modes)
        pd.testing.assert_frame_equal(got, want)


def test_instance_values_follow_the_registered_learners(monkeypatch):
    """What an instance keeps that derives from the registry (the matched budget's sizes, the
    row's columns) is derived again for a learner registered after the instance was built: a
    toy learner's cell on a cached instance gets its size and its parameter column."""
    import toy_learner

    from ilnrun.learners import LEARNERS

    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 1})
    exp = resolve(cfg)
    first = C.cells(exp)[0]
    K.run_cell(exp, first)  # the instance is built and cached, its budget and columns kept
    monkeypatch.setitem(LEARNERS, toy_learner.SPEC.name, toy_learner.SPEC)
    cfg["methods"] = {"toy_avg": {"eta": 0.3, "tail": 0.25}}
    toy = resolve(cfg)
    cell = C.cells(toy)[0]
    assert K.instance(toy.seed, toy.feature_map, cell) is K.instance(
        exp.seed, exp.feature_map, first
    )
    row = K.run_cell(toy, cell)["row"]
    assert row["q"] == K.plan(toy.budget, cell, K.instance(toy.seed, toy.feature_map, cell)).size()
    assert row["q"] > 0 and row["tail"] == 0.25
