"""The ``random_net`` feature map, which has no closed-form kernel: its kernel is what the learners'
features estimate, ``kernel_estimate`` agrees with every closed form, the compiled Doubly SGD and
Fixed-Random passes give its numpy numbers bit for bit (Shrinking Gradient's passes and test
estimates are among tests/test_compiled.py's cases), and the pipeline runs it end to end while
refusing what needs a closed-form kernel."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import invoke, refused
from scipy.stats import norm

from ilnrun import config as C
from ilnrun import cost
from ilnrun.datasets.kind_teacher import teacher
from ilnrun.features import FEATURE_MAPS, Coordinate, Fourier, RandomNet, ReLU
from ilnrun.learners import doubly_sgd as dsgd
from ilnrun.learners import fixed_random as fr
from ilnrun.learners import random_feature_kernels as rfk
from ilnrun.learners import shrinking_gradient_kernels as sgk

sys.path.insert(0, str(Path(__file__).resolve().parent))
import random_feature_cases as rf_cases  # noqa: E402

ALPHA = 1e-3  # family-wise false-alarm rate of each statistical test (Bonferroni over entries)


def _points(seed: int, n: int, d: int) -> np.ndarray:
    """Inputs of varied norms and angles (an obtuse pair and a repeated direction included)."""
    X = np.random.default_rng(seed).standard_normal((n, d)) * 0.8
    X[-1] = -0.6 * X[0] + 0.3 * X[1]
    return X


def _z_bound(entries: int) -> float:
    """Two-sided Bonferroni bound: ``|z| <= this`` for every one of ``entries`` z-scores with
    probability at least ``1 - ALPHA`` under the null."""
    return float(norm.ppf(1.0 - ALPHA / (2 * entries)))


def _upper(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The entries of a symmetric ``n x n`` kernel tested once each (diagonal included)."""
    return np.triu_indices(n)


def test_the_map_declares_no_kernel_and_its_sizes():
    fmap = RandomNet(3, h=5)
    assert not fmap.has_kernel and FEATURE_MAPS["random_net"] is RandomNet
    W = fmap.sample(np.random.default_rng(0), 4)
    assert W.shape == (4, 5 * 3 + 5) == (4, RandomNet.param_floats(3, {"h": 5}))
    assert RandomNet.param_floats(3) == 16 * 3 + 16  # the default h
    with pytest.raises(NotImplementedError, match="no closed-form kernel"):
        fmap.kernel(W[:1, :3], W[:1, :3])
    # psi(x; W, v) = 2 relu(v . relu(W x) / sqrt(h)), W row-major then v
    x = np.array([0.3, -1.2, 0.7])
    Wm, v = W[1, :15].reshape(5, 3), W[1, 15:]
    want = 2.0 * max(0.0, float(v @ np.maximum(Wm @ x, 0.0)) / np.sqrt(5))
    assert fmap.point(x, W)[1] == pytest.approx(want, rel=1e-13, abs=1e-15)


def test_features_empirical_kernel_matches_a_million_sample_monte_carlo():
    """The kernel the learners see, ``Psi Psi^T / r`` from ``r = 10^4`` draws of the map's own
    ``sample`` and ``matrix``, against an independent ``10^6``-draw ``kernel_estimate``: every
    entry's z-score (difference over the root of both squared standard errors) within the
    Bonferroni bound; and the test has teeth: the bound is under 20% of the kernel's scale
    (``psi^2`` is heavy-tailed: ``r = 10^4`` draws give about 3.5% standard error), so a kernel
    25% off fails it."""
    d, h, r = 3, 4, 10_000
    fmap = RandomNet(d, h)
    X = _points(1, 5, d)
    Psi = fmap.matrix(X, fmap.sample(np.random.default_rng(2), r))
    K_emp = Psi @ Psi.T / r
    prods = Psi[:, None, :] * Psi[None, :, :]
    se_emp = prods.std(axis=2, ddof=1) / np.sqrt(r)
    K_mc, se_mc = fmap.kernel_estimate(X, X, 1_000_000, np.random.default_rng(3))
    iu = _upper(len(X))
    se = np.sqrt(se_emp**2 + se_mc**2)[iu]
    z = (K_emp - K_mc)[iu] / se
    bound = _z_bound(len(z))
    assert np.all(np.abs(z) <= bound), (z, bound)
    scale = np.sqrt(np.outer(np.diag(K_mc), np.diag(K_mc)))[iu]
    assert np.all(bound * se < 0.2 * scale)
    assert np.all(np.abs((1.25 * K_emp - K_mc)[iu] / se) > bound)  # a wrong kernel is caught


def test_random_net_kernel_on_the_diagonal_is_the_squared_norm():
    """``k(x, x) = E psi(x; w)^2 = |x|^2`` for every ``h`` (the map's scale): the ``10^6``-draw
    estimate of the diagonal is within its Bonferroni interval of ``|x|^2``."""
    X = _points(4, 4, 3)
    for h in (1, 4):
        K, se = RandomNet(3, h).kernel_estimate(X, X, 1_000_000, np.random.default_rng(5))
        z = (np.diag(K) - np.sum(X**2, axis=1)) / np.diag(se)
        assert np.all(np.abs(z) <= _z_bound(2 * len(X))), (h, z)


@pytest.mark.parametrize("fmap", [Coordinate(4), ReLU(4), Fourier(4, 1.3)], ids=lambda f: f.name)
def test_kernel_estimate_matches_every_closed_form(fmap):
    """``kernel_estimate`` of a map with a kernel: every entry within its Bonferroni interval of
    the closed form, and the interval is narrow (the check has power)."""
    X = _points(6, 5, 4)
    K, se = fmap.kernel_estimate(X, X[:3], 200_000, np.random.default_rng(7))
    exact = fmap.kernel(X, X[:3])
    moving = se > 0  # coordinate products of a zero input have no variance
    z = (K - exact)[moving] / se[moving]
    assert np.all(np.abs(z) <= _z_bound(K.size)), z
    np.testing.assert_allclose(K[~moving], exact[~moving], atol=1e-15)
    scale = np.sqrt(np.outer(np.diag(fmap.kernel(X, X)), np.diag(fmap.kernel(X[:3], X[:3]))))
    assert np.all(se < 0.02 * scale + 1e-12)


def test_kernel_estimate_is_blockwise_and_deterministic(monkeypatch):
    """The blocks do not change the draws' sum beyond rounding, the same generator gives the same
    estimate, and ``n < 2`` (no standard error) is refused."""
    fmap = RandomNet(3, 2)
    X = _points(8, 3, 3)
    a = fmap.kernel_estimate(X, X, 5000, np.random.default_rng(1))
    b = fmap.kernel_estimate(X, X, 5000, np.random.default_rng(1))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    W = fmap.sample(np.random.default_rng(1), 5000)  # one block: the same draws
    P = fmap.matrix(X, W)
    np.testing.assert_allclose(a[0], P @ P.T / 5000, rtol=1e-12)
    with pytest.raises(ValueError, match="n >= 2"):
        fmap.kernel_estimate(X, X, 1, np.random.default_rng(0))


# ----------------------------------------------------------------------------------------------
# compiled passes


needs_numba = pytest.mark.skipif(not sgk.available(), reason="numba is not available")
RF_CASES = [
    (name, "random_net", shape) for name, shapes in rf_cases.LEARNERS.items() for shape in shapes
]


@needs_numba
def test_the_kernels_know_the_map_and_trust_it():
    fmap = RandomNet(5, 3)
    assert sgk.kind_of(fmap) == sgk.RANDOM_NET and sgk.map_param(fmap) == 3.0
    assert sgk.use_compiled(fmap) and sgk.estimates_compiled(fmap) and rfk.use_compiled(fmap)
    assert sgk.kind_of(RandomNet(5, sgk.MAX_D + 1)) is None  # h summed in einsum's pieces


@needs_numba
@pytest.mark.parametrize("case", RF_CASES, ids=lambda c: rf_cases.case_id(*c))
def test_compiled_random_feature_passes_match_numpy(case):
    """Doubly SGD and Fixed-Random on random_net, every golden shape of the other maps (decay,
    rescale, divergence, deadline): compiled == numpy bit for bit (stored parameters, the
    coefficients, the predictions, the counters)."""
    compiled = rf_cases.run_case(*case, path="compiled")
    numpy = rf_cases.run_case(*case, path="numpy")
    for key in numpy:
        np.testing.assert_array_equal(compiled[key], numpy[key], err_msg=key, strict=True)


@needs_numba
@pytest.mark.parametrize("h", [1, 9])
def test_compiled_random_feature_passes_match_numpy_at_other_widths(h):
    """A single hidden unit (one-row products: ``ddot``) and a width with a block of eight and a
    rest in the output sum."""
    X, y, _ = rf_cases.data(60, 5)
    fmap = RandomNet(5, h)
    for k in (1, 3):
        kw = dict(eta=0.3, k=k, nu=0.01, schedule="inv_sqrt")
        a = dsgd.fit_compiled(X, y, fmap, np.random.default_rng(2), **kw)
        b = dsgd.fit_numpy(X, y, fmap, np.random.default_rng(2), **kw)
        np.testing.assert_array_equal(a.losses, b.losses, strict=True)
        np.testing.assert_array_equal(a.predictor.W, b.predictor.W, strict=True)
        np.testing.assert_array_equal(a.predictor.coef, b.predictor.coef, strict=True)
    for r in (1, 40):
        a = fr.fit_compiled(X, y, fmap, np.random.default_rng(2), eta=0.3, r=r, lam=0.01)
        b = fr.fit_numpy(X, y, fmap, np.random.default_rng(2), eta=0.3, r=r, lam=0.01)
        np.testing.assert_array_equal(a.losses, b.losses, strict=True)
        np.testing.assert_array_equal(a.predictor.coef, b.predictor.coef, strict=True)


# ----------------------------------------------------------------------------------------------
# the pipeline

CONFIG = {
    "name": "random_net_tiny",
    "repetitions": 2,
    "dataset": {
        "kind": "teacher",
        "D": 4,
        "T": 40,
        "n_val": 15,
        "n_test": 20,
        "sparsity": 3,
        "kernel_samples": 2000,
    },
    "feature_map": {"kind": "random_net", "h": 5},
    "budget": {"dsgd_k": 2},
    "evaluation": {"m_test": 30, "curve_points": 5},
    "methods": {
        "shrinking_gradient": {"eta": 0.05},
        "doubly_sgd": {"eta": 0.3},
        "fixed_random": {"eta": 0.3},
    },
}


def _write(tmp_path: Path, **changes) -> Path:
    cfg = yaml.safe_load(yaml.safe_dump(CONFIG))
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = cfg
        for p in parents:
            node = node[p]
        node[last] = value
    out = tmp_path / "cfg.yaml"
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


def test_run_and_report_end_to_end(tmp_path):
    """SG, Doubly SGD and Fixed-Random on a teacher labelled by a Monte-Carlo kernel: every row
    finite, no closed-form kernel value computed, SG evaluated by Algorithm 2, and a report."""
    out = tmp_path / "out"
    res = invoke(["run", _write(tmp_path), "--out", out, "--jobs", "1"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 6 and set(runs["method"]) == set(CONFIG["methods"])
    assert (runs["kernel_evals"] == 0).all()
    sg = runs[runs["method"] == "shrinking_gradient"]
    assert (sg["eval_mode"] == "estimated").all() and (sg["test_evals"] == 2 * 30).all()
    for col in ("online_loss", "train_evals"):
        assert np.isfinite(runs[col]).all(), col
    res = invoke(["report", out])
    assert res.exit_code == 0, res.output
    text = (out / "REPORT.md").read_text()
    assert "random_net" in text and "no closed form" in text and "kernel_samples" in text


@pytest.mark.parametrize(
    "change, words",
    [
        ({"methods.kernel_ogd": {"eta": 0.3}}, ("methods.kernel_ogd", "random_net")),
        ({"methods.kernel_ridge": {}}, ("methods.kernel_ridge", "closed-form kernel")),
        ({"evaluation.regret_B": 1.0}, ("evaluation.regret_B", "random_net")),
    ],
    ids=["kernel_ogd", "kernel_ridge", "regret_B"],
)
def test_what_needs_a_closed_form_kernel_is_refused_by_name(tmp_path, change, words):
    path = _write(tmp_path, **change)
    refused(invoke(["run", path, "--out", tmp_path / "out"]), *words)
    assert not (tmp_path / "out").exists()


def test_the_jax_engine_is_refused_naming_the_map(tmp_path):
    res = invoke(["run", _write(tmp_path), "--out", tmp_path / "out", "--engine", "jax"])
    refused(res, "feature_map.kind", "'random_net' has no jax twin")


def test_teacher_records_its_monte_carlo_kernel_and_keeps_existing_keys():
    """The teacher's labels by a Monte-Carlo kernel (their stated error recorded); with a map that
    has a kernel ``kernel_samples`` is unused and, at its default, in no cell key."""
    kw = dict(D=3, T=30, n_val=5, n_test=5, sparsity=2, inputs="sphere", noise=0.0)
    d = teacher(
        np.random.default_rng(0), **kw, kernel_samples=3000, feature_map={"kind": "random_net"}
    )
    info = d.info
    assert info["kernel"] == "monte_carlo" and info["kernel_samples"] == 3000
    assert 0 < info["target_stderr_bound_rms"] <= info["target_stderr_bound_max"] < 0.5
    exact = teacher(
        np.random.default_rng(0), **kw, kernel_samples=3000, feature_map={"kind": "relu"}
    )
    again = teacher(np.random.default_rng(0), **kw, kernel_samples=7, feature_map={"kind": "relu"})
    np.testing.assert_array_equal(exact.y_test, again.y_test)
    assert exact.info["kernel"] == "closed_form"
    raw = {"name": "k", "dataset": {"kind": "teacher", "D": 3, "T": 10}, "methods": {}}
    raw["methods"] = {"shrinking_gradient": {"eta": 0.1}}
    plain = C.cells(C.resolve(raw))
    raw["dataset"]["kernel_samples"] = 100_000
    assert [c.id for c in C.cells(C.resolve(raw))] == [c.id for c in plain]
    assert "kernel_samples" not in plain[0].data_key["data"]


def test_validate_estimates_scale_with_the_hidden_width(tmp_path):
    """``ilnrun validate``'s memory and time estimates read ``h``: a wider hidden layer costs
    more per evaluation (``param_floats = h D + h``) and in the teacher's Monte-Carlo kernel."""
    small = C.resolve(yaml.safe_load(_write(tmp_path).read_text()))
    wide = C.resolve(yaml.safe_load(_write(tmp_path, **{"feature_map.h": 64}).read_text()))
    work_s, work_w = cost.Workload.of(small), cost.Workload.of(wide)
    est_s, est_w = cost.estimates(work_s), cost.estimates(work_w)
    assert all(w.seconds > s.seconds for s, w in zip(est_s, est_w, strict=True))
    (data,) = work_s.data
    assert (
        cost.instance_seconds(work_w.feature_map, data, False, 0)
        > cost.instance_seconds(work_s.feature_map, data, False, 0)
        > 0
    )
    res = invoke(["validate", _write(tmp_path)])
    assert res.exit_code == 0, res.output
