"""Trust: strict configs, resume after SIGKILL, divergence and time limits recorded, not fatal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from conftest import tiny_config, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ilnrun import config as C
from ilnrun.cli import main
from ilnrun.results import CellLog

# (description, how to corrupt the tiny config, a key path the message must name)
MALFORMED = [
    (
        "eta negative",
        {"methods.shrinking_gradient.eta": [0.3, -0.1]},
        "methods.shrinking_gradient.eta[1]",
    ),
    ("eta string", {"methods.doubly_sgd.eta": "fast"}, "methods.doubly_sgd.eta"),
    ("eta nan", {"methods.fixed_random.eta": float("nan")}, "methods.fixed_random.eta"),
    (
        "schedule unknown",
        {"methods.fixed_random.schedule": "cosine"},
        "methods.fixed_random.schedule",
    ),
    ("B zero", {"methods.shrinking_gradient.B": 0}, "methods.shrinking_gradient.B"),
    ("T one", {"dataset.T": 1}, "dataset.T"),
    ("T float", {"dataset.T": 30.5}, "dataset.T"),
    ("D negative in list", {"dataset.D": [20, -3]}, "dataset.D[1]"),
    ("D bool", {"dataset.D": True}, "dataset.D"),
    ("sparsity above T", {"dataset.sparsity": 31}, "dataset.sparsity"),
    ("sparsity zero", {"dataset.sparsity": 0}, "dataset.sparsity"),
    ("dataset kind", {"dataset.kind": "mnist"}, "dataset.kind"),
    ("feature map kind", {"feature_map.kind": "coordinates"}, "feature_map.kind"),
    ("budget match", {"budget.match": "flops"}, "budget.match"),
    ("dsgd_k zero", {"budget.dsgd_k": 0}, "budget.dsgd_k"),
    ("dsgd_k string", {"budget.dsgd_k": "four"}, "budget.dsgd_k"),
    ("repetitions zero", {"repetitions": 0}, "repetitions"),
    ("m_test zero", {"evaluation.m_test": 0}, "evaluation.m_test"),
    ("m_test list", {"evaluation.m_test": [10, 20]}, "evaluation.m_test"),
    ("unknown learner", {"methods.kernel_svm": {"eta": 0.1}}, "methods.kernel_svm"),
    ("unknown key", {"methods.doubly_sgd.etta": 0.1}, "methods.doubly_sgd.etta"),
    ("unknown top-level key", {"repetition": 3}, "repetition"),
    ("empty grid", {"methods.shrinking_gradient.eta": []}, "methods.shrinking_gradient.eta"),
    ("no dataset", {"dataset": None}, "dataset"),
    ("empty methods", {"methods": {}}, "methods"),
    ("methods not a mapping", {"methods": ["shrinking_gradient"]}, "methods"),
    ("timeout negative", {"limits": {"cell_timeout_s": -1}}, "limits.cell_timeout_s"),
    ("seed negative", {"seed": -1}, "seed"),
]


def _corrupt(changes: dict) -> dict:
    cfg = tiny_config()
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = cfg
        for p in parents:
            node = node[p]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    return cfg


def _assert_refused(result, key: str | None = None) -> None:
    out = result.output + (result.stderr if hasattr(result, "stderr") else "")
    assert result.exit_code == 2, out
    assert "Traceback" not in out
    if key is not None:
        assert key in out, out


@pytest.mark.parametrize(("what", "changes", "key"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_config_refused_by_validate_and_run(tmp_path, what, changes, key):
    path = write_config(tmp_path / "bad.yaml", _corrupt(changes))
    runner = CliRunner()
    _assert_refused(runner.invoke(main, ["validate", str(path)]), key)
    res = runner.invoke(main, ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    _assert_refused(res, key)
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: [unclosed\n", "not valid YAML"),
        ("", "empty"),
        ("- 1\n- 2\n", "mapping"),
        ("just a string\n", "mapping"),
    ],
    ids=["broken YAML", "empty file", "YAML list", "YAML scalar"],
)
def test_unreadable_config_files_exit_2(tmp_path, text, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    runner = CliRunner()
    for args in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "o")]):
        res = runner.invoke(main, args)
        _assert_refused(res)
        assert words in res.output + res.stderr


def test_missing_file_exit_2(tmp_path):
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "nope.yaml")])
    _assert_refused(res)
    assert "does not exist" in res.output + res.stderr


def test_unknown_key_suggests_the_closest():
    with pytest.raises(C.ConfigError) as exc:
        C.resolve(_corrupt({"methods.doubly_sgd.etta": 0.1}))
    assert "did you mean 'eta'" in str(exc.value)


# ---- property test: random corruptions are either accepted and round-trip, or refused with a path

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 50),
    st.floats(-2, 5),
    st.just(float("nan")),
    st.text(max_size=6),
    st.lists(st.integers(-2, 40), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
_PATHS = [
    "seed",
    "repetitions",
    "name",
    "dataset.D",
    "dataset.T",
    "dataset.sparsity",
    "dataset.n_val",
    "dataset.kind",
    "dataset.bogus",
    "feature_map.kind",
    "budget.match",
    "budget.dsgd_k",
    "evaluation.m_test",
    "evaluation.curve_points",
    "methods.shrinking_gradient.eta",
    "methods.shrinking_gradient.B",
    "methods.shrinking_gradient.sampler",
    "methods.doubly_sgd.nu",
    "methods.fixed_random.schedule",
    "methods.kernel_ogd",
    "limits.cell_timeout_s",
    "extra",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(_PATHS), value=_VALUES)
def test_corrupted_configs_round_trip_or_name_a_key(path, value):
    cfg = tiny_config()
    *parents, last = path.split(".")
    node = cfg
    for p in parents:
        node = node.setdefault(p, {}) if isinstance(node, dict) else node
    node[last] = value
    try:
        resolved = C.resolve(cfg)
    except C.ConfigError as exc:
        assert exc.problems, "a refusal lists its problems"
        for key, message in exc.problems:
            assert key, f"every problem names a key path: {message}"
            assert key.split(".")[0].split("[")[0] in C.TOP_LEVEL or "unknown" in message
        return
    again = C.resolve(yaml.safe_load(C.dump(resolved)))
    assert again == resolved  # the resolved config is a fixed point
    assert C.cells(resolved)  # and it expands into cells


# ---- resume after SIGKILL ------------------------------------------------------------------------

RESUME_CONFIG = tiny_config(
    **{
        "name": "resume",
        "dataset.D": [30, 40, 50],
        "dataset.T": 120,
        "repetitions": 6,
        "budget.dsgd_k": 4,
        "evaluation.m_test": 100,
        "methods": {
            "shrinking_gradient": {"eta": [0.3, 1.0], "schedule": "inv_sqrt"},
            "doubly_sgd": {"eta": [0.1, 0.3]},
            "fixed_random": {"eta": [0.3, 1.0]},
        },
    }
)


def _run_cli(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ilnrun.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _tables(d: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for name in ("runs.csv", "summary.csv", "curves.csv"):
        df = pd.read_csv(d / name)
        out[name] = df.drop(columns=[c for c in df.columns if c.startswith(("wall_s", "eval_s"))])
    return out


def test_sigkill_twice_then_resume_equals_uninterrupted(tmp_path):
    cfg_path = write_config(tmp_path / "resume.yaml", RESUME_CONFIG)
    total = len(C.cells(C.resolve(RESUME_CONFIG)))
    ref = tmp_path / "ref"
    assert (
        subprocess.run(
            [sys.executable, "-m", "ilnrun.cli", "run", str(cfg_path), "--out", str(ref), "-q"],
            check=False,
        ).returncode
        == 0
    )
    out = tmp_path / "out"
    log = out / "cells.jsonl"
    for kill_at in (total // 5, total // 2):
        proc = _run_cli(["run", str(cfg_path), "--out", str(out), "--jobs", "2", "-q"])
        t0 = time.monotonic()
        while _lines(log) < kill_at and proc.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _lines(log) < total, "the run finished before it could be killed"
    done_before = len(CellLog(out).read())
    assert 0 < done_before < total
    proc = _run_cli(["run", str(cfg_path), "--out", str(out), "--jobs", "2", "-q"])
    assert proc.wait() == 0
    ids = [json.loads(x)["id"] for x in log.read_text().splitlines() if x.strip()]
    assert len(ids) == len(set(ids)) == total, "every cell exactly once"
    a, b = _tables(ref), _tables(out)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True)


def _rec(cell_id: str, **extra) -> dict:
    """A minimal well-formed cell record."""
    row = {
        "cell_id": cell_id,
        "method": "kernel_ogd",
        "setting": "eta=1",
        "repetition": 0,
        "diverged": False,
        "timed_out": False,
        "val_loss": 0.5,
        "test_loss": 0.5,
        "wall_s": 0.1,
    }
    return {"id": cell_id, "row": row, "curve": {"t": [1]}, **extra}


def test_torn_last_line_is_ignored_and_repaired(tmp_path):
    log = CellLog(tmp_path)
    log.append(_rec("a"))
    with open(log.path, "ab") as fh:
        fh.write(b'{"id": "b", "row": {')  # a write cut short
    assert set(log.read()) == {"a"}
    assert set(log.read(repair=True)) == {"a"}
    log.append(_rec("c"))
    assert set(log.read()) == {"a", "c"}


def test_second_run_into_a_locked_directory_is_refused(tmp_path, config_file):
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = CliRunner().invoke(main, ["run", str(config_file), "--out", str(out), "-q"])
    _assert_refused(res)
    assert "another" in res.output + res.stderr


# ---- numerical failures and time limits ---------------------------------------------------------


def test_diverging_step_size_is_recorded_and_skipped(tmp_path):
    cfg = tiny_config(
        **{
            "methods": {
                "doubly_sgd": {"eta": [0.3, 1000.0]},
                "fixed_random": {"eta": [0.3, 1000.0]},
                "kernel_ogd": {"eta": [0.3, 1000.0]},
            }
        }
    )
    path = write_config(tmp_path / "div.yaml", cfg)
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    blown = runs[runs["eta"] == 1000.0]
    assert blown["diverged"].all()
    assert (blown["rounds"] < 30).all()  # stopped early
    assert (blown["test_loss"] == float("inf")).all()
    assert not runs[runs["eta"] == 0.3]["diverged"].any()
    assert not runs.loc[runs["selected"], "diverged"].any()  # selection skipped them
    summary = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert (summary["diverged_settings"] == 1).all()
    assert "diverged cells per learner" in res.stderr
    assert "doubly_sgd: 4" in res.stderr  # 2 D x 2 repetitions


def test_cell_timeout_stops_at_next_round_and_is_recorded(tmp_path):
    cfg = tiny_config(**{"limits": {"cell_timeout_s": 1e-9}})
    path = write_config(tmp_path / "slow.yaml", cfg)
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    assert runs["timed_out"].all()
    assert (runs["rounds"] == 1).all()  # the deadline is checked from round 2 on
    assert "timed-out cells" in res.stderr
    # a changed limit is a different config: finished cells are not reused silently
    cfg2 = tiny_config(**{"limits": {"cell_timeout_s": 100.0}})
    write_config(path, cfg2)
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "o")])
    _assert_refused(res, "limits.cell_timeout_s")
