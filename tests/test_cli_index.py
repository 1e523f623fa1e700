"""``ilnrun index``: experiments/README.md from the reports' headlines."""

from __future__ import annotations

import shutil

from conftest import invoke


def test_index_lists_every_report_with_commands_and_headline(finished_run, tmp_path):
    _, out, result = finished_run
    assert result.exit_code == 0
    experiments = tmp_path / "experiments"
    for name in ("first", "second"):
        copy = tmp_path / f"results_{name}"
        shutil.copytree(out, copy)
        assert invoke(["report", copy, "--out", experiments / name]).exit_code == 0
    res = invoke(["index", experiments])
    assert res.exit_code == 0, res.output
    text = (experiments / "README.md").read_text()
    assert "(first/REPORT.md)" in text and "(second/REPORT.md)" in text
    assert text.count("ilnrun run ") == 2  # each report's regenerating commands
    headline = (experiments / "first" / "REPORT.md").read_text().split("## Headline")[1]
    first_claim = next(line for line in headline.splitlines() if line.startswith("- "))
    assert first_claim in text


def test_index_of_a_missing_folder_exit_2(tmp_path):
    res = invoke(["index", tmp_path / "nope"])
    assert res.exit_code == 2 and "Traceback" not in res.output
