"""Trust, round three: every value that enters is bounded, every file written is ilnrun's (also
through hard links and ``report --out``), cell records are validated, the API keeps the command
line's promises, and nothing a user can do ends in a traceback."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import TINY_CELLS, WORK, bounded_work, tiny_config, write_config

import ilnrun
from ilnrun import experiment, params
from ilnrun import results as R
from ilnrun.api import ArgumentError
from ilnrun.cli import main
from ilnrun.config import ConfigError

LAUGHS = (
    "{"
    + ", ".join(
        [
            'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
            *(
                f"{x}: &{x} [{','.join(['*' + p] * 9)}]"
                for p, x in zip("abcdefgh", "bcdefghi", strict=True)
            ),
        ]
    )
    + "}"
)
DEEP = "[" * 25_000 + "]" * 25_000


@pytest.fixture(autouse=True)
def _restore_signal_handlers():
    """An interrupted ``ilnrun run`` leaves SIGINT / SIGTERM ignored (its process is about to
    exit); in this test process they are put back."""
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, h in old.items():
        signal.signal(sig, h)


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def _exits(res, code: int, *words: str) -> str:
    text = res.output + res.stderr
    assert res.exit_code == code, text
    assert "Traceback" not in text
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    for w in words:
        assert w in text, text
    return text


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny config and a finished, plotted run of it (not to be modified by tests)."""
    d = tmp_path_factory.mktemp("ref")
    cfg_path = write_config(d / "tiny.yaml", tiny_config())
    out = d / "out"
    assert _invoke("run", str(cfg_path), "--out", str(out), "-q").exit_code == 0
    assert _invoke("plot", str(out), "--format", "png").exit_code == 0
    return cfg_path, out


def _copy(reference, tmp_path: Path, name: str = "copy") -> Path:
    out = tmp_path / name
    shutil.copytree(reference[1], out, symlinks=True)
    return out


def _resume(cfg_path: Path, out: Path, *extra: str):
    return _invoke("run", str(cfg_path), "--out", str(out), "-q", *extra)


def _keep_records(out: Path, n: int) -> None:
    lines = (out / "cells.jsonl").read_bytes().splitlines(keepends=True)
    (out / "cells.jsonl").write_bytes(b"".join(lines[:n]))


def _runs(d: Path) -> pd.DataFrame:
    return pd.read_csv(d / "runs.csv").drop(columns=["wall_s", "eval_s"])


# ---- 1. bounded everywhere a value enters ------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "name",
        "seed",
        "dataset.D",
        "methods.kernel_ogd",
        "budget.dsgd_k",
        "evaluation.estimate_draws",
    ],
)
@pytest.mark.parametrize("value", ["bomb", "deep"])
def test_set_values_are_bounded(config_file, key, value):
    with bounded_work(WORK):
        res = _invoke(
            "validate", str(config_file), "--set", f"{key}={LAUGHS if value == 'bomb' else DEEP}"
        )
    text = _exits(res, 2, key)
    assert len(text) < 1000  # the value is never rendered in full


@pytest.mark.parametrize(
    "value",
    ["iid", "inverse_cdf", "inverse_cdf_v3", "Multinomial", "''", "3", "[multinomial]", "{a: 1}"],
)
def test_bad_estimate_draws_are_refused(config_file, tmp_path, value):
    """``evaluation.estimate_draws``: a stream name it does not know (an unversioned or
    future name, another case), a number, a list or a mapping exits 2 naming the key and the
    streams, through ``--set`` and in a config file, before any cell runs."""
    text = _exits(
        _invoke("validate", str(config_file), "--set", f"evaluation.estimate_draws={value}"),
        2,
        "evaluation.estimate_draws",
    )
    assert "inverse_cdf_v1" in text and len(text) < 1000
    bad = config_file.read_text().replace(
        "evaluation:\n", f"evaluation:\n  estimate_draws: {value}\n", 1
    )
    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    out = tmp_path / "never"
    _exits(_invoke("run", str(path), "--out", str(out), "-q"), 2, "evaluation.estimate_draws")
    assert not out.exists()


@pytest.mark.parametrize(
    ("value", "words"), [("010", "octal"), ("2:30", "base-60"), ("[1, 0777]", "octal")]
)
def test_yaml11_numbers_through_set_are_refused(config_file, value, words):
    _exits(_invoke("validate", str(config_file), "--set", f"seed={value}"), 2, "seed", words)


def test_quoted_and_plain_numbers_through_set_still_work(config_file):
    res = _invoke("validate", str(config_file), "--set", "seed=10", "--set", "name='010'")
    assert res.exit_code == 0, res.output


def test_duplicate_keys_in_a_config_are_refused_with_the_key(tmp_path, config_file):
    text = config_file.read_text() + "seed: 3\n"
    assert text.count("\nseed:") + text.startswith("seed:") == 2
    dup = tmp_path / "dup.yaml"
    dup.write_text(text)
    _exits(_invoke("validate", str(dup)), 2, "'seed'", "twice")


def test_show_renders_nested_values_in_bounded_length():
    x: object = ["lol"] * 9
    for _ in range(8):
        x = [x] * 9
    with bounded_work(WORK):
        s = params.show(x)
    assert len(s) <= params.SHOW_CHARS


def test_api_mapping_with_shared_lists_is_refused_fast():
    x: object = list(range(9))
    for _ in range(8):
        x = [x] * 9
    cfg = tiny_config(**{"dataset.D": x})
    with bounded_work(WORK), pytest.raises(ConfigError, match="expands to more than"):
        ilnrun.run_experiment(cfg)
    cyclic: list = [1]
    cyclic.append(cyclic)
    with bounded_work(WORK), pytest.raises(ConfigError):
        ilnrun.run_experiment(tiny_config(**{"dataset.D": cyclic}))


@pytest.mark.parametrize("command", ["plot", "report"])
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("config.yaml", LAUGHS),
        ("config.yaml", "a:\n" + "".join(" " * i + "- \n" for i in range(1, 2000))),
        ("config.yaml", DEEP * 4),
        ("meta.json", "[" * 100_000 + "]" * 100_000),
    ],
)
def test_results_files_are_read_bounded(reference, tmp_path, command, name, text):
    out = _copy(reference, tmp_path)
    (out / name).write_text(text)
    if name == "meta.json" and command == "plot":
        assert _invoke(command, str(out)).exit_code == 0  # plot does not read meta.json
        return
    with bounded_work(WORK):
        res = _invoke(command, str(out))
    _exits(res, 2, name)


def test_deep_record_and_manifest_are_refused_not_recursed(reference, tmp_path):
    out = _copy(reference, tmp_path)
    with open(out / "cells.jsonl", "ab") as fh:
        fh.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    res = _resume(reference[0], out)
    _exits(res, 0, "1 corrupt line")
    (out / R.MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    _exits(_resume(reference[0], out), 2, R.MANIFEST)


# ---- 2. only ours, also through hard links and --out --------------------------------------------


def test_a_hard_linked_cell_log_is_never_written(reference, tmp_path):
    out = _copy(reference, tmp_path)
    _keep_records(out, TINY_CELLS // 2)
    with open(out / "cells.jsonl", "ab") as fh:
        fh.write(b'{"id": "torn')  # a torn last line: the repair must not cut the shared file
    outside = tmp_path / "elsewhere.jsonl"
    os.link(out / "cells.jsonl", outside)
    before = outside.read_bytes()
    res = _resume(reference[0], out)
    assert res.exit_code == 0, res.output
    assert outside.read_bytes() == before
    assert len((out / "cells.jsonl").read_bytes().splitlines()) == TINY_CELLS
    pd.testing.assert_frame_equal(_runs(out), _runs(reference[1]), check_exact=True)


def test_a_hard_link_snapshot_does_not_grow_when_the_original_resumes(reference, tmp_path):
    r = _copy(reference, tmp_path, "r")
    _keep_records(r, 5)
    snap = tmp_path / "snap"
    shutil.copytree(r, snap, copy_function=os.link)  # cp -al r snap
    before = {p.name: p.read_bytes() for p in snap.iterdir() if p.is_file()}
    assert _resume(reference[0], r).exit_code == 0
    assert {p.name: p.read_bytes() for p in snap.iterdir() if p.is_file()} == before


def test_report_out_follows_the_ownership_rule(reference, tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "REPORT.md").write_text("my own notes\n")
    (user / "figure1.png").write_bytes(b"my figure")
    _exits(_invoke("report", str(reference[1]), "--out", str(user)), 2, "not created by ilnrun")
    assert (user / "REPORT.md").read_text() == "my own notes\n"
    assert (user / "figure1.png").read_bytes() == b"my figure"
    fresh = tmp_path / "new"
    assert _invoke("report", str(reference[1]), "--out", str(fresh)).exit_code == 0
    assert "REPORT.md" in json.loads((fresh / R.MANIFEST).read_text())["files"]
    again = _invoke("report", str(reference[1]), "--out", str(fresh))
    assert again.exit_code == 0, again.output  # ours: rewritten
    empty_but_manifest = tmp_path / "claimed"
    empty_but_manifest.mkdir()
    R.write_manifest(empty_but_manifest, [])
    (empty_but_manifest / "REPORT.md").write_text("user's\n")
    _exits(_invoke("report", str(reference[1]), "--out", str(empty_but_manifest)), 2, "REPORT.md")
    assert (empty_but_manifest / "REPORT.md").read_text() == "user's\n"


def test_a_report_of_an_earlier_version_is_adopted(reference, tmp_path):
    earlier = tmp_path / "experiments" / "figure1"
    earlier.mkdir(parents=True)
    (earlier / "REPORT.md").write_text(
        "# Report\n\n_Generated by `ilnrun report` from `results/figure1` — do not edit._\n"
    )
    (earlier / "figure1.png").write_bytes(b"old figure")
    res = _invoke("report", str(reference[1]), "--out", str(earlier))
    assert res.exit_code == 0, res.output
    listed = json.loads((earlier / R.MANIFEST).read_text())["files"]
    assert {"REPORT.md", "figure1.png"} <= set(listed)
    assert (earlier / "figure1.png").read_bytes() == (reference[1] / "figure1.png").read_bytes()


def test_a_lock_listed_in_a_forged_manifest_still_locks(reference, tmp_path, monkeypatch):
    out = _copy(reference, tmp_path)
    R.write_manifest(out, [*json.loads((out / R.MANIFEST).read_text())["files"], ".lock"])
    seen = []

    def probe(cfg, pending, jobs, backend, on_record, one_at_a_time=frozenset()):
        fd = os.open(out / ".lock", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append("second lock taken")
        except BlockingIOError:
            seen.append("refused")
        finally:
            os.close(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "execute", probe)
    _resume(reference[0], out, "--fresh")
    assert seen == ["refused"]


def test_temporary_files_of_a_killed_write_are_swept(reference, tmp_path):
    out = _copy(reference, tmp_path)
    ours = [".runs.csv.ab12cd_3.tmp", ".cells.jsonl.zz99yy88.tmp", f".{R.MANIFEST}.k2j3h4g5.tmp"]
    theirs = [".notes.txt.ab12cd34.tmp", ".runs.csv.tmp", "runs.csv.ab12cd34.tmp"]
    for n in ours + theirs:
        (out / n).write_text("partial")
    assert _resume(reference[0], out).exit_code == 0
    left = {p.name for p in out.iterdir()}
    assert not set(ours) & left
    assert set(theirs) <= left


def test_old_figure_temporaries_are_swept_by_plot(reference, tmp_path):
    out = _copy(reference, tmp_path)
    stale = out / ".figure1.png.a1b2c3d4.tmp"
    stale.write_text("partial")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    assert _invoke("plot", str(out), "--format", "png").exit_code == 0
    assert not stale.exists()


def test_joblib_folders_are_ours_and_removed(config_file, tmp_path):
    from ilnrun import tempdirs

    base = tempdirs.base_dir()
    stale = base / f"{tempdirs.PREFIX}{2**22 + 12345}-abcdefgh"  # a pid that does not exist
    stale.mkdir(exist_ok=True)
    (stale / "joblib_memmapping_folder_x").mkdir(exist_ok=True)
    pid = os.getpid()
    res = _invoke(
        "run",
        str(config_file),
        "--out",
        str(tmp_path / "o"),
        "-q",
        "--jobs",
        "2",
        "--backend",
        "loky",  # (forked workers have no joblib folder)
    )
    assert res.exit_code == 0, res.output
    assert not stale.exists()
    leaked = [p.name for p in base.glob(f"joblib_memmapping_folder_{pid}_*")]
    leaked += [p.name for p in base.glob(f"{tempdirs.PREFIX}{pid}-*")]
    assert leaked == []


# ---- 5. records are validated ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [("test_loss", "oops"), ("diverged", "no"), ("repetition", 1.5), ("val_loss", None)],
)
def test_mistyped_records_are_skipped_and_rerun(reference, tmp_path, column, value):
    out = _copy(reference, tmp_path)
    lines = (out / "cells.jsonl").read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[3])
    rec["row"][column] = value
    lines[3] = (json.dumps(rec) + "\n").encode()
    (out / "cells.jsonl").write_bytes(b"".join(lines))
    res = _resume(reference[0], out)
    _exits(res, 0, "skipped 1 corrupt line")
    pd.testing.assert_frame_equal(_runs(out), _runs(reference[1]), check_exact=True)


# ---- 6. the API keeps the command line's promises ----------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"jobs": "2"}, "jobs"),
        ({"jobs": 2.5}, "jobs"),
        ({"jobs": True}, "jobs"),
        ({"jobs": 0}, "jobs"),
        ({"overrides": "seed=1"}, "overrides"),
        ({"overrides": [1]}, "overrides"),
        ({"scheduler": "tcp://127.0.0.1:1"}, "dask"),
        ({"backend": "threads"}, "backend"),
        ({"fresh": "yes"}, "fresh"),
    ],
)
def test_run_experiment_arguments_are_validated(kwargs, words, monkeypatch):
    monkeypatch.setattr(experiment, "execute", lambda *a: pytest.fail("work started"))
    with pytest.raises(ArgumentError, match=words):
        ilnrun.run_experiment(tiny_config(), **kwargs)


def test_run_experiment_caps_jobs_to_the_cpus(monkeypatch, capsys):
    from ilnrun.api import cpus

    seen = []

    def fake(cfg, pending, jobs, backend, on_record, one_at_a_time=frozenset()):
        seen.append(jobs)
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "execute", fake)
    with pytest.raises(experiment.RunInterrupted):
        ilnrun.run_experiment(tiny_config(), jobs=100_000)
    assert seen == [cpus()]
    assert "capped" in capsys.readouterr().err


def _estimator():
    from ilnrun.estimators import FixedRandomRegressor

    return FixedRandomRegressor


def test_estimators_huge_eta_and_huge_y_and_text():
    pytest.importorskip("sklearn")
    Est = _estimator()
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(40, 3))
    y = X[:, 0]
    with pytest.raises(ValueError, match="eta"):
        Est(eta=1e200, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="y"):
        Est(random_state=0).fit(X, np.where(y > 0, 1e308, -1e308))
    with pytest.raises(ValueError, match="text"):
        Est(random_state=0).fit(X.astype(str), y)
    with pytest.raises(ValueError, match="text"):
        Est(random_state=0).fit(X, y.astype(str))


# ---- 7. no traceback for anything a user can do -----------------------------------------------


def _damage(kind: str, d: Path) -> None:
    def put(name: str, data: bytes | str) -> None:
        p = d / name
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())

    if kind == "empty summary":
        put("summary.csv", "")
    elif kind == "binary summary":
        put("summary.csv", bytes(range(256)) * 8)
    elif kind == "header-only summary":
        put("summary.csv", "method,dsgd_k,n\n")
    elif kind == "summary without method":
        put("summary.csv", "a,b\n1,2\n")
    elif kind == "summary text dsgd_k":
        df = pd.read_csv(d / "summary.csv")
        df["dsgd_k"] = "four"
        put("summary.csv", df.to_csv(index=False))
    elif kind == "summary unknown method":
        df = pd.read_csv(d / "summary.csv")
        df["method"] = "zzz"
        put("summary.csv", df.to_csv(index=False))
    elif kind == "latin-1 summary":
        put("summary.csv", "method,dsgd_k,n\n\xe9t\xe9,4,2\n".encode("latin-1"))
    elif kind == "list meta":
        put("meta.json", "[1, 2]")
    elif kind == "bad meta":
        put("meta.json", "{not json")
    elif kind == "missing curves":
        (d / "curves.csv").unlink()
    elif kind == "empty curves":
        put("curves.csv", "")
    elif kind == "curves text t":
        put("curves.csv", "method,t,online_loss\nx,y,z\n")
    elif kind == "figure1.png a directory":
        (d / "figure1.png").unlink()
        (d / "figure1.png").mkdir()
    elif kind == "summary.csv a directory":
        (d / "summary.csv").unlink()
        (d / "summary.csv").mkdir()
    elif kind == "config a list":
        put("config.yaml", "- 1\n- 2\n")
    elif kind == "config without dataset":
        put("config.yaml", "name: x\nmethods: {}\n")
    elif kind == "config dataset a list":
        put("config.yaml", "name: x\ndataset: [1]\nmethods: {}\n")
    elif kind == "config binary":
        put("config.yaml", b"\xff\xfe\x00garbage")
    elif kind == "runs text selected":
        df = pd.read_csv(d / "runs.csv")
        df["selected"] = "maybe"
        put("runs.csv", df.to_csv(index=False))
    elif kind == "runs missing column":
        put("runs.csv", pd.read_csv(d / "runs.csv").drop(columns=["setting"]).to_csv(index=False))
    elif kind == "empty runs":
        put("runs.csv", "")
    elif kind == "manifest a list":
        put(R.MANIFEST, "[1]")
    else:  # pragma: no cover
        raise AssertionError(kind)


DAMAGE = [
    "empty summary",
    "binary summary",
    "header-only summary",
    "summary without method",
    "summary text dsgd_k",
    "summary unknown method",
    "latin-1 summary",
    "list meta",
    "bad meta",
    "missing curves",
    "empty curves",
    "curves text t",
    "figure1.png a directory",
    "summary.csv a directory",
    "config a list",
    "config without dataset",
    "config dataset a list",
    "config binary",
    "runs text selected",
    "runs missing column",
    "empty runs",
    "manifest a list",
]


@pytest.mark.parametrize("command", ["plot", "report"])
@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_or_foreign_results_exit_cleanly(reference, tmp_path, command, kind):
    out = _copy(reference, tmp_path)
    _damage(kind, out)
    args = [command, str(out)] + (["--format", "png"] if command == "plot" else [])
    res = _invoke(*args)
    text = res.output + res.stderr
    assert res.exit_code in (0, 2), text
    assert "Traceback" not in text
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    if res.exit_code == 2:
        assert len([line for line in res.stderr.splitlines() if line.strip()]) == 1, text


def test_index_never_follows_a_linked_report(tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nhunter2\n")
    exp = tmp_path / "experiments"
    (exp / "a").mkdir(parents=True)
    (exp / "a" / "REPORT.md").symlink_to(secret)
    (exp / "b").mkdir()
    (exp / "b" / "REPORT.md").write_text("# B\n\n```\nilnrun run b\n\nheadline text\n")
    (exp / "c").symlink_to(tmp_path, target_is_directory=True)
    (exp / "d" / "REPORT.md").mkdir(parents=True)
    res = _invoke("index", str(exp))
    assert res.exit_code == 0, res.output
    readme = (exp / "README.md").read_text()
    assert "hunter2" not in readme and "Secret" not in readme
    assert "[B]" in readme


def test_read_only_results_exit_1(reference, tmp_path, monkeypatch):
    out = _copy(reference, tmp_path)

    def refuse(path, data):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(R, "write_atomic_bytes", refuse)
    import ilnrun.readers as readers

    monkeypatch.setattr(readers, "write_manifest", lambda *a: refuse(out, b""))
    for args in (["plot", str(out), "--format", "png"], ["report", str(out)]):
        _exits(_invoke(*args), 1, "Permission denied")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG])
@pytest.mark.parametrize("command", ["run", "plot", "report"])
def test_full_disk_exits_1_with_one_line(reference, tmp_path, monkeypatch, code, command):
    out = _copy(reference, tmp_path)
    _keep_records(out, 3)
    real = os.write

    def full(fd, data):
        if len(data) > 200:
            raise OSError(code, os.strerror(code))
        return real(fd, data)

    def full_open(*a, **k):
        raise OSError(code, os.strerror(code), "somefile")

    if command == "run":
        monkeypatch.setattr(R.os, "write", full)
        monkeypatch.setattr(experiment, "write_run_tables", lambda *a, **k: full_open())
        res = _resume(reference[0], out)
    else:
        monkeypatch.setattr(R.tempfile, "mkstemp", full_open)
        res = _invoke(command, str(out), *(["--format", "png"] if command == "plot" else []))
    _exits(res, 1, os.strerror(code))


def test_full_disk_with_workers_says_one_line(reference, tmp_path, monkeypatch):
    """A disk that fills while loky workers still run cells: the run's one line, no joblib
    warning about the tasks it cancelled (it points into joblib and says nothing more), and
    the resume equals the uninterrupted run."""
    import warnings

    from ilnrun.engines import local

    out = _copy(reference, tmp_path)
    _keep_records(out, 0)
    real, real_warm_up, armed = os.write, local.warm_up, []

    def warm_up(*a):  # the disk fills once the workers have their cells
        pending = real_warm_up(*a)
        armed.append(True)
        return pending

    def full(fd, data):  # a full disk: files only (os.write is also the workers' pipes')
        if armed and len(data) > 200 and stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(local, "warm_up", warm_up)
    monkeypatch.setattr(R.os, "write", full)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = _resume(reference[0], out, "--jobs", "2")
    _exits(res, 1, os.strerror(errno.ENOSPC))
    assert not [w for w in seen if "tasks" in str(w.message)], [str(w.message) for w in seen]
    monkeypatch.undo()
    assert _resume(reference[0], out, "--jobs", "2").exit_code == 0
    drop = ["wall_s", "eval_s"]
    pd.testing.assert_frame_equal(
        pd.read_csv(out / "runs.csv").drop(columns=drop),
        pd.read_csv(reference[1] / "runs.csv").drop(columns=drop),
    )


@pytest.mark.parametrize("value", ["abc", "-5", "nan", "inf", "1e400", "0", " "])
def test_bad_jax_memory_values_are_refused(config_file, tmp_path, monkeypatch, value):
    from ilnrun.engines import jax_runner

    monkeypatch.setenv(jax_runner.MEMORY_ENV, value)
    if value.strip() == "":
        assert jax_runner.memory_budget() == jax_runner.DEFAULT_MEMORY_MB * 2**20
        return
    with pytest.raises(ValueError, match=jax_runner.MEMORY_ENV):
        jax_runner.memory_budget()


def test_sigint_while_tables_are_written_gives_the_resume_hint(reference, tmp_path, monkeypatch):
    out = _copy(reference, tmp_path)

    def interrupted(*a, **k):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        raise AssertionError("not interrupted")

    monkeypatch.setattr(experiment, "write_run_tables", interrupted)
    res = _resume(reference[0], out)
    _exits(res, 130, "resume with")


def test_a_swallowed_sigterm_still_stops_the_run(reference, tmp_path, monkeypatch):
    out = _copy(reference, tmp_path)
    _keep_records(out, 3)

    def swallowed(cfg, pending, jobs, backend, on_record, one_at_a_time=frozenset()):
        try:  # as in a garbage-collection callback: the exception is printed and dropped
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)
        except KeyboardInterrupt:
            pass

    monkeypatch.setattr(experiment, "execute", swallowed)
    _exits(_resume(reference[0], out), 143, "SIGTERM", "resume with")


def test_a_sigterm_swallowed_before_the_cells_still_stops_the_run(reference, tmp_path, monkeypatch):
    """A SIGTERM whose exception is swallowed before the cells start (2 of 22 trials, about
    3.5 s into a fresh `--engine jax` run: jax's garbage-collection callback printed it and went
    on) was forgotten when the cells started: the run finished every cell and exited 0. It is
    kept: exit 143, the resume hint, and no traceback (the callback's is not printed)."""
    out = _copy(reference, tmp_path)
    _keep_records(out, 3)
    real = experiment.prepare_dir

    class Callback:
        def __del__(self):  # as jax's gc callback: Python reports the exception and goes on
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)

    def swallowing(*a, **k):
        Callback()
        return real(*a, **k)

    monkeypatch.setattr(experiment, "prepare_dir", swallowing)
    text = _exits(_resume(reference[0], out), 143, "SIGTERM", "resume with")
    assert "Exception ignored" not in text
    assert len((out / "cells.jsonl").read_bytes().splitlines()) == 3  # no cell ran
    monkeypatch.undo()
    _exits(_resume(reference[0], out), 0)  # and the directory resumes
    assert _runs(out).equals(_runs(reference[1]))


def test_a_second_ctrl_c_during_the_stop_is_absorbed(reference, tmp_path, monkeypatch):
    out = _copy(reference, tmp_path)
    _keep_records(out, 3)

    def twice(cfg, pending, jobs, backend, on_record, one_at_a_time=frozenset()):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
        finally:  # the cleanup is interrupted again
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)

    monkeypatch.setattr(experiment, "execute", twice)
    _exits(_resume(reference[0], out), 130, "SIGINT", "resume with")

    # a second Ctrl-C while the resume hint is being written (the run itself has unwound)
    import ilnrun.cli as cli

    real_join = cli.shlex.join

    def join_interrupted(args):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        return real_join(args)

    monkeypatch.setattr(cli.shlex, "join", join_interrupted)
    _exits(_resume(reference[0], out), 130, "SIGINT", "resume with")


STUCK = """
import sys, time
from ilnrun import experiment
from ilnrun.cli import main

def stuck(cfg, pending, jobs, backend, on_record, one_at_a_time=frozenset()):
    # compiled code that never looks at signals
    print("started", flush=True)
    while True:
        try:
            time.sleep(30)
        except KeyboardInterrupt:
            pass

experiment.execute = stuck
sys.argv = ["ilnrun", "run", sys.argv[1], "--out", sys.argv[2], "-q"]
main()
"""


def test_a_run_stuck_in_compiled_code_stops_promptly(config_file, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK, str(config_file), str(tmp_path / "o")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # a guard against a hang, not a measured time
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "resume" in err


def test_column_not_found_never_prints_the_header(tmp_path):
    from ilnrun import datasets as D

    secret = "hunter2_password"
    path = tmp_path / "t.csv"
    path.write_text(f"a,b,{secret}\n" + "".join(f"{i}.0,1.0,2.0\n" for i in range(20)))
    spec = {
        "kind": "file",
        "path": str(path),
        "target": "y",
        "features": "all",
        "T": 5,
        "n_val": 2,
        "n_test": "rest",
    }
    problems = D.check(spec)
    assert problems
    assert secret not in " ".join(m for _, m in problems)
    spec = {**spec, "target": "a", "features": ["zz"]}
    problems = D.check(spec)
    assert problems
    assert secret not in " ".join(m for _, m in problems)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "json"])
def test_a_damaged_openml_cache_is_a_clear_error(tmp_path, monkeypatch, damage):
    pytest.importorskip("sklearn")
    import socket

    from openml_cache import openml_cache_put

    from ilnrun import datasets as D

    openml_cache_put(
        tmp_path, "ilnrun-toy", {"a": np.arange(50.0), "y": np.arange(50.0)}, "y", 990001
    )

    def no_network(*a, **k):
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert files
    for p in files:
        data = p.read_bytes()
        if damage == "truncate":
            p.write_bytes(data[: len(data) // 2])
        elif damage == "garbage":
            p.write_bytes(b"\x1f\x8b" + bytes(range(256)))
        elif damage == "empty":
            p.write_bytes(b"")
        elif p.suffix == ".gz" and "features" not in p.name:
            import gzip

            p.write_bytes(gzip.compress(b'{"data_set_description": [1, 2]}'))
    spec = {
        "kind": "openml",
        "name": "ilnrun-toy",
        "version": 1,
        "data_home": str(tmp_path),
        "target": "y",
        "log_target": False,
        "features": "all",
        "T": 20,
        "n_val": 10,
        "n_test": "rest",
        "standardize": False,
        "center": False,
    }
    problems = D.check(spec)
    assert problems and problems[0][0] == "name", problems
