"""``ilnrun validate``: the resolved config, derived budgets, cell count and estimates; every
problem of a config reported with its key path, exit 2."""

from __future__ import annotations

from conftest import TINY_CELLS, invoke, tiny_config, write_config

_invoke = invoke


def test_validate_prints_cell_count(config_file):
    res = _invoke(["validate", config_file])
    assert res.exit_code == 0, res.output
    assert f"# cells: {TINY_CELLS}" in res.stdout
    assert "shrinking_gradient" in res.stdout
    b = 4 * 30 * 31 // 2
    assert f"target {b:,}" in res.stdout


def test_bad_config_exit_2_names_key_path(tmp_path):
    bad = tiny_config(**{"methods.shrinking_gradient.eta": [0.3, -0.1]})
    path = write_config(tmp_path / "bad.yaml", bad)
    for command in ("run", "validate"):
        args = [command, path] + (["--out", tmp_path / "r"] if command == "run" else [])
        res = _invoke(args)
        assert res.exit_code == 2, res.output
        assert "methods.shrinking_gradient.eta[1]" in res.output
        assert "-0.1" in res.output
        assert "Traceback" not in res.output
    assert not (tmp_path / "r").exists()  # nothing ran


def test_several_config_problems_reported_together(tmp_path):
    bad = tiny_config(
        **{
            "methods.doubly_sgd.nu": -1.0,
            "dataset.T": 1,
            "methods.fixed_random.schedule": "constnt",
        }
    )
    res = _invoke(["validate", write_config(tmp_path / "bad.yaml", bad)])
    assert res.exit_code == 2
    for path in ("methods.doubly_sgd.nu", "dataset.T", "methods.fixed_random.schedule"):
        assert path in res.output
    assert "Traceback" not in res.output


def test_missing_config_file_exit_2(tmp_path):
    res = _invoke(["run", tmp_path / "nope.yaml", "--out", tmp_path / "r"])
    assert res.exit_code == 2, res.output
    assert "nope.yaml" in res.output and "Traceback" not in res.output
    res = _invoke(["validate", tmp_path / "nope.yaml"])
    assert res.exit_code == 2
