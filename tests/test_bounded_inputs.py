"""Trust, part 3: bounded YAML, numbers that never crash a run, bit-identical --jobs, CSV files
that cannot be misread, and clean stops on SIGINT / SIGTERM / a killed parent."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import WORK, WorkExceeded, bounded_work, invoke, refused, tiny_config, write_config

from ilnrun import cell as cellmod
from ilnrun import datasets as D
from ilnrun.cli import main
from ilnrun.safe_yaml import load_bounded

ALL = ("shrinking_gradient", "doubly_sgd", "fixed_random", "kernel_ogd")


# ---- bounded YAML ----------------------------------------------------------------------------

LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{x}: &{x} [{','.join(['*' + p] * 9)}]"
            for p, x in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


def _bomb(tmp_path: Path, key: str) -> Path:
    """The tiny config with a "billion laughs" alias bomb (9^9 strings) as the value of ``key``."""
    where = {"name": "name", "D": "dataset.D", "eta": "methods.shrinking_gradient.eta"}[key]
    text = write_config(tmp_path / "t.yaml", tiny_config(**{where: "BOMB"})).read_text()
    path = tmp_path / f"bomb_{key}.yaml"
    path.write_text(LAUGHS + "\n" + text.replace("BOMB", "*i"))
    return path


@pytest.mark.parametrize("key", ["name", "D", "eta"])
def test_alias_bomb_is_refused_fast(tmp_path, key):
    path = _bomb(tmp_path, key)
    assert len(path.read_bytes()) < 2000
    for args in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "o")]):
        with bounded_work(WORK):  # refused before the expansion: a bounded amount of work
            res = CliRunner().invoke(main, args)
        refused(res, str(path), "expands to more than")
    assert not (tmp_path / "o").exists()


def test_bounded_work_fails_a_block_that_does_more(tmp_path):
    """The bound of the refusal tests holds even where the code under test swallows the
    exception that stops it."""

    def f(n: int) -> int:
        return n

    with bounded_work(50):
        [f(i) for i in range(10)]
    with pytest.raises(WorkExceeded), bounded_work(50):
        for i in range(100):
            with contextlib.suppress(WorkExceeded):
                f(i)


def test_deep_nesting_and_huge_files_are_refused(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: " + "[" * 600 + "]" * 600 + "\n")
    nested = tmp_path / "nested.yaml"
    nested.write_text("".join("  " * i + f"k{i}:\n" for i in range(600)) + "  " * 600 + "v: 1\n")
    huge = tmp_path / "huge.yaml"
    huge.write_text("name: tiny\n" + "# padding\n" * 200_000)
    for path, words in ((deep, "nesting"), (nested, "nesting"), (huge, "bytes")):
        with bounded_work(WORK):
            res = CliRunner().invoke(main, ["validate", str(path)])
        refused(res, str(path), words)


def test_self_referencing_alias_and_moderate_aliases(tmp_path):
    rec = tmp_path / "rec.yaml"
    rec.write_text("dataset: &d {kind: file, x: *d}\n")
    refused(CliRunner().invoke(main, ["validate", str(rec)]), str(rec))
    ok = tmp_path / "ok.yaml"
    ok.write_text("a: &e [0.1, 0.3]\nb: *e\nc: {x: *e, y: *e}\n")
    e = [0.1, 0.3]
    assert load_bounded(ok) == {"a": e, "b": e, "c": {"x": e, "y": e}}


# ---- numbers never crash a run ------------------------------------------------------------------


@pytest.mark.parametrize("eta", [1e160, 1e300])
def test_huge_step_sizes_mark_cells_diverged_and_the_run_goes_on(tmp_path, eta):
    cfg = tiny_config(methods={m: {"eta": [0.3, eta]} for m in ALL})
    path = write_config(tmp_path / "eta.yaml", cfg)
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output + res.stderr
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    big = runs[runs["eta"] == eta]
    assert big["diverged"].all()
    assert big["diverged_reason"].notna().all()
    assert (big["test_loss"] == np.inf).all() and (big["val_loss"] == np.inf).all()
    assert big["diverged_reason"].str.contains("overflow").any()
    assert not runs.loc[runs["eta"] == 0.3, "diverged"].any()
    assert runs.loc[runs["eta"] == 0.3, "diverged_reason"].isna().all()


def _one_cell_record(tmp_path, monkeypatch, what: str) -> dict:
    from ilnrun import config as C

    cfg = C.resolve(tiny_config(methods={"doubly_sgd": {"eta": 0.3}}))
    cell = C.cells(cfg)[0]
    if what == "fit":
        info = cellmod.LEARNERS["doubly_sgd"]

        def bad_fit(*a, **k):
            raise ZeroDivisionError("float division by zero")

        monkeypatch.setitem(cellmod.LEARNERS, "doubly_sgd", replace(info, fit=bad_fit))
    elif what == "evaluation":
        real_eval = cellmod.evaluate

        def bad_eval(res, *a, **k):
            if not res.diverged:  # the diverged path computes nothing
                raise np.linalg.LinAlgError("singular")
            return real_eval(res, *a, **k)

        monkeypatch.setattr(cellmod, "evaluate", bad_eval)
    else:
        real = cellmod.evaluate

        def nan_eval(*a, **k):
            return {**real(*a, **k), "test_loss": float("nan")}

        monkeypatch.setattr(cellmod, "evaluate", nan_eval)
    return cellmod.run_cell(cfg, cell)["row"]


@pytest.mark.parametrize(
    ("what", "reason"),
    [("fit", "division by zero in fit"), ("evaluation", "in evaluation"), ("nan", "nan test_loss")],
)
def test_numeric_errors_and_non_finite_losses_mark_the_cell(tmp_path, monkeypatch, what, reason):
    row = _one_cell_record(tmp_path, monkeypatch, what)
    assert row["diverged"] is True
    assert reason in row["diverged_reason"]
    assert row["test_loss"] == np.inf and row["val_loss"] == np.inf


# ---- --jobs ----------------------------------------------------------------------------------


def test_jobs_1_and_2_give_bit_identical_runs(tmp_path, config_file):
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        res = CliRunner().invoke(
            main, ["run", str(config_file), "--out", str(out), "-q", "--jobs", jobs]
        )
        assert res.exit_code == 0, res.output
        outs.append(pd.read_csv(out / "runs.csv").drop(columns=["wall_s", "eval_s"]))
    pd.testing.assert_frame_equal(outs[0], outs[1], check_exact=True)


def test_jobs_capped_to_the_cpus_present(tmp_path, config_file):
    res = CliRunner().invoke(
        main, ["run", str(config_file), "--out", str(tmp_path / "o"), "-q", "--jobs", "100000"]
    )
    assert res.exit_code == 0, res.output
    assert "--jobs 100000 capped to the" in res.stderr


# ---- CSV / NPZ files that cannot be misread ------------------------------------------------------

SECRET = "hunter2"


def _csv(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _good_rows(n: int = 12) -> str:
    return "".join(f"{i % 5}.5,{i % 3}.25,{i % 7}.0\n" for i in range(n))


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("index", ",a,b,y\n" + "".join(f"{i},1.0,2.0,3.0\n" for i in range(12)), "no name"),
        ("unnamed", "Unnamed: 0,a,y\n" + _good_rows(), "no name"),
        ("duplicate", "a,a,y\n" + _good_rows(), "both named 'a'"),
        ("short header", "a,y\n" + _good_rows(), "header names 2 columns"),
        ("long header", "a,b,c,y\n" + _good_rows(), "header names 4 columns"),
        ("no header", _good_rows(), "no header row"),
        ("semicolons", f"a;b;y;{SECRET}\n" + _good_rows().replace(",", ";"), "semicolons"),
        ("tabs", f"a\tb\ty\t{SECRET}\n" + _good_rows().replace(",", "\t"), "tabs"),
        ("huge", "a,b,y\n" + _good_rows() + "1e300,1.0,2.0\n", "beyond"),
        ("text", "a,b,y\n" + _good_rows() + f"{SECRET},1.0,2.0\n", "not a number"),
    ],
)
def test_misreadable_csv_files_are_refused_without_quoting_them(tmp_path, name, text, words):
    path = _csv(tmp_path, f"{name.replace(' ', '_')}.csv", text)
    spec = {
        "kind": "file",
        "path": path,
        "target": "y",
        "features": "all",
        "T": 5,
        "n_val": 2,
        "n_test": "rest",
    }
    problems = D.check(spec)
    assert problems, name
    message = " ".join(m for _, m in problems)
    assert words in message, message
    assert SECRET not in message
    assert "1e300" not in message


def test_a_list_of_features_is_the_list_of_columns(tmp_path):
    cols = ["age", "educ", "income", "y"]
    assert D.feature_names(["age", "educ"], "y", cols) == ["age", "educ"]
    with pytest.raises(D.DataError, match="strings"):
        D.feature_names(["age", 3], "y", cols)
    with pytest.raises(D.DataError, match="target"):
        D.feature_names(["age", "y"], "y", cols)
    path = _csv(
        tmp_path,
        "ok.csv",
        "age,educ,income,y\n" + "".join(f"{i},{i % 4},{i % 5},{i % 3}\n" for i in range(20)),
    )
    spec = {
        "kind": "file",
        "path": path,
        "target": "y",
        "features": ["age", "educ"],
        "T": 10,
        "n_val": 4,
        "n_test": "rest",
    }
    assert D.check(spec) == []
    ds = D.build_dataset(spec, np.random.default_rng(0))
    assert ds.X_train.shape == (10, 2) and ds.info["features"] == ["age", "educ"]


# ---- signals and a killed parent ---------------------------------------------------------------

SLOW = tiny_config(
    **{
        "name": "slow",
        "dataset.D": [30, 40, 50],
        "dataset.T": 300,
        "repetitions": 12,
        "evaluation.m_test": 100,
        "methods": {
            "shrinking_gradient": {"eta": [0.3, 1.0], "schedule": "inv_sqrt"},
            "doubly_sgd": {"eta": [0.1, 0.3]},
            "fixed_random": {"eta": [0.3, 1.0]},
        },
    }
)


def _start(cfg_path: Path, out: Path, jobs: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ilnrun.cli",
            "run",
            str(cfg_path),
            "--out",
            str(out),
            "-q",
            "--jobs",
            jobs,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg", "PYTHONFAULTHANDLER": "1"},  # a crash says where
    )


def _wait_for_cells(out: Path, proc: subprocess.Popen, n: int) -> None:
    log = out / "cells.jsonl"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and proc.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)


def _descendants(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                kids += [int(d.name), *_descendants(int(d.name))]
    return kids


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def slow_reference(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("slow")
    cfg_path = write_config(d / "slow.yaml", SLOW)
    out = d / "ref"
    res = CliRunner().invoke(main, ["run", str(cfg_path), "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    return cfg_path, out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize(("sig", "code", "jobs"), [("SIGTERM", 143, "2"), ("SIGINT", 130, "1")])
def test_signal_stops_cleanly_and_the_resume_equals_an_uninterrupted_run(
    slow_reference, tmp_path, sig, code, jobs
):
    cfg_path, ref = slow_reference
    out = tmp_path / "out"
    proc = _start(cfg_path, out, jobs)
    _wait_for_cells(out, proc, 5)
    kids = _descendants(proc.pid)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert "cells saved in" in err and "resume with: ilnrun run" in err
    time.sleep(1.0)
    assert not [k for k in kids if _running(k)], "workers outlived the run"
    with open(out / ".lock", "a") as fh:  # released
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    again = shlex.split(err.split("resume with: ", 1)[1].strip())
    assert again[:2] == ["ilnrun", "run"]
    res = CliRunner().invoke(main, [*again[1:], "-q"])
    assert res.exit_code == 0, res.output
    for name in ("runs.csv", "summary.csv", "curves.csv"):
        a, b = pd.read_csv(ref / name), pd.read_csv(out / name)
        drop = [c for c in a.columns if c.startswith(("wall_s", "eval_s"))]
        pd.testing.assert_frame_equal(a.drop(columns=drop), b.drop(columns=drop), check_exact=True)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_workers_exit_when_the_parent_is_killed(slow_reference, tmp_path):
    cfg_path, _ = slow_reference
    out = tmp_path / "out"
    proc = _start(cfg_path, out, "2")
    _wait_for_cells(out, proc, 5)
    kids = _descendants(proc.pid)
    assert kids, "no workers started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and [k for k in kids if _running(k)]:
        time.sleep(0.2)
    alive = [k for k in kids if _running(k)]
    assert not alive, [Path(f"/proc/{k}/cmdline").read_bytes()[:120] for k in alive]


def test_an_integer_of_too_many_digits_is_refused_by_name(tmp_path, config_file):
    """An integer longer than Python converts from text (4 300 digits) in a config file or a
    --set value: exit status 2 naming it, not a ValueError traceback."""
    cfg = tmp_path / "big.yaml"
    cfg.write_text("name: big\nseed: " + "9" * 5000 + "\n")
    r = invoke(["validate", cfg])
    assert r.exit_code == 2 and "digits" in r.output and "Traceback" not in r.output, r.output
    r = invoke(["validate", config_file, "--set", "seed=" + "9" * 5000])
    assert r.exit_code == 2 and "digits" in r.output and "Traceback" not in r.output, r.output
