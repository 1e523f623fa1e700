"""The evaluation protocol and its counted costs (docs/protocol.md §3.2, §5.4-§5.6;
docs/budgets.md §6): ``evaluation.kernel: free``, the ``m_test`` rules and sweep, every
evaluation of training, validation and test counted, and ``budget.match: total``.

The cost columns are counted by the predictors as they predict (``KernelExpansion.costs``,
``FeatureExpansion.costs``) and by the learners' passes (``train_evals``, ``kernel_evals``);
these tests check them against the formulas of docs/protocol.md."""

from __future__ import annotations

import math

import pytest
from conftest import refused, tiny_config

from ilnrun import budget
from ilnrun import config as C
from ilnrun.cell import instance, run_cell, sweep_column
from ilnrun.features import FEATURE_MAPS
from ilnrun.learners.shrinking_gradient import theory_preset
from ilnrun.params import ConfigError

N_VAL, N_TEST, T = 20, 30, 24


def relu_config(**evaluation) -> dict:
    """Shrinking Gradient, Doubly SGD and Fixed-Random on ReLU features, tiny."""
    cfg = tiny_config()
    cfg["repetitions"] = 1
    # labels a . x (no kernel used to make the data)
    cfg["dataset"] = {"kind": "clipped_gaussian", "D": 5, "T": T, "n_val": N_VAL}
    cfg["dataset"].update(n_test=N_TEST, sparsity=4)
    cfg["feature_map"] = {"kind": "relu"}
    cfg["budget"] = {"match": "evaluations", "dsgd_k": 1}
    cfg["evaluation"] = {"m_test": 20, "n_test_estimated": 10, "curve_points": 5, **evaluation}
    cfg["methods"] = {
        "shrinking_gradient": {"eta": 0.2, "B": 0.5},
        "doubly_sgd": {"eta": 0.2},
        "fixed_random": {"eta": 0.2},
    }
    return cfg


def rows(cfg: dict) -> dict[str, dict]:
    """The row of each cell of ``cfg`` by learner (one setting each)."""
    exp = C.resolve(cfg)
    return {c.method: run_cell(exp, c)["row"] for c in C.cells(exp)}


def test_free_computes_no_kernel_value_and_counts_every_evaluation(monkeypatch):
    """Under ``kernel: free`` no closed-form kernel value is computed (the map's ``kernel``
    raises) and ``kernel_evals_total`` is 0 in every row; ``evals_total`` is the learners'
    counted training evaluations plus their predictors' counted evaluations on every validation
    and test point: SG 2 m_test, Doubly SGD k T, Fixed-Random r a point."""

    def no_kernel(self, X1, X2):
        raise AssertionError("a closed-form kernel value was computed under kernel: free")

    monkeypatch.setattr(FEATURE_MAPS["relu"], "kernel", no_kernel)
    got = rows(relu_config(kernel="free"))
    n = N_VAL + N_TEST
    b = budget.derive("evaluations", 1, T)
    per_point = {"shrinking_gradient": 2 * 20, "doubly_sgd": 1 * T, "fixed_random": b.r}
    train = {"shrinking_gradient": 2 * b.m * (T - 1), "doubly_sgd": T * (T + 1) // 2}
    train["fixed_random"] = b.r * T
    for method, row in got.items():
        assert not row["diverged"], method
        assert row["eval_kernel"] == "free"
        assert row["kernel_evals_total"] == 0 and row["kernel_evals"] == 0
        assert row["val_kernel_evals"] == row["test_kernel_evals"] == 0
        assert row["train_evals"] == train[method]
        assert row["val_evals"] == row["test_evals_psi"] == per_point[method]
        assert row["test_evals_free"] == per_point[method]
        assert row["evals_total"] == train[method] + n * per_point[method]
    sg = got["shrinking_gradient"]
    assert sg["eval_mode"] == "estimated" and sg["m_test"] == 20
    assert sg["val_loss_estimated"] == sg["val_loss"]
    # the averaged predictor by Algorithm 2 on the first n_test_estimated points: diagnostic
    assert math.isfinite(sg["test_loss_avg"]) and sg["diagnostic_evals"] == 2 * 20 * 10
    assert got["doubly_sgd"]["m_test"] is None and got["doubly_sgd"]["diagnostic_evals"] == 0


def test_exact_counts_kernel_values_of_training_and_evaluation():
    """Under ``kernel: exact`` a kernel expansion scored exactly costs its support size in
    kernel values a point (SG, kernel OGD, kernel ridge), Nyström its landmarks; training's
    kernel values are the learners' ``kernel_evals``. ``test_evals`` keeps its meaning."""
    cfg = relu_config()
    cfg["methods"] = {
        "shrinking_gradient": {"eta": 0.2, "B": 0.5},
        "doubly_sgd": {"eta": 0.2},
        "kernel_ogd": {"eta": 0.2},
        "kernel_ridge": {"ridge": 0.01},
        "nystroem_ridge": {"rank": 7, "ridge": 0.01},
    }
    exp = C.resolve(cfg)
    out = {c.method: run_cell(exp, c)["row"] for c in C.cells(exp)}
    n = N_VAL + N_TEST
    train_kernel = {
        "shrinking_gradient": 0,
        "doubly_sgd": 0,
        "kernel_ogd": T * (T - 1) // 2,
        "kernel_ridge": T * T,
        "nystroem_ridge": 7 * 7 + T * 7,
    }
    for method, row in out.items():
        assert row["eval_kernel"] == "exact"
        assert row["kernel_evals"] == train_kernel[method], method
        per_point = row["test_kernel_evals"]
        assert row["val_kernel_evals"] == per_point
        assert row["kernel_evals_total"] == train_kernel[method] + n * per_point
        assert row["evals_total"] == row["train_evals"] + n * row["test_evals_psi"]
    assert out["nystroem_ridge"]["test_kernel_evals"] == 7 == out["nystroem_ridge"]["test_evals"]
    assert out["nystroem_ridge"]["test_evals_psi"] == 0
    assert out["nystroem_ridge"]["test_evals_free"] is None
    for method in ("shrinking_gradient", "kernel_ogd", "kernel_ridge"):
        row = out[method]
        assert row["test_kernel_evals"] == row["test_evals"] > 0  # the support size
        assert row["test_evals_psi"] == 0
    assert out["kernel_ogd"]["test_evals_free"] is None
    sg = out["shrinking_gradient"]
    # SG's kernel-free predictor (Algorithm 2, 2 m_test a point), not scored: diagnostic
    assert sg["test_evals_free"] == 40 and sg["m_test"] == 20
    assert sg["diagnostic_evals"] == 2 * 20 * (10 + 10)  # test_ and val_loss_estimated
    assert out["doubly_sgd"]["test_evals_psi"] == T and out["doubly_sgd"]["test_kernel_evals"] == 0


@pytest.mark.parametrize(
    "rule,want",
    [
        # c is unused under the budget preset: the parameter's default c = 1
        ("theorem1", lambda m: theory_preset(0.5, T, 1.0)[1]),
        ("train", lambda m: m),
        ({"per_T": 1.5}, lambda m: math.ceil(1.5 * T)),
        (7, lambda m: 7),
    ],
)
def test_m_test_rules_are_recorded_per_row(rule, want):
    """``theorem1`` is the theory preset's m for the cell's T, B and c; ``train`` the training
    m; ``{per_T: c}`` ceil(c T); the value used is the row's ``m_test``."""
    cfg = relu_config(m_test=rule)
    cfg["methods"] = {"shrinking_gradient": {"eta": 0.2, "B": 0.5, "c": 0.3}}
    row = rows(cfg)["shrinking_gradient"]
    assert row["m_test"] == want(row["m"])
    assert row["test_evals_free"] == 2 * row["m_test"]


def test_theorem1_under_the_theory_preset_is_its_m():
    """Under the theory preset (which uses c) ``theorem1`` and ``train`` are both the
    pass's own m = ceil(c B^4 T log(BT))."""
    for rule in ("theorem1", "train"):
        cfg = relu_config(m_test=rule)
        cfg["methods"] = {"shrinking_gradient": {"preset": "theory", "B": 2.0, "c": 0.01}}
        row = rows(cfg)["shrinking_gradient"]
        assert row["m_test"] == row["m"] == theory_preset(2.0, T, 0.01)[1]


def test_theorem1_without_m_uses_B_1_and_the_default_c():
    """A learner without m (kernel OGD's Algorithm-2 sweep) takes Theorem 1's m at B = 1, c = 1:
    the rule changes no column of a learner that does not estimate."""
    cfg = relu_config(m_test="theorem1")
    from ilnrun.cell import m_test, plan

    exp = C.resolve(cfg)
    c = next(c for c in C.cells(exp) if c.method == "doubly_sgd")
    p = plan(exp.budget, c, instance(exp.seed, exp.feature_map, c))
    assert m_test(exp.evaluation, p) == theory_preset(1.0, T, 1.0)[1]


@pytest.mark.parametrize(
    "evaluation,path",
    [
        ({"m_test": {"per_T": 0}}, "evaluation.m_test.per_T"),
        ({"m_test": {"per_T": -1}}, "evaluation.m_test.per_T"),
        ({"m_test": {"bad": 1}}, "evaluation.m_test.bad"),
        ({"m_test": "theorem1x"}, "evaluation.m_test"),
        ({"m_test": 0}, "evaluation.m_test"),
        ({"m_test": True}, "evaluation.m_test"),
        ({"kernel": "none"}, "evaluation.kernel"),
        ({"m_test_sweep": [10, 0]}, "evaluation.m_test_sweep[1]"),
        ({"kernel": "free", "regret_B": 1.0}, "evaluation.regret_B"),
    ],
)
def test_bad_evaluation_keys_are_refused_by_name(evaluation, path):
    with pytest.raises(ConfigError) as err:
        C.resolve(relu_config(**evaluation))
    assert path in [p for p, _ in err.value.problems], err.value.problems


def test_free_refuses_learners_that_need_the_kernel():
    cfg = relu_config(kernel="free")
    cfg["methods"]["kernel_ogd"] = {"eta": 0.2}
    with pytest.raises(ConfigError) as err:
        C.resolve(cfg)
    assert [p for p, _ in err.value.problems] == ["methods.kernel_ogd"]


@pytest.mark.parametrize(
    "evaluation", [{}, {"kernel": "free"}, {"m_test": "train"}, {"kernel": "exact"}]
)
def test_total_needs_free_and_train(evaluation):
    cfg = relu_config(**evaluation)
    cfg["budget"]["match"] = "total"
    with pytest.raises(ConfigError) as err:
        C.resolve(cfg)
    assert [p for p, _ in err.value.problems] == ["budget.match"]


def test_new_keys_at_their_defaults_change_no_digest():
    """``kernel: exact`` and an empty sweep are not stored: the resolved config, every cell id
    and every record digest are those of a config without the keys."""
    plain = C.resolve(relu_config())
    spelled = C.resolve(relu_config(kernel="exact", m_test_sweep=None))
    assert plain.as_dict() == spelled.as_dict()
    for a, b in zip(C.cells(plain), C.cells(spelled), strict=True):
        assert a.id == b.id
        assert C.record_digest(plain, a) == C.record_digest(spelled, b)
    free = C.resolve(relu_config(kernel="free"))
    c = C.cells(free)[0]
    assert C.record_digest(free, c) != C.record_digest(plain, C.cells(plain)[0])


def test_m_test_sweep_columns_have_their_own_generators():
    """``test_nmse_estimated_m<m>``: one column per m for a kernel-expansion predictor, NaN for
    feature learners; each column's draws depend only on its own m (not on the other m of the
    sweep), and the other columns do not move; its evaluations are diagnostic."""
    one = rows(relu_config(m_test_sweep=[50]))
    two = rows(relu_config(m_test_sweep=[5, 50]))
    none = rows(relu_config())
    sg1, sg2, sg0 = (r["shrinking_gradient"] for r in (one, two, none))
    assert sg1[sweep_column(50)] == sg2[sweep_column(50)]
    assert math.isfinite(sg2[sweep_column(5)]) and sg2[sweep_column(5)] != sg2[sweep_column(50)]
    for key in ("test_loss", "test_loss_estimated", "val_loss_estimated", "test_loss_avg"):
        assert sg0[key] == sg2[key]
    assert sg2["diagnostic_evals"] - sg0["diagnostic_evals"] == 2 * (5 + 50) * 10
    assert math.isnan(two["fixed_random"][sweep_column(5)])
    assert sweep_column(1000) == "test_nmse_estimated_m1000"


@pytest.mark.parametrize("k", [4, 8])
def test_total_budget_matches_counted_evals_total_within_one_percent(k):
    """Under ``budget.match: total`` (kernel free, m_test: train) every learner's counted
    ``evals_total`` (training + every validation and test point) is within 1% of the target
    k (T (T+1)/2 + n_eval T); Doubly SGD's exactly. (Sizes are rounded to the nearest integer:
    off by at most 1/(2 size), under 1% from m = 50 on; here m = 89 and 177 at T = 60.)"""
    T = 60
    cfg = relu_config(kernel="free", m_test="train")
    cfg["dataset"]["T"] = T
    cfg["budget"] = {"match": "total", "dsgd_k": k}
    got = rows(cfg)
    target = k * (T * (T + 1) // 2 + (N_VAL + N_TEST) * T)
    assert {r["budget_target"] for r in got.values()} == {target}
    for method, row in got.items():
        # a full pass, scored (a test loss far above the zero predictor's may still mark it
        # diverged: Algorithm 2 with the training m is noisy)
        assert row["rounds"] == T and row["test_evals_psi"] > 0, method
        assert abs(row["evals_total"] - target) <= 0.01 * target, (method, row["evals_total"])
        assert row["kernel_evals_total"] == 0
    assert got["doubly_sgd"]["evals_total"] == target
    sg = got["shrinking_gradient"]
    assert sg["m_test"] == sg["m"]


def test_total_unit_costs():
    """``BudgetSize.cost("total", T, n_eval)``: SG 2(T-1) + 2 n_eval, Doubly SGD
    T(T+1)/2 + n_eval T, Fixed-Random T + n_eval; with n_eval = 0 it is ``evaluations``."""
    b = budget.derive("total", 2, 50, 100)
    assert b.target == 2 * (50 * 51 // 2 + 100 * 50)
    assert b.k == 2
    assert b.r == round(b.target / (50 + 100))
    assert b.m == round(b.target / (2 * 49 + 200))
    assert budget.derive("total", 2, 50).sizes == budget.derive("evaluations", 2, 50).sizes


def test_free_run_report_resume_and_two_jobs(tmp_path):
    """A kernel-free run of SG, Doubly SGD and Fixed-Random on ReLU features goes through
    ``ilnrun run``, ``report``, a resume and ``--jobs 2`` (same runs.csv); a refused key exits
    2 naming it."""
    import pandas as pd
    from conftest import invoke, write_config

    cfg = relu_config(kernel="free", m_test={"per_T": 2}, m_test_sweep=[10])
    path = write_config(tmp_path / "free.yaml", cfg)
    out, out2 = tmp_path / "one", tmp_path / "two"
    res = invoke(["run", path, "--out", out, "--quiet"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["kernel_evals_total"] == 0).all() and (runs["eval_kernel"] == "free").all()
    assert set(runs.loc[runs["method"] == "shrinking_gradient", "m_test"]) == {2 * T}
    summary = pd.read_csv(out / "summary.csv")
    assert {"evals_total_mean", "kernel_evals_total_mean"} <= set(summary.columns)
    res = invoke(["run", path, "--out", out])
    assert res.exit_code == 0 and "resumed" in res.output, res.output
    res = invoke(["run", path, "--out", out2, "--jobs", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    pd.testing.assert_frame_equal(
        runs.drop(columns=["wall_s", "eval_s"]),
        pd.read_csv(out2 / "runs.csv").drop(columns=["wall_s", "eval_s"]),
    )
    res = invoke(["report", out, "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
    bad = write_config(tmp_path / "bad.yaml", relu_config(m_test="theorem1x"))
    refused(invoke(["validate", bad]), "evaluation.m_test")
    bad = write_config(tmp_path / "bad.yaml", relu_config(m_test={"per_T": 0}))
    refused(invoke(["run", bad, "--out", tmp_path / "never"]), "evaluation.m_test")
    assert not (tmp_path / "never").exists()


def test_validate_estimates_count_algorithm_2_on_every_point():
    """``ilnrun validate``'s seconds include Algorithm 2 on every validation and test point
    under ``kernel: free`` (2 m_test n a point, m_test by the cell's rule) and the sweep."""
    from ilnrun import cost

    def sg_seconds(**evaluation) -> float:
        work = cost.Workload.of(C.resolve(relu_config(**evaluation)))
        (est,) = [e for e in cost.estimates(work) if e.method == "shrinking_gradient"]
        return est.seconds

    exact, free = sg_seconds(), sg_seconds(kernel="free")
    w = 5  # numbers of one relu parameter at D = 5
    per_pair = cost.SECONDS_PER_PAIR * (4 + w)
    assert free - exact == pytest.approx(per_pair * 2 * 20 * (N_VAL + N_TEST))
    rule = sg_seconds(kernel="free", m_test={"per_T": 10})
    assert rule - free == pytest.approx(per_pair * 2 * (10 * T - 20) * (N_VAL + N_TEST + 10))
    swept = sg_seconds(m_test_sweep=[1000])
    assert swept - exact == pytest.approx(per_pair * 2 * 1000 * 10)


def test_the_report_counts_a_total_budget_against_evals_total(tmp_path):
    """Under ``budget.match: total`` the report's "Budgets as counted" table measures each
    learner's deviation on ``evals_total`` (training and scoring), the count the target matches,
    not on ``train_evals`` (which falls short of a total target by the scoring's share)."""
    import pandas as pd
    from conftest import invoke, write_config

    cfg = relu_config(kernel="free", m_test="train")
    cfg["budget"] = {"match": "total", "dsgd_k": 4}
    out = tmp_path / "out"
    res = invoke(["run", write_config(tmp_path / "t.yaml", cfg), "--out", out, "-q"])
    assert res.exit_code == 0, res.output
    assert invoke(["report", out]).exit_code == 0
    text = (out / "REPORT.md").read_text()
    assert (
        "| learner | k | target | train_evals | evals_total | max deviation (evals_total) |" in text
    )
    runs = pd.read_csv(out / "runs.csv")
    for label, method in (
        ("Doubly SGD", "doubly_sgd"),
        ("Shrinking Gradient", "shrinking_gradient"),
    ):
        row = runs[runs["method"] == method].iloc[0]
        dev = abs(row["evals_total"] - row["budget_target"]) / row["budget_target"]
        line = next(x for x in text.split("\n") if x.startswith(f"| {label} | 4 |"))
        assert line.split(" | ")[5] == f"{100 * dev:.2f}%", line
        assert dev < 0.01  # on train_evals it would be the scoring's share, far above 1%
