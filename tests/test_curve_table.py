"""``curves.csv`` built from arrays (``results._curve_frames``): the frame, its column types and
its CSV text are those of one frame per record concatenated (``_curve_frame``, the way the
table was built before), for records of every shape a run or an old log can hold."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ilnrun import results as R

ID_COLS = ["method", "D", "T", "center", "noise", "rkhs_norm", "dsgd_k", "repetition", "setting"]


def _record(rng: np.random.Generator, i: int) -> dict:
    """A record with identifying values and curve lists of varied kinds (rng-chosen)."""
    n = int(rng.integers(1, 6))
    row = {
        "method": str(rng.choice(["shrinking_gradient", "doubly_sgd", "kernel_ogd"])),
        "D": int(rng.choice([550, 600])),
        "T": 200,
        "center": bool(rng.integers(0, 2)),
        "noise": [0.0, 0.5, math.nan][int(rng.integers(0, 3))],
        "rkhs_norm": [None, 2.0, 3][int(rng.integers(0, 3))],
        "dsgd_k": [1, None][int(rng.integers(0, 2))],
        "repetition": i,
        "setting": f"eta={i}",
    }
    curve: dict = {"t": list(range(1, n + 1))}
    kind = int(rng.integers(0, 6))
    if kind == 0:  # floats, NaN and infinity among them
        curve["online_loss"] = [float(v) for v in rng.standard_normal(n)]
        curve["online_loss"][0] = [math.nan, math.inf, 1.0][int(rng.integers(0, 3))]
    elif kind == 1:  # ints and floats mixed
        curve["online_loss"] = [1, *[float(v) for v in rng.random(n - 1)]]
    elif kind == 2:  # ints only
        curve["online_loss"] = [int(v) for v in rng.integers(0, 9, n)]
    elif kind == 3:  # a learner's own column
        curve["online_loss"] = [float(v) for v in rng.random(n)]
        curve["alpha_l1"] = [float(v) for v in rng.random(n)]
    elif kind == 4:  # values of another kind: built one record at a time
        curve["online_loss"] = [None] * n
    else:  # t itself as floats (an old log's), or no t
        curve["t"] = [float(v) for v in curve["t"]] if rng.integers(0, 2) else []
        curve["online_loss"] = [float(v) for v in rng.random(len(curve["t"]))]
    return {"id": f"c{i}", "row": row, "curve": curve}


def _before(records: list[dict]) -> pd.DataFrame:
    return R._concat_runs([R._curve_frame(r, ID_COLS) for r in records])


@pytest.mark.parametrize("seed", range(12))
def test_curves_from_arrays_equal_a_frame_per_record(seed):
    rng = np.random.default_rng(seed)
    records = [_record(rng, i) for i in range(int(rng.integers(1, 40)))]
    if seed % 3 == 0:  # long runs of records of one kind, as a real run has
        records = sorted(records, key=lambda r: tuple(r["curve"]))
    want = _before(records)
    got = R._concat_runs(R._curve_frames(records, ID_COLS))
    assert list(got.columns) == list(want.columns)
    assert list(got.dtypes) == list(want.dtypes)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got.to_csv(index=False) == want.to_csv(index=False)


def test_a_run_of_records_of_one_kind_is_one_frame():
    rng = np.random.default_rng(0)
    records = []
    for i in range(30):
        r = _record(rng, i)
        r["row"].update(noise=0.0, rkhs_norm=None, dsgd_k=1, center=False)
        r["curve"] = {"t": [1, 2, 3], "online_loss": [0.5, 0.25, float(i)]}
        records.append(r)
    frames = R._curve_frames(records, ID_COLS)
    assert len(frames) == 1 and len(frames[0]) == 90
    pd.testing.assert_frame_equal(frames[0], _before(records), check_exact=True)


def test_records_that_are_not_plain_go_one_at_a_time():
    rng = np.random.default_rng(1)
    plain = _record(rng, 0)
    plain["curve"] = {"t": [1, 2], "online_loss": [0.5, 0.25]}
    odd = [
        {**plain, "curve": {"t": [1, 2], "online_loss": [0.5]}},  # unequal lengths: refused
        {**plain, "curve": {"t": [1, 2], "setting": ["a", "b"]}},  # an identifying name (both
        # ways refuse it then: pandas will not insert the column twice)
        {**plain, "row": {**plain["row"], "D": 2**70}},  # beyond int64
        {**plain, "row": {**plain["row"], "D": np.int64(5)}},  # a numpy scalar
    ]
    for r in odd:
        assert R._curve_kinds(r, ID_COLS) is None
    assert R._curve_kinds(plain, ID_COLS) is not None
    good = [plain, odd[2], odd[3], plain]
    got = R._concat_runs(R._curve_frames(good, ID_COLS))
    pd.testing.assert_frame_equal(got, _before(good), check_exact=True)
    with pytest.raises(ValueError):  # as before: a curve of unequal lengths is no table
        R._curve_frames([odd[0]], ID_COLS)
