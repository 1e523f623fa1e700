"""``--set KEY=VALUE`` overrides (``ilnrun.overrides``) and their use by ``run`` / ``validate``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from conftest import tiny_config, write_config

from ilnrun import config as C
from ilnrun.cli import main
from ilnrun.overrides import OverrideError, apply_overrides, load_config, parse_override


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("dataset.T=40", ["dataset", "T"], 40),
        ("methods.fixed_random.eta=[0.1, 0.3]", ["methods", "fixed_random", "eta"], [0.1, 0.3]),
        ("feature_map.sigma=median", ["feature_map", "sigma"], "median"),
        ("limits.cell_timeout_s=null", ["limits", "cell_timeout_s"], None),
        ("description=a=b", ["description"], "a=b"),  # only the first '=' splits
        (" seed = 3", ["seed"], 3),
    ],
)
def test_parse_override_yaml_values(text, path, value):
    assert parse_override(text) == (path, value)


def test_apply_creates_mappings_later_wins_and_leaves_input_alone():
    raw = {"dataset": {"kind": "clipped_gaussian", "T": 30}, "limits": None}
    out = apply_overrides(
        raw,
        ["dataset.T=40", "evaluation.m_test=10", "limits.cell_timeout_s=5", "dataset.T=50"],
    )
    assert out["dataset"] == {"kind": "clipped_gaussian", "T": 50}
    assert out["evaluation"] == {"m_test": 10}
    assert out["limits"] == {"cell_timeout_s": 5}
    assert raw == {"dataset": {"kind": "clipped_gaussian", "T": 30}, "limits": None}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dataset.T", "expected KEY=VALUE"),
        ("=3", "empty key"),
        ("dataset..T=3", "empty component"),
        ("dataset.T.x=3", "dataset.T is int 30, not a mapping"),
        ("dataset.T=[1, 2", "not valid YAML"),
    ],
)
def test_malformed_override_names_it(text, message):
    with pytest.raises(OverrideError, match=message) as exc:
        apply_overrides(tiny_config(), [text])
    assert repr(text) in str(exc.value)


def test_unknown_key_gets_the_files_close_match_hint():
    with pytest.raises(C.ConfigError) as exc:
        load_config(tiny_config(), ["dataset.TT=40", "methods.fixed_random.etaa=0.1"])
    problems = dict(exc.value.problems)
    assert "did you mean 'T'?" in problems["dataset.TT"]
    assert "did you mean 'eta'?" in problems["methods.fixed_random.etaa"]
    with pytest.raises(C.ConfigError, match="must be > 0"):
        load_config(tiny_config(), ["methods.kernel_ogd.eta=-1"])


def _invoke(args: list) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_validate_with_overrides(config_file: Path):
    res = _invoke(["validate", config_file, "--set", "dataset.D=40", "--set", "repetitions=1"])
    assert res.exit_code == 0, res.output
    resolved = yaml.safe_load(res.output.split("# ")[0])
    assert resolved["dataset"]["D"] == 40 and resolved["repetitions"] == 1
    assert "# cells: 8" in res.output  # 1 D x 1 repetition x 4 learners x 2 etas
    bad = _invoke(["validate", config_file, "--set", "dataset.D"])
    assert bad.exit_code == 2 and "--set 'dataset.D'" in bad.output
    unknown = _invoke(["validate", config_file, "--set", "dataset.TT=40"])
    assert unknown.exit_code == 2 and "dataset.TT: unknown key 'TT'; did you mean 'T'?" in (
        unknown.output
    )


def test_run_with_overrides_equals_the_edited_file(tmp_path: Path):
    """``run tiny.yaml --set dataset.T=40 --set methods.fixed_random.eta=[0.1,0.3]`` gives the
    runs of the equivalently edited file, and its config.yaml records the overridden values."""
    base = tiny_config(repetitions=1, **{"dataset.D": 20})
    path = write_config(tmp_path / "tiny.yaml", base)
    sets = ["--set", "dataset.T=40", "--set", "methods.fixed_random.eta=[0.1,0.3]"]
    res = _invoke(["run", path, "--out", tmp_path / "a", "-q", *sets])
    assert res.exit_code == 0, res.output
    edited = tiny_config(repetitions=1, **{"dataset.D": 20, "dataset.T": 40})
    edited["methods"]["fixed_random"]["eta"] = [0.1, 0.3]
    (tmp_path / "edited").mkdir()
    path2 = write_config(tmp_path / "edited" / "tiny.yaml", edited)
    res = _invoke(["run", path2, "--out", tmp_path / "b", "-q"])
    assert res.exit_code == 0, res.output
    drop = ["wall_s", "eval_s"]
    a = pd.read_csv(tmp_path / "a" / "runs.csv").drop(columns=drop)
    b = pd.read_csv(tmp_path / "b" / "runs.csv").drop(columns=drop)
    pd.testing.assert_frame_equal(a, b)
    assert set(a["T"]) == {40} and set(a.loc[a.method == "fixed_random", "eta"]) == {0.1, 0.3}
    assert (tmp_path / "a" / "config.yaml").read_text() == (
        tmp_path / "b" / "config.yaml"
    ).read_text()
    bad = _invoke(["run", path, "--out", tmp_path / "c", "--set", "dataset.T.x=1"])
    assert bad.exit_code == 2 and "dataset.T is int 30, not a mapping" in bad.output
    assert not (tmp_path / "c").exists()
