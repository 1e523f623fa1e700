"""A results directory keeps its promises through resumes, ``--extend`` and ``--fresh``: cells
that timed out under a lower limit run again, cells the config dropped are named once (not on
every resume), a record whose values changed is skipped and its cell rerun, ``--fresh`` deletes
only what ilnrun wrote (checked by digest), and ``--out ''`` is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import invoke, read_meta, refused, tiny_config, write_config

from ilnrun import results as R

# 2 values of D x 1 repetition x 2 learners x 2 grid points = 8 cells
METHODS = {
    "kernel_ogd": {"eta": [0.3, 1.0], "schedule": "constant"},
    "fixed_random": {"eta": [0.3, 1.0], "schedule": "inv_sqrt"},
}
CELLS = 8


def _config(**changes) -> dict:
    cfg = tiny_config(repetitions=1, methods=METHODS)
    cfg.update(changes)
    return cfg


def _run(cfg_path: Path, out: Path, *extra: str):
    return invoke(["run", cfg_path, "--out", out, "-q", "--jobs", "1", *extra])


def _ok(res) -> str:
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    return res.output


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / R.CELL_LOG).read_text().splitlines() if x.strip()]


def _write_records(out: Path, recs: list[dict]) -> None:
    (out / R.CELL_LOG).write_text("".join(json.dumps(r) + "\n" for r in recs))


def _tables(d: Path) -> pd.DataFrame:
    runs = pd.read_csv(d / "runs.csv")
    return runs.drop(columns=["wall_s", "eval_s"]).sort_values("cell_id").reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Path]:
    """The small config and a finished run of it (not to be modified: tests copy it)."""
    d = tmp_path_factory.mktemp("integrity")
    cfg_path = write_config(d / "small.yaml", _config())
    out = d / "out"
    _ok(_run(cfg_path, out))
    return cfg_path, out


def _copy(reference: tuple[Path, Path], tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(reference[1], out)
    return out


# ---- B9: timed-out cells ----------------------------------------------------------------------


def test_extend_reruns_cells_timed_out_under_a_lower_limit(tmp_path):
    """Cells timed out under ``cell_timeout_s: 1e-9`` run again under the config without the
    limit (--extend), with a note counting them; their tables then equal a run without the
    limit. A plain resume under the same limit keeps them (they would time out again)."""
    limited = write_config(tmp_path / "limited.yaml", _config(limits={"cell_timeout_s": 1e-9}))
    out = tmp_path / "out"
    _ok(_run(limited, out))
    assert pd.read_csv(out / "runs.csv")["timed_out"].all()
    again = _ok(_run(limited, out))
    assert "timed out" not in again and read_meta(out)["cells_resumed"] == CELLS
    free = write_config(tmp_path / "free.yaml", _config())
    refused(_run(free, out), "--extend")  # the limit is part of the config
    text = _ok(_run(free, out, "--extend"))
    assert f"{CELLS} cell(s) that timed out under a lower limits.cell_timeout_s run again" in text
    assert read_meta(out)["cells_resumed"] == 0
    assert not pd.read_csv(out / "runs.csv")["timed_out"].any()
    fresh = tmp_path / "fresh"
    _ok(_run(free, fresh))
    pd.testing.assert_frame_equal(_tables(out), _tables(fresh))
    assert "timed out" not in _ok(_run(free, out))  # said once: the new records are kept
    timed_out = [r for r in _records(out) if r["row"]["timed_out"]]
    assert len(timed_out) == CELLS and all(r["timeout_s"] == 1e-9 for r in timed_out)


def test_a_timed_out_record_without_its_limit_uses_the_stored_config(tmp_path):
    """Records written before they named their limit (no ``timeout_s``, no value digest) are
    taken to have run under the stored config's limit: raised, they run again."""
    limited = write_config(tmp_path / "limited.yaml", _config(limits={"cell_timeout_s": 1e-9}))
    out = tmp_path / "out"
    _ok(_run(limited, out))
    old = [
        {k: v for k, v in r.items() if k not in ("timeout_s", R.VALUES_KEY)} for r in _records(out)
    ]
    _write_records(out, old)
    R.write_manifest(out, R.read_manifest(out))  # names only, as that ilnrun wrote it
    _ok(_run(limited, out))
    assert read_meta(out)["cells_resumed"] == CELLS  # the same limit: kept
    higher = write_config(tmp_path / "higher.yaml", _config(limits={"cell_timeout_s": 1e6}))
    text = _ok(_run(higher, out, "--extend"))
    assert f"{CELLS} cell(s) that timed out" in text
    assert not pd.read_csv(out / "runs.csv")["timed_out"].any()


# ---- dropped cells: one note that says what happens --------------------------------------------


def test_extend_names_dropped_cells_once_and_says_what_happens(reference, tmp_path):
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    narrower = _config(methods={**METHODS, "kernel_ogd": {"eta": 0.3, "schedule": "constant"}})
    path = write_config(tmp_path / "narrower.yaml", narrower)
    text = _ok(_run(path, out, "--extend"))
    dropped = 2  # kernel_ogd eta=1.0 at both values of D
    assert f"{dropped} cell(s) recorded in {out / R.CELL_LOG} are not cells of the config" in text
    assert "left out of the tables, kept in cells.jsonl" in text
    assert "another config" not in text and "run again" not in text
    assert len(pd.read_csv(out / "runs.csv")) == CELLS - dropped
    assert len(_records(out)) == CELLS  # nothing ran, nothing lost
    assert read_meta(out)["cells_left_out"] == dropped
    assert "not cells of the config" not in _ok(_run(path, out))  # nothing changed: no note
    # back to the wider config: the dropped cells are read back, not rerun
    assert "not cells of the config" not in _ok(_run(cfg_path, out, "--extend"))
    assert len(pd.read_csv(out / "runs.csv")) == CELLS and len(_records(out)) == CELLS


# ---- a record whose values changed ---------------------------------------------------------------


def test_every_record_written_carries_a_value_digest_that_verifies(reference):
    recs = _records(reference[1])
    assert len(recs) == CELLS
    assert all(isinstance(r[R.VALUES_KEY], str) and R.values_verify(r) for r in recs)


def test_the_warning_names_missing_and_mismatched_digests_apart(reference, tmp_path):
    """One record edited (its digest no longer matches), one edited and stripped of it."""
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    recs = _records(out)
    recs[1]["row"]["test_loss"] *= 1.001
    recs[2] = _stripped_and_changed(recs, 2)
    _write_records(out, recs)
    text = _ok(_run(cfg_path, out))
    assert "skipped 2 record(s)" in text, text
    assert "values_sha256 missing in 1, not matching the values in 1" in text, text


def test_a_record_whose_values_changed_is_skipped_and_its_cell_rerun(reference, tmp_path):
    cfg_path, ref = reference
    out = _copy(reference, tmp_path)
    recs = _records(out)
    loss = recs[2]["row"]["test_loss"]
    recs[2]["row"]["test_loss"] = loss * 1.001  # a changed digit, the record otherwise whole
    _write_records(out, recs)
    text = _ok(_run(cfg_path, out))
    assert "skipped 1 record(s)" in text and "values changed" in text, text
    assert "values_sha256 does not match" in text and "missing" not in text, text
    assert read_meta(out)["cells_resumed"] == CELLS - 1
    pd.testing.assert_frame_equal(_tables(out), _tables(ref))  # the rerun cell's true numbers
    assert "values changed" not in _ok(_run(cfg_path, out))  # said once: superseded since


def _strip(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k != R.VALUES_KEY}


def test_records_without_a_value_digest_still_resume(reference, tmp_path):
    """Records written by ilnrun 0.2.0 and earlier carry no value digest (and their manifest,
    of version 1, no file digest): read as before, on this resume and the next ones."""
    cfg_path, ref = reference
    out = _copy(reference, tmp_path)
    _write_records(out, [_strip(r) for r in _records(out)])
    R.write_manifest(out, R.read_manifest(out))  # names only, as 0.2.0 wrote it
    for _ in range(2):
        text = _ok(_run(cfg_path, out))
        assert "warning" not in text
        assert read_meta(out)["cells_resumed"] == CELLS
        pd.testing.assert_frame_equal(_tables(out), _tables(ref))


def _stripped_and_changed(recs: list[dict], i: int) -> dict:
    rec = _strip(recs[i])
    rec["row"] = {**rec["row"], "test_loss": rec["row"]["test_loss"] * 1.5}
    return rec


@pytest.mark.parametrize("how", ["first", "middle", "all", "appended"])
def test_a_record_stripped_of_its_value_digest_is_never_read(reference, tmp_path, how):
    """A record edited and stripped of its value digest (so that it looks like one of 0.2.0)
    in a log whose manifest recorded its content: skipped with the warning, its cell rerun,
    never read on a later resume either (every record ilnrun appends carries a digest)."""
    cfg_path, ref = reference
    out = _copy(reference, tmp_path)
    recs = _records(out)
    if how == "appended":  # a later record of a cell replaces an earlier one
        recs.append(_stripped_and_changed(recs, 2))
    elif how == "all":
        recs = [_stripped_and_changed(recs, 2) if i == 2 else _strip(r) for i, r in enumerate(recs)]
    else:
        i = 0 if how == "first" else 2
        recs[i] = _stripped_and_changed(recs, i)
    _write_records(out, recs)
    text = _ok(_run(cfg_path, out))
    if how != "appended":  # (an appended edit is not counted: its cell keeps a record)
        assert "values changed" in text, text
        assert "values_sha256 is missing" in text and "does not match" not in text, text
    for _ in range(2):
        pd.testing.assert_frame_equal(_tables(out), _tables(ref))
        _ok(_run(cfg_path, out))


# ---- --fresh deletes only what ilnrun wrote ----------------------------------------------------


def _manifest(d: Path) -> dict:
    return json.loads((d / R.MANIFEST).read_text())


def test_the_manifest_records_the_digest_of_every_file_written(reference):
    _, ref = reference
    doc = _manifest(ref)
    assert doc["ilnrun"] == 2 and set(doc["written"]) == set(doc["files"])
    for name, entry in doc["written"].items():
        assert R.content_entry((ref / name).read_bytes()) == entry, name


def test_fresh_leaves_files_a_forged_manifest_lists(reference, tmp_path):
    """A manifest listing files ilnrun did not write — with no digest, a wrong one, or a
    report edited since ilnrun wrote it — makes --fresh leave them, named in a note."""
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    (out / "thesis.tex").write_text("mine\n")
    (out / "notes.txt").write_text("mine too\n")
    (out / "REPORT.md").write_text("written by ilnrun\n")
    R.record_output(out / "REPORT.md")
    (out / "REPORT.md").write_text("written by ilnrun, then edited by me\n")
    doc = _manifest(out)
    doc["files"] += ["thesis.tex", "notes.txt"]
    doc["written"]["thesis.tex"] = R.content_entry(b"something else\n")
    (out / R.MANIFEST).write_text(json.dumps(doc))
    text = _ok(_run(cfg_path, out, "--fresh"))
    assert "--fresh left 3 file(s)" in text
    for name in ("thesis.tex", "notes.txt", "REPORT.md"):
        assert name in text and (out / name).exists(), name
    assert (out / "REPORT.md").read_text().endswith("edited by me\n")
    assert not {"thesis.tex", "notes.txt", "REPORT.md"} & set(_manifest(out)["files"])
    assert read_meta(out)["cells_resumed"] == 0


def test_fresh_under_a_manifest_without_digests_deletes_only_names_ilnrun_writes(
    reference, tmp_path
):
    """A manifest of ilnrun 0.2.0 lists names only: --fresh deletes those ilnrun writes (the
    tables, the log, config.yaml, meta.json, figures, REPORT.md) and leaves any other."""
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    (out / "figure1.png").write_bytes(b"a figure")
    (out / "thesis.tex").write_text("mine\n")
    names = [*_manifest(out)["files"], "figure1.png", "thesis.tex"]
    (out / R.MANIFEST).write_text(json.dumps({"ilnrun": 1, "files": names}))
    text = _ok(_run(cfg_path, out, "--fresh"))
    assert "thesis.tex" in text and (out / "thesis.tex").read_text() == "mine\n"
    assert not (out / "figure1.png").exists()
    assert read_meta(out)["cells_resumed"] == 0


def test_fresh_refuses_a_cell_log_changed_since_ilnrun_wrote_it(reference, tmp_path):
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    log = out / R.CELL_LOG
    log.write_bytes(log.read_bytes().replace(b'"repetition": 0', b'"repetition": 1', 1))
    before = sorted(p.name for p in out.iterdir())
    refused(_run(cfg_path, out, "--fresh"), str(log), "delete it yourself")
    assert sorted(p.name for p in out.iterdir()) == before


def test_fresh_deletes_a_cell_log_that_grew_since_the_manifest(reference, tmp_path):
    """An interrupted run appended records after the manifest's digest of the log: they are
    ilnrun's (their value digests verify), so --fresh deletes the log."""
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    extra = {**_records(out)[0]}
    extra["id"] = extra["row"]["cell_id"] = "an-appended-cell"
    R.CellLog(out).append(extra)
    _ok(_run(cfg_path, out, "--fresh"))
    assert "an-appended-cell" not in (out / R.CELL_LOG).read_text()
    assert read_meta(out)["cells_resumed"] == 0


# ---- --out '' --------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", " ", "\t  "])
@pytest.mark.parametrize("command", ["run", "report"])
def test_an_empty_out_is_refused(reference, tmp_path, monkeypatch, command, blank):
    """An empty or blank --out (a shell variable left unset) names no directory: refused, not
    read as the default, the current directory or a directory named by spaces."""
    cfg_path, ref = reference
    monkeypatch.chdir(tmp_path)
    target = cfg_path if command == "run" else ref
    refused(invoke([command, target, "--out", blank]), "--out")
    assert list(tmp_path.iterdir()) == []


def test_an_out_name_too_long_is_refused_naming_it(reference, tmp_path, monkeypatch):
    """A directory name longer than the file system allows: exit status 2 naming the path (it
    was exit status 1, "cannot write the results", from the check that the path exists)."""
    monkeypatch.chdir(tmp_path)
    refused(invoke(["run", reference[0], "--out", "x" * 300, "-q"]), "x" * 20, "too long")
    assert list(tmp_path.iterdir()) == []
