"""The compiled Doubly SGD and Fixed-Random passes give the numpy code's numbers bit for bit.

Every learner x feature map x shape of ``tests/random_feature_cases.py`` (schedules, k or r,
the decay's global scale and its rescale, a non-positive decay factor, the dai preset, a
divergent pass, a deadline already past): the compiled and the numpy path against each other
and both against golden values written by the numpy code before the compiled passes existed (within
``golden_values.RTOL``: another CPU's BLAS kernel sums in another order);
the numpy path where numba is absent or switched off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ilnrun.features import Coordinate, Fourier, ReLU
from ilnrun.learners import base
from ilnrun.learners import doubly_sgd as dsgd
from ilnrun.learners import fixed_random as fr
from ilnrun.learners import random_feature_kernels as kernels
from ilnrun.learners import shrinking_gradient_kernels as sgk

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_values as gv  # noqa: E402
import random_feature_cases as cases  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = gv.golden("random_features_numpy")
CASES = cases.cases()
IDS = [cases.case_id(*c) for c in CASES]
needs_numba = pytest.mark.skipif(not sgk.available(), reason="numba is not available")


def test_cases_cover_every_stopping_rule_and_the_decay():
    """The golden cases are what they claim: passes that diverge, time out and run to the end,
    for both learners and every map (checked on the numpy path)."""
    seen = set()
    for case in CASES:
        out = cases.run_case(*case, path="numpy")
        diverged, timed_out = bool(out["flags"][0]), bool(out["flags"][1])
        seen.add(
            (case[0], case[1], "diverged" if diverged else "timed_out" if timed_out else "ran")
        )
    assert seen == {
        (name, kind, how)
        for name in cases.LEARNERS
        for kind in cases.MAPS
        for how in ("diverged", "timed_out", "ran")
    }


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_numpy_path_matches_golden(case):
    gv.assert_matches(cases.run_case(*case, path="numpy"), GOLDEN[cases.case_id(*case)])


@needs_numba
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compiled_path_matches_numpy_and_golden(case):
    compiled = cases.run_case(*case, path="compiled")
    numpy = cases.run_case(*case, path="numpy")
    assert compiled.keys() == numpy.keys()
    for key in numpy:
        np.testing.assert_array_equal(compiled[key], numpy[key], err_msg=key, strict=True)
    gv.assert_matches(compiled, GOLDEN[cases.case_id(*case)])


@needs_numba
@pytest.mark.parametrize("kind", cases.MAPS)
def test_fit_chooses_the_compiled_path(kind, monkeypatch):
    assert kernels.use_compiled(cases.make_map(kind, 4))
    # beyond sgk.MAX_D the maps are not the kernels' (as for Shrinking Gradient): numpy code
    assert kernels.use_compiled(cases.make_map(kind, sgk.MAX_D + 1)) == (kind == "coordinate")
    called = []
    monkeypatch.setattr(dsgd, "fit_compiled", lambda *a, **kw: called.append("dsgd"))
    monkeypatch.setattr(fr, "fit_compiled", lambda *a, **kw: called.append("fr"))
    X, y, _ = cases.data(5, 4)
    dsgd.fit(X, y, cases.make_map(kind, 4), np.random.default_rng(0), eta=0.1, k=2)
    fr.fit(X, y, cases.make_map(kind, 4), np.random.default_rng(0), eta=0.1, r=2)
    assert called == ["dsgd", "fr"]


@needs_numba
@pytest.mark.parametrize("fmap", [Coordinate(9), ReLU(9), Fourier(9, 0.8)], ids=str)
def test_long_passes_agree(fmap):
    """Passes long enough for every BLAS kernel path (gemv over thousands of rows, ddot over
    thousands of coefficients), with the decay: compiled == numpy."""
    X, y, _ = cases.data(400, 9)
    kw = dict(eta=0.3, schedule="inv_sqrt")
    for k in (1, 7):
        a = dsgd.fit_compiled(X, y, fmap, np.random.default_rng(2), k=k, nu=0.01, **kw)
        b = dsgd.fit_numpy(X, y, fmap, np.random.default_rng(2), k=k, nu=0.01, **kw)
        np.testing.assert_array_equal(a.losses, b.losses, strict=True)
        np.testing.assert_array_equal(a.predictor.coef, b.predictor.coef, strict=True)
        np.testing.assert_array_equal(a.predictor.W, b.predictor.W, strict=True)
        assert a.counters == b.counters
    a = fr.fit_compiled(X, y, fmap, np.random.default_rng(2), r=3001, lam=0.01, **kw)
    b = fr.fit_numpy(X, y, fmap, np.random.default_rng(2), r=3001, lam=0.01, **kw)
    np.testing.assert_array_equal(a.losses, b.losses, strict=True)
    np.testing.assert_array_equal(a.predictor.coef, b.predictor.coef, strict=True)


@needs_numba
@pytest.mark.parametrize("module", [dsgd, fr], ids=["doubly_sgd", "fixed_random"])
def test_compiled_pass_honours_the_deadline(module, monkeypatch):
    """A deadline already past stops the compiled pass after round 1, as the numpy pass; a
    later one is looked at between calls of rounds (their size changes no number)."""
    X, y, _ = cases.data(50, 5)
    size = {"k": 3} if module is dsgd else {"r": 7}
    res = module.fit(X, y, Coordinate(5), np.random.default_rng(0), eta=0.3, deadline=0.0, **size)
    assert res.timed_out and len(res.losses) == 1
    assert len(res.predictor.W) == (3 if module is dsgd else 7)
    monkeypatch.setattr(base, "COMPILED_WORK_PER_CALL", 20)
    res = module.fit(X, y, Coordinate(5), np.random.default_rng(0), eta=0.3, deadline=1e300, **size)
    ref = module.fit_numpy(X, y, Coordinate(5), np.random.default_rng(0), eta=0.3, **size)
    assert not res.timed_out and len(res.losses) == 50
    np.testing.assert_array_equal(res.losses, ref.losses, strict=True)
    np.testing.assert_array_equal(res.predictor.coef, ref.predictor.coef, strict=True)


def test_constants_agree():
    assert kernels.DIVERGENCE_BOUND == base.DIVERGENCE_BOUND


def test_disagreeing_build_runs_numpy(monkeypatch, capsys):
    """A numpy build whose numbers the compiled passes do not reproduce runs the numpy code,
    with a note."""
    monkeypatch.setattr(kernels, "_AGREES", {})
    monkeypatch.setattr(sgk, "_NOTED", set())
    monkeypatch.setattr(kernels, "PROBES", [lambda kind: False])
    if sgk.available():
        assert not kernels.use_compiled(Coordinate(3))
        assert "numpy code runs instead" in capsys.readouterr().err
    case = CASES[1]
    gv.assert_matches(cases.run_case(*case), GOLDEN[cases.case_id(*case)])


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", **env},
        check=False,
    )


FALLBACK = """
import random_feature_cases as c, compiled_cases as sgc, golden_values as g
from ilnrun.learners import random_feature_kernels as k, shrinking_gradient_kernels as sgk
gold = g.golden("random_features_numpy")
picked = [x for x in c.cases() if x[2][0] in ("k3-nu", "r1")]
ok = [not g.beyond(c.run_case(*x), gold[c.case_id(*x)]) for x in picked]
sgold = g.golden("sg_numpy")["coordinate-iid-small"]
case = [x for x in sgc.cases() if sgc.case_id(*x) == "coordinate-iid-small"][0]
ok.append(not g.beyond(sgc.run_case(*case), sgold))
print(sgk.available(), all(ok), len(ok))
"""


def test_switched_off_runs_numpy_quietly():
    """``ILNRUN_NO_NUMBA=1``: the numpy path, the golden numbers, no note."""
    proc = _run(FALLBACK, {"ILNRUN_NO_NUMBA": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "7"]
    assert "note:" not in proc.stderr


def test_without_numba_runs_numpy_with_one_note():
    """numba not importable: every learner (Doubly SGD, Fixed-Random and Shrinking Gradient in
    one process) runs its numpy code, the golden numbers, and one note in all."""
    hide = "import sys; sys.modules['numba'] = None\n"
    proc = _run(hide + FALLBACK, {"ILNRUN_NO_NUMBA": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "7"]
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "numba is not available" in notes[0]


def test_a_run_without_numba_notes_it_once(tmp_path):
    """`ilnrun run --jobs 2` where numba cannot be imported: one note for the whole run, not
    one per worker process."""
    from tests.conftest import tiny_config, write_config

    hidden = tmp_path / "hidden" / "numba"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("hidden")\n')
    cfg = tiny_config(**{"dataset.D": [20], "repetitions": 2})
    path = write_config(tmp_path / "c.yaml", cfg)
    res = subprocess.run(
        [sys.executable, "-m", "ilnrun.cli", "run", str(path), "--out", str(tmp_path / "o")]
        + ["--jobs", "2", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        # (numba hidden, not switched off: a switched-off numba is silent)
        env={**os.environ, "PYTHONPATH": f"{hidden.parent}:{ROOT}", "ILNRUN_NO_NUMBA": ""},
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("numba is not available") == 1, res.stderr
