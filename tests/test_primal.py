"""The exact diagnostics in a feature map's finite primal equal the kernel-matrix ones
(docs/algorithms.md §1.6): the comparator, Shrinking Gradient's exact online predictions (with
shrinks), Kernel OGD's regret, exact test predictions; the compiled replays equal the numpy ones;
the kernel-matrix route is refused past its limit."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import make_data, tiny_config, write_config

from ilnrun import theory
from ilnrun.cli import main
from ilnrun.features import FEATURE_MAPS, Coordinate
from ilnrun.learners import LEARNERS, kernel_ogd, shrinking_gradient
from ilnrun.learners.base import KernelExpansion
from ilnrun.theory import (
    TrainKernel,
    best_in_ball_loss,
    best_in_ball_loss_primal,
    primal_predictions,
    sg_exact_online_predictions,
    sg_exact_online_predictions_primal,
)

RTOL = 1e-10  # two summation orders of the same O(T p) sums: rounding only


def _einsum_replay(K, alpha_new, shrinks_before):
    """The earlier O(T^2)-memory form of the exact replay: explicit T x T weights."""
    n = len(alpha_new)
    gap = shrinks_before[:, None] - shrinks_before[None, :]
    weights = np.where(np.tri(n, k=-1, dtype=bool), 0.25 ** np.maximum(gap, 0), 0.0)
    return np.einsum("ti,ti,i->t", K[:n, :n], weights, alpha_new)


def _sg_pass(d, D, B, seed=0, eta=3.0, m=5):
    return shrinking_gradient.fit(
        d.X_train, d.y_train, Coordinate(D), np.random.default_rng(seed), eta=eta, m=m, B=B
    )


def test_only_coordinate_has_a_primal():
    assert Coordinate.primal_dim(7) == 7
    X = np.arange(6.0).reshape(2, 3)
    Phi, c = Coordinate(3).primal(X)
    np.testing.assert_allclose(c * Phi @ Phi.T, Coordinate(3).kernel(X, X), rtol=1e-15)
    for name in ("relu", "fourier"):  # infinite-dimensional RKHS: no exact finite primal
        assert FEATURE_MAPS[name].primal_dim(3) is None


@pytest.mark.parametrize(
    ("T", "D", "B"),  # p < T (rank p) and p > T; on the sphere |f| = B, and inside (mu = 0)
    [(80, 20, 0.01), (80, 20, 0.2), (80, 20, 1.0), (80, 20, 1e3), (25, 40, 0.01), (25, 40, 0.5)],
)
def test_comparator_primal_equals_kernel(T, D, B):
    d = make_data(1, D=D, T=T)
    y = d.y_train + 0.1 * np.random.default_rng(0).standard_normal(T)  # off the span
    K = Coordinate(D).kernel(d.X_train, d.X_train)
    want = best_in_ball_loss(K, y, B)
    assert want > 1e-3  # a loss that the comparison can resolve
    assert best_in_ball_loss_primal(d.X_train, 1.0 / D, y, B) == pytest.approx(want, rel=RTOL)


def test_comparator_primal_with_the_target_in_the_span():
    """Noise-free labels of a linear target with p < T: the loss is 0 up to rounding."""
    d = make_data(1, D=20, T=80)
    K = Coordinate(20).kernel(d.X_train, d.X_train)
    scale = float(np.sum(d.y_train**2))
    got = best_in_ball_loss_primal(d.X_train, 1.0 / 20, d.y_train, 100.0)
    assert got == pytest.approx(best_in_ball_loss(K, d.y_train, 100.0), abs=1e-12 * scale)


@pytest.mark.parametrize(("B", "T"), [(0.05, 60), (0.02, 150), (1.0, 150)])
def test_sg_replay_primal_compiled_and_einsum_agree(B, T):
    D = 30
    d = make_data(2, D=D, T=T)
    res = _sg_pass(d, D, B)
    if B < 1:
        assert res.counters["shrinks"] > 3  # the replays must cover shrinks
    a, Ks = res.extras["alpha_new"], res.extras["shrinks_before"]
    K = Coordinate(D).kernel(d.X_train, d.X_train)
    want = _einsum_replay(K, a, Ks)
    scale = np.max(np.abs(want))
    for got in (
        sg_exact_online_predictions(K, a, Ks),
        sg_exact_online_predictions_primal(d.X_train, 1.0 / D, a, Ks),
    ):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale)
    for replay, args in (  # the numpy forms that run where numba cannot be imported
        (theory._replay_kernel_numpy, (K, a, Ks, np.zeros(len(a)))),
        (theory._replay_primal_numpy, (d.X_train, 1.0 / D, a, Ks, np.zeros(D))),
    ):
        out = np.zeros(len(a))
        replay(*args[:-1], out, args[-1])
        np.testing.assert_allclose(out, want, rtol=RTOL, atol=RTOL * scale)


def test_sg_replay_ends_at_the_final_predictor():
    """After the last round, the primal vector is the final predictor's sum alpha_i phi(x_i)."""
    D = 30
    d = make_data(3, D=D, T=70)
    res = _sg_pass(d, D, 0.05)
    # one more row: the replay's prediction for it uses every round of the pass
    X = np.vstack([d.X_train, d.X_test[:1]])
    a = np.append(res.extras["alpha_new"], 0.0)
    Ks = np.append(res.extras["shrinks_before"], res.counters["shrinks"])
    got = sg_exact_online_predictions_primal(X, 1.0 / D, a, Ks)[-1]
    want = (Coordinate(D).kernel(d.X_test[:1], d.X_train) @ res.predictor.alpha)[0]
    assert got == pytest.approx(want, rel=RTOL)


@pytest.mark.parametrize("name", ["shrinking_gradient", "kernel_ogd"])
def test_regret_through_train_kernel_primal_equals_matrix(name):
    D = 25
    d = make_data(4, D=D, T=90)
    fmap = Coordinate(D)
    if name == "kernel_ogd":
        res = kernel_ogd.fit(d.X_train, d.y_train, fmap, np.random.default_rng(0), eta=0.3)
    else:
        res = _sg_pass(d, D, 0.05)
    spec = LEARNERS[name]
    primal, matrix = TrainKernel(fmap, d.X_train), TrainKernel(fmap, d.X_train, use_primal=False)
    assert primal.primal is not None and matrix.primal is None
    for B in (0.1, 1.0):
        want = matrix.best_in_ball_loss(d.y_train, B)
        assert primal.best_in_ball_loss(d.y_train, B) == pytest.approx(want, rel=RTOL)
    want = spec.exact_online_loss(res, matrix, d.y_train)
    assert spec.exact_online_loss(res, primal, d.y_train) == pytest.approx(want, rel=RTOL)
    assert primal._K is None  # the primal route never built the T x T kernel


def test_test_predictions_primal_equal_kernel_blocks():
    D = 30
    d = make_data(5, D=D, T=60)
    fmap = Coordinate(D)
    res = _sg_pass(d, D, 0.05)
    for f in (res.predictor, res.averaged, KernelExpansion(res.predictor.alpha[:40])):
        want = f.predict_exact(fmap.kernel(d.X_test, d.X_train))
        got = primal_predictions(fmap, d.X_train, d.X_test, f.alpha)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * np.max(np.abs(want)))


def test_evaluation_switches_to_the_primal_only_past_the_threshold(monkeypatch):
    """Up to PRIMAL_EVALUATION_ABOVE_T the kernel blocks are used (committed numbers); past it
    the primal, equal to rounding; maps without a primal never switch."""
    from ilnrun import cell as cellmod

    d = make_data(6, D=20, T=50)
    inst = cellmod.Instance(d, Coordinate(20))
    f = _sg_pass(d, 20, 0.05).predictor
    blocks = inst.predict_exact(f, "test")
    np.testing.assert_array_equal(blocks, f.predict_exact(inst.kernel_to_train("test")))
    monkeypatch.setattr(theory, "PRIMAL_EVALUATION_ABOVE_T", 10)
    assert theory.primal_evaluation(inst.fmap, 50)
    assert not theory.primal_evaluation(FEATURE_MAPS["relu"](20), 50)
    primal = inst.predict_exact(f, "test")
    np.testing.assert_allclose(primal, blocks, rtol=RTOL, atol=RTOL * np.max(np.abs(blocks)))


def _regret_config(kind, T):
    return tiny_config(
        **{
            "dataset.T": T,
            "dataset.D": 10,
            "feature_map": {"kind": kind},
            "evaluation.regret_B": 1.0,
            "methods": {"shrinking_gradient": {"preset": "theory", "c": 0.01}},
        }
    )


@pytest.mark.parametrize("kind", ["relu", "fourier"])
def test_kernel_matrix_diagnostics_are_refused_past_their_limit(tmp_path, kind):
    T = theory.KERNEL_DIAGNOSTICS_MAX_T + 1
    path = write_config(tmp_path / "big.yaml", _regret_config(kind, [200, T]))
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    assert "evaluation.regret_B" in res.output and f"{T:,}" in res.output
    assert "Traceback" not in res.output


def test_coordinate_diagnostics_are_not_refused_at_large_T(tmp_path):
    """The primal route has no T limit: coordinate at T = 100 000 validates."""
    path = write_config(tmp_path / "big.yaml", _regret_config("coordinate", 100_000))
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code == 0, res.output


def test_kernel_ogd_pass_in_the_primal_equals_kernel_rows(monkeypatch):
    """Past the threshold Kernel OGD predicts in the primal: the same pass to rounding, the same
    counters; below it the kernel rows (committed numbers) are untouched."""
    D = 20
    d = make_data(7, D=D, T=700)  # more than one BLOCK of kernel rows
    fmap = Coordinate(D)

    def run():
        return kernel_ogd.fit(
            d.X_train, d.y_train, fmap, np.random.default_rng(0), eta=0.5, schedule="inv_sqrt"
        )

    rows = run()
    monkeypatch.setattr(theory, "PRIMAL_EVALUATION_ABOVE_T", 100)
    primal = run()
    np.testing.assert_allclose(primal.losses, rows.losses, rtol=RTOL, atol=1e-18)
    np.testing.assert_allclose(
        primal.predictor.alpha, rows.predictor.alpha, rtol=RTOL, atol=RTOL * 1e-3
    )
    assert primal.counters == rows.counters


def test_the_replays_are_compiled_where_numba_imports():
    pytest.importorskip("numba")
    kernel, primal = theory._replays()
    assert kernel is not theory._replay_kernel_numpy and primal is not theory._replay_primal_numpy
