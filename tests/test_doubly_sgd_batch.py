"""Doubly SGD with mini-batches and feature blocks (Dai et al. Section 7; ``batch`` and ``block``
of ``methods.doubly_sgd``): one point per round stays today's pass bit for bit, a mini-batch pass
equals a direct transcription of Dai's Algorithm 1 with the mini-batch gradient, the counters are
what the budget expects and the budget is matched for the batch, and bad values are refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import invoke, refused, tiny_config, write_config

import ilnrun.config as C
from ilnrun.budget import derive, setting_size, target
from ilnrun.features import Fourier, ReLU
from ilnrun.learners import LEARNERS
from ilnrun.learners import doubly_sgd as dsgd
from ilnrun.losses import LOSSES


def _data(T: int = 23, D: int = 4, seed: int = 3, signs: bool = False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, D)) / 2.0
    y = np.tanh(X[:, 0] - X[:, 1])
    return X, (np.where(y >= 0, 1.0, -1.0) if signs else y)


def _same(a, b) -> bool:
    return (
        np.array_equal(a.losses, b.losses)
        and a.counters == b.counters
        and np.array_equal(a.predictor.coef, b.predictor.coef)
        and np.array_equal(a.predictor.W, b.predictor.W)
        and (a.diverged, a.timed_out) == (b.diverged, b.timed_out)
    )


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("rng_kind", ["generator", "numpy_only"])
def test_batch_one_is_todays_pass_bit_for_bit(average, rng_kind):
    """``batch=1`` (the default) runs the very pass of one point per round, compiled or numpy."""
    X, y = _data()
    fmap = ReLU(X.shape[1])

    def rng():
        if rng_kind == "generator":
            return np.random.default_rng(11)
        return type("NumpyOnly", (np.random.Generator,), {})(np.random.PCG64(11))

    kw = dict(eta=0.4, k=3, nu=0.05, schedule="inv_sqrt", average=average)
    today = dsgd.fit(X, y, fmap, rng(), **kw)
    assert _same(dsgd.fit(X, y, fmap, rng(), batch=1, **kw), today)
    assert _same(dsgd.fit_numpy(X, y, fmap, rng(), batch=1, **kw), today)


def test_defaults_leave_settings_and_keywords_unchanged():
    """``batch: 1`` and ``block: null`` are unused (no column, no key, no ``fit`` keyword): a
    setting that gives them reads as one that does not."""
    from ilnrun.config.grid import key_part

    spec = LEARNERS["doubly_sgd"]

    def setting(section: dict) -> dict:
        resolved = C.resolve(tiny_config(methods={"doubly_sgd": section})).as_dict()
        (h,) = C.method_grid("doubly_sgd", resolved["methods"]["doubly_sgd"])
        return h

    plain, given = setting({"eta": 0.5}), setting({"eta": 0.5, "batch": 1, "block": None})
    assert given == plain
    assert plain["batch"] is None and plain["block"] is None
    assert key_part(spec.params, plain) == key_part(spec.params, {"eta": 0.5, "nu": 0.0})
    today = {"eta": 0.5, "k": 4, "nu": 0.0, "schedule": "constant"}
    assert spec.fit_arguments(plain, 4, 30) == today
    assert spec.takes_budget(plain)


def naive(X, y, fmap, rng, *, eta, k, batch, nu=0.0, schedule="constant", loss="square"):
    """Dai et al. Algorithm 1 with a mini-batch, written out: a list of ``(omega, alpha)``;
    every prediction sums over it; line 6 multiplies every earlier alpha."""
    from ilnrun.schedules import step_sizes

    T = len(y)
    S = -(-T // batch)
    gammas = step_sizes(schedule, eta, S, None)
    spec = LOSSES[loss]
    feats: list[tuple[np.ndarray, float]] = []
    losses = []
    for s in range(S):
        pts = range(s * batch, min(T, (s + 1) * batch))
        f = {}
        for t in pts:
            f[t] = sum(a * fmap.point(X[t], w[None])[0] for w, a in feats)
            losses.append(float(spec.value(f[t], y[t])))
        omegas = fmap.sample(rng, k)
        new = []
        for j in range(k):
            grad = sum(
                float(spec.derivative(f[t], y[t])) * fmap.point(X[t], omegas[j : j + 1])[0]
                for t in pts
            )
            new.append((omegas[j], -gammas[s] * grad / (len(pts) * k)))
        feats = [(w, (1.0 - gammas[s] * nu) * a) for w, a in feats] + new
    return np.array(losses), np.array([a for _, a in feats]), np.array([w for w, _ in feats])


@pytest.mark.parametrize(
    "batch,k,nu,loss",
    [(4, 3, 0.0, "square"), (5, 2, 0.1, "square"), (3, 1, 0.02, "logistic"), (30, 2, 0.0, "hinge")],
)
def test_mini_batch_pass_equals_dai_algorithm_1_written_out(batch, k, nu, loss):
    """Losses, coefficients and features of the mini-batch pass equal the direct transcription
    (the last step takes fewer points: 23 = 5 * 4 + 3)."""
    X, y = _data(signs=loss != "square")
    fmap = Fourier(X.shape[1], sigma=1.0)
    kw = dict(eta=0.6, k=k, nu=nu, schedule="inv_sqrt", loss=loss)
    got = dsgd.fit(X, y, fmap, np.random.default_rng(5), batch=batch, **kw)
    losses, alpha, W = naive(X, y, fmap, np.random.default_rng(5), batch=batch, **kw)
    assert got.losses.shape == (len(y),)
    np.testing.assert_allclose(got.losses, losses, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.predictor.coef, alpha, rtol=1e-11, atol=1e-14)
    np.testing.assert_array_equal(got.predictor.W, W)
    assert np.any(alpha != 0)


@pytest.mark.parametrize("T,batch", [(23, 4), (24, 4), (10, 10), (7, 20), (30, 1)])
def test_counters_are_what_a_unit_costs(T, batch):
    """``train_evals = k sum_s s b_s`` and ``features_sampled = k S`` as counted by the pass;
    one point per step is the budget's own formula."""
    X, y = _data(T=T)
    r = dsgd.fit(X, y, ReLU(X.shape[1]), np.random.default_rng(0), eta=0.3, k=3, batch=batch)
    assert r.counters["train_evals"] == dsgd.expected_batched(3, T, batch)["train_evals"]
    assert r.counters["features_sampled"] == 3 * dsgd.steps(T, batch)
    assert len(r.predictor.coef) == 3 * dsgd.steps(T, batch)
    if batch == 1:
        assert r.counters == {**r.counters, **LEARNERS["doubly_sgd"].budget.expected(3, T)}
    # what the budget expects of the setting (ilnrun validate's training evaluations)
    h = {"eta": 0.3, "batch": batch if batch != 1 else None}
    expected = LEARNERS["doubly_sgd"].budget.expected_for(3, T, h)
    assert r.counters == {**r.counters, **expected}
    # the brute-force sum over steps
    S = dsgd.steps(T, batch)
    sizes = [min(T, (s + 1) * batch) - s * batch for s in range(S)]
    assert dsgd.step_evaluations(T, batch) == sum((s + 1) * b for s, b in enumerate(sizes))


@pytest.mark.parametrize("match", ["evaluations", "samples", "total"])
@pytest.mark.parametrize("batch", [1, 4, 7, 64])
def test_budget_size_is_derived_for_the_batch(match, batch):
    """The features per step of a batch setting spend the matched target within half a unit;
    one point per step keeps the budget's ``k``."""
    T, k, n_eval = 200, 2, 50
    b = derive(match, k, T, n_eval)
    h = {"eta": 0.1, "batch": batch if batch != 1 else None}
    size = setting_size(b, "doubly_sgd", h)
    if batch == 1:
        assert size == b.size("k") == k
        return
    cost = dsgd.batch_cost(match, T, n_eval, h)
    assert abs(size * cost - target(match, k, T, n_eval)) <= cost / 2
    assert size >= k
    # the shrinking gradient and fixed-random sizes do not move
    assert setting_size(b, "fixed_random", {}) == b.size("r")


def test_a_batch_cell_spends_the_matched_budget(tmp_path):
    """``ilnrun run`` with a batch setting: the cell's counters are the pass's for the derived
    size, within half a unit of the target, and the one-point setting is unchanged."""
    import pandas as pd

    cfg = tiny_config(
        repetitions=1,
        **{"dataset.D": 20},
        methods={"doubly_sgd": {"eta": 0.3, "batch": [1, 8]}},
    )
    path = write_config(tmp_path / "c.yaml", cfg)
    res = invoke(["run", path, "--out", tmp_path / "out", "--jobs", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    T, tgt = 30, target("evaluations", 4, 30)
    one = runs[runs["batch"].isna()].iloc[0]
    assert int(one["train_evals"]) == tgt
    eight = runs[runs["batch"] == 8].iloc[0]
    k = int(eight["k"])
    assert int(eight["train_evals"]) == k * dsgd.step_evaluations(T, 8)
    assert abs(int(eight["train_evals"]) - tgt) <= dsgd.step_evaluations(T, 8) / 2
    assert int(eight["features_sampled"]) == k * dsgd.steps(T, 8)


def test_the_report_states_each_batch_setting_s_size(tmp_path):
    """The report's table of derived sizes gives Doubly SGD's ``k`` per value of ``batch`` and
    ``block`` in its grid (a batch's ``k`` derived from the target for its own cost, a fixed
    block's as fixed, without a budget), with a line saying how; a grid at the defaults keeps
    the budget's ``k`` alone (what every report of a run without batches shows)."""
    import pandas as pd

    from ilnrun.report.sections.setup import size_cell

    cfg = tiny_config(
        repetitions=1,
        **{"dataset.D": 20},
        methods={
            "doubly_sgd": {"eta": 0.3, "batch": [1, 8], "block": [None, 3]},
            "fixed_random": {"eta": 0.3},
        },
    )
    path = write_config(tmp_path / "c.yaml", cfg)
    res = invoke(["run", path, "--out", tmp_path / "out", "--jobs", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    assert invoke(["report", tmp_path / "out"]).exit_code == 0
    text = (tmp_path / "out" / "REPORT.md").read_text()
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    dsgd_rows = runs[runs["method"] == "doubly_sgd"]
    k8 = int(dsgd_rows.loc[(dsgd_rows["batch"] == 8) & dsgd_rows["block"].isna(), "k"].iloc[0])
    assert k8 == round(target("evaluations", 4, 30) / dsgd.step_evaluations(30, 8)) != 4
    r = int(runs.loc[runs["method"] == "fixed_random", "r"].iloc[0])
    fixed = "3 (batch {}, block 3; fixed by the setting, no budget)"
    cell = "; ".join(["4 (batch 1)", fixed.format(1), f"{k8} (batch 8)", fixed.format(8)])
    assert f"| 30 | 4 | 1,860 | {cell} | {r} |" in text
    assert "- Doubly SGD's k per value of `batch`, `block` in its grid:" in text
    # the cells run with those sizes (a block's cells have no budget)
    blocks = dsgd_rows[dsgd_rows["block"] == 3]
    assert (blocks["k"] == 3).all() and blocks["dsgd_k"].isna().all()
    # a grid at the defaults: the budget's k alone (as before batches existed)
    b = derive("evaluations", 4, 30)
    assert size_cell(LEARNERS["doubly_sgd"], {"eta": [0.3, 1.0]}, b) == 4
    assert size_cell(LEARNERS["doubly_sgd"], {"eta": 0.3, "batch": 1}, b) == 4
    assert size_cell(LEARNERS["fixed_random"], {"eta": 0.3}, b) == b.size("r")
    assert size_cell(LEARNERS["doubly_sgd"], {"eta": 0.3, "batch": 8}, b) == f"{k8} (batch 8)"


def test_a_fixed_block_takes_no_budget():
    """``block`` set: that many features per step, and the setting takes no size."""
    spec = LEARNERS["doubly_sgd"]
    (h,) = C.method_grid("doubly_sgd", {"eta": 0.5, "batch": 16, "block": 8})
    assert not spec.takes_budget(h)
    assert spec.fit_arguments(h, None, 100) == {"eta": 0.5, "k": 8, "batch": 16}


@pytest.mark.parametrize(
    "section,key",
    [
        ({"batch": 0}, "batch"),
        ({"batch": 1.5}, "batch"),
        ({"batch": "many"}, "batch"),
        ({"block": 0}, "block"),
        ({"block": -4}, "block"),
    ],
)
def test_bad_values_are_refused_naming_the_key(tmp_path, section, key):
    cfg = tiny_config(methods={"doubly_sgd": {"eta": 0.3, **section}})
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, key)


def test_the_jax_engine_refuses_a_batch(tmp_path):
    """The jax pass declares ``batch = 1`` only: ``--engine jax`` with a batch is refused at
    validation, the learner and key named (never run with the batch ignored)."""
    cfg = tiny_config(methods={"doubly_sgd": {"eta": 0.3, "batch": 4}}, engine="jax")
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, "batch", "doubly_sgd")


def test_the_compiled_pass_leaves_a_batch_to_numpy_with_a_note(capsys):
    X, y = _data()
    r = dsgd.fit(X, y, ReLU(X.shape[1]), np.random.default_rng(0), eta=0.3, k=2, batch=4)
    assert r.counters["features_sampled"] == 2 * dsgd.steps(len(y), 4)
    with pytest.raises(ValueError, match="one point per step"):
        dsgd.fit_compiled(X, y, ReLU(X.shape[1]), np.random.default_rng(0), eta=0.3, k=2, batch=4)
