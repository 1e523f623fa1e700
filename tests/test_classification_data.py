"""The binary classification datasets (``DatasetSpec.labels == "pm1"``): ``teacher_sign``,
``digits``, ``breast_cancer`` and ``openml_binary`` (a fake ``fetch_openml`` cache: no test
downloads). Labels are exactly ``±1`` with the documented class ``+1``; splits are disjoint and
deterministic per seed; every precondition is refused at validation (exit 2, the key named);
each kind runs end to end under the square loss (``ilnrun run`` + ``ilnrun report``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import invoke, refused, run_and_report, write_config
from openml_cache import EXAMPLES, openml_binary_example, openml_cache_put

from ilnrun import config as C
from ilnrun.datasets import DATASETS, DataError, build_dataset, check, inspect

pytest.importorskip("sklearn")

PM1_KINDS = [name for name, spec in DATASETS.items() if spec.labels == "pm1"]
KERNEL_MAP = {"kind": "fourier"}


def _setting(kind: str, folder: Path, **changes) -> tuple[dict, dict]:
    """The resolved dataset setting of ``kind``'s example (``changes`` on top) and the
    resolved feature map."""
    spec = DATASETS[kind]
    example = (spec.example or EXAMPLES[kind])(folder)
    cfg = C.resolve(
        {
            "name": "clf",
            "dataset": {"kind": kind, **example, **changes},
            "feature_map": KERNEL_MAP,
            "methods": {"kernel_ogd": {"eta": 0.1}},
        },
        base_dir=folder,
    )
    return C.dataset_settings(cfg)[0], cfg["feature_map"]


def _build(kind: str, folder: Path, seed: int = 0, **changes):
    setting, fmap = _setting(kind, folder, **changes)
    return build_dataset(setting, np.random.default_rng(seed), fmap)


def test_the_classification_kinds_are_registered_with_their_label_space():
    assert {"teacher_sign", "digits", "breast_cancer", "openml_binary"} <= set(PM1_KINDS)
    for name in ("clipped_gaussian", "teacher", "file", "diabetes", "plotnine", "openml"):
        assert DATASETS[name].labels == "real", name


@pytest.mark.parametrize("kind", PM1_KINDS)
def test_labels_are_exactly_pm1_with_both_classes_in_training(kind, tmp_path):
    d = _build(kind, tmp_path)
    for name in ("train", "val", "test"):
        y = d.split(name)[1]
        assert set(np.unique(y)) <= {-1.0, 1.0}, name
        assert y.dtype == np.float64
    assert set(np.unique(d.y_train)) == {-1.0, 1.0}
    assert d.info["label_scale"] == 1.0
    frac = d.info["positive_fraction"]
    assert frac["train"] == pytest.approx(np.mean(d.y_train > 0))


@pytest.mark.parametrize("kind", PM1_KINDS)
def test_splits_are_disjoint_and_deterministic_per_seed(kind, tmp_path):
    d = _build(kind, tmp_path, seed=1)
    again = _build(kind, tmp_path, seed=1)
    other = _build(kind, tmp_path, seed=2)
    for name in ("train", "val", "test"):
        np.testing.assert_array_equal(d.split(name)[0], again.split(name)[0])
        np.testing.assert_array_equal(d.split(name)[1], again.split(name)[1])
    assert not np.array_equal(d.X_train, other.X_train)
    if "rows" in d.info:  # a table: the rows of each split, drawn without replacement
        rows = np.asarray(d.info["rows"])
        assert (
            len(set(rows.tolist()))
            == len(rows)
            == sum(len(d.split(s)[1]) for s in ["train", "val", "test"])
        )
    X = np.vstack([d.X_train, d.X_val, d.X_test])
    assert len(np.unique(X, axis=0)) == len(X)  # no row in two splits (nor twice in one)


# ---- digits --------------------------------------------------------------------------------


def test_digits_first_class_is_plus_one(tmp_path):
    from sklearn.datasets import load_digits

    b = load_digits()
    d = _build("digits", tmp_path, T=200, n_val=50, n_test="rest", standardize=False)
    X = np.vstack([d.X_train, d.X_val, d.X_test])
    y = np.concatenate([d.y_train, d.y_val, d.y_test])
    assert len(y) == np.isin(b.target, [8, 6]).sum() == 355
    # each image found among scikit-learn's: its digit is 8 exactly where the label is +1
    index = {row.tobytes(): t for row, t in zip(b.data, b.target, strict=True)}
    digits = np.array([index[row.tobytes()] for row in X])
    np.testing.assert_array_equal(np.where(digits == 8, 1.0, -1.0), y)
    swapped = _build("digits", tmp_path, classes=[6, 8], T=200, n_val=50, n_test="rest")
    np.testing.assert_array_equal(
        swapped.y_train, -_build("digits", tmp_path, T=200, n_val=50, n_test="rest").y_train
    )


def test_digits_features_standardized_with_training_statistics(tmp_path):
    d = _build("digits", tmp_path, T=200, n_val=50)
    mean, std = d.X_train.mean(axis=0), d.X_train.std(axis=0)
    np.testing.assert_allclose(mean, 0.0, atol=1e-12)
    np.testing.assert_allclose(std[std > 0], 1.0)


def test_classes_are_one_value_never_an_axis(tmp_path):
    setting, _ = _setting("digits", tmp_path)
    assert setting["classes"] == [8, 6]
    cfg = C.resolve(
        {"name": "x", "dataset": {"kind": "digits"}, "methods": {"kernel_ogd": {"eta": 0.1}}}
    )
    assert len(C.dataset_settings(cfg)) == 1 and C.axes(cfg) == []


# ---- breast cancer ---------------------------------------------------------------------------


def test_breast_cancer_malignant_is_plus_one(tmp_path):
    d = _build("breast_cancer", tmp_path, T=200, n_val=100, n_test="rest")
    y = np.concatenate([d.y_train, d.y_val, d.y_test])
    assert len(y) == 569 and (y > 0).sum() == 212  # scikit-learn's 212 malignant, 357 benign
    assert d.info["classes"] == {"+1": "malignant", "-1": "benign"}
    swapped = _build("breast_cancer", tmp_path, classes=["benign", "malignant"], T=200)
    np.testing.assert_array_equal(
        swapped.y_train, -_build("breast_cancer", tmp_path, T=200).y_train
    )


# ---- teacher_sign ----------------------------------------------------------------------------


def _teacher_pair(tmp_path, flip: float = 0.0, threshold: str = "median"):
    """A teacher_sign instance and the teacher instance of the same seed (same draws)."""
    setting, fmap = _setting("teacher_sign", tmp_path, flip=flip, threshold=threshold)
    real = {k: v for k, v in setting.items() if k not in ("flip", "threshold")}
    real.update(kind="teacher", noise=0.0)
    signs = build_dataset(setting, np.random.default_rng(5), fmap)
    teacher = build_dataset(real, np.random.default_rng(5), fmap)
    return signs, teacher


def test_teacher_sign_is_the_sign_of_the_same_teacher(tmp_path):
    signs, teacher = _teacher_pair(tmp_path, threshold="zero")
    np.testing.assert_array_equal(signs.X_test, teacher.X_test)
    for name in ("train", "val", "test"):
        np.testing.assert_array_equal(
            signs.split(name)[1], np.where(teacher.split(name)[1] > 0, 1.0, -1.0)
        )
    median, teacher = _teacher_pair(tmp_path)
    t = np.median(teacher.y_train)
    assert median.info["threshold_value"] == t
    np.testing.assert_array_equal(median.y_test, np.where(teacher.y_test > t, 1.0, -1.0))
    assert abs(np.mean(median.y_train > 0) - 0.5) <= 1 / len(median.y_train)


def test_teacher_sign_flips_labels_with_the_stated_probability(tmp_path):
    setting, fmap = _setting("teacher_sign", tmp_path, n_test=4000, flip=0.3)
    noisy = build_dataset(setting, np.random.default_rng(5), fmap)
    setting0, _ = _setting("teacher_sign", tmp_path, n_test=4000)
    clean = build_dataset(setting0, np.random.default_rng(5), fmap)
    np.testing.assert_array_equal(noisy.X_test, clean.X_test)  # flips drawn after the teacher
    flipped = noisy.y_test != clean.y_test
    n = len(flipped)
    assert abs(flipped.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)  # a 4-sigma band
    assert noisy.info["flipped"]["test"] == flipped.sum()
    assert clean.info["flipped"] == {"train": 0, "val": 0, "test": 0}


# ---- openml_binary ---------------------------------------------------------------------------


def test_openml_binary_maps_a_nominal_target_and_leaves_other_classes_out(tmp_path):
    spec, _ = _setting("openml_binary", tmp_path)
    d = build_dataset(spec, np.random.default_rng(0))
    from sklearn.datasets import fetch_openml

    frame = fetch_openml(
        name=spec["name"], version=1, data_home=spec["data_home"], as_frame=True, parser="pandas"
    ).frame
    kept = frame[frame["cls"].isin(["pos", "neg"])].reset_index(drop=True)
    rows = np.asarray(d.info["rows"])
    y = np.concatenate([d.y_train, d.y_val, d.y_test])
    np.testing.assert_array_equal(y, np.where(kept["cls"].astype(str) == "pos", 1.0, -1.0)[rows])
    assert d.X_train.shape[1] == 2  # the numeric features a, b
    problems, used = inspect(spec)
    assert problems == [] and used["rows"] == len(kept)
    assert set(used["inputs"]) == {"openml:ilnrun-classes@1"}


def test_openml_binary_numeric_target_classes_matched_as_numbers(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=90).round(6)
    openml_cache_put(
        tmp_path, "numeric-classes", {"a": a, "y": (a > 0) * 1.0 + (a > 1)}, "y", 990103
    )
    spec = {
        "kind": "openml_binary",
        **{p.name: p.default for p in DATASETS["openml_binary"].params},
        "name": "numeric-classes",
        "data_home": str(tmp_path),
        "classes": [1, "0"],
        "T": 30,
        "n_val": 10,
        "standardize": False,
    }
    assert check(spec) == []
    d = build_dataset(spec, np.random.default_rng(0))
    np.testing.assert_array_equal(d.y_train, np.where(d.X_train[:, 0] > 0, 1.0, -1.0))
    assert (d.X_train[:, 0] <= 1).all()  # the rows of class 2 (a > 1) are left out
    assert check({**spec, "classes": [1, "one"]})[0][0] == "classes"


@pytest.mark.parametrize(
    ("classes", "words"),
    [
        (["pos", "pos"], "two distinct classes"),
        (["pos", "neg", "other"], "exactly two classes"),
        (["pos", "nope"], "'nope'"),
        (None, "is required"),
    ],
)
def test_openml_binary_class_problems_name_classes(tmp_path, classes, words):
    spec, _ = _setting("openml_binary", tmp_path)
    problems = check({**spec, "classes": classes})
    assert problems and problems[0][0] == "classes" and words in problems[0][1], problems
    with pytest.raises(DataError):
        build_dataset({**spec, "classes": classes}, np.random.default_rng(0))


# ---- validation: exit 2 naming the key -------------------------------------------------------


def _config(dataset: dict) -> dict:
    return {
        "name": "clf",
        "repetitions": 1,
        "dataset": dataset,
        "feature_map": KERNEL_MAP,
        "methods": {"kernel_ogd": {"eta": 0.1}},
    }


@pytest.mark.parametrize(
    ("dataset", "key", "words"),
    [
        ({"kind": "digits", "classes": [8, 8]}, "dataset.classes", "distinct"),
        ({"kind": "digits", "classes": [8, 6, 1]}, "dataset.classes", "one-vs-rest"),
        ({"kind": "digits", "classes": [8, 42]}, "dataset.classes", "42"),
        ({"kind": "digits", "classes": 8}, "dataset.classes", "list of class labels"),
        ({"kind": "digits", "classes": [8, True]}, "dataset.classes", "list of class labels"),
        ({"kind": "digits", "T": 300, "n_val": 60}, "dataset.T", "rows of classes"),
        (
            {"kind": "breast_cancer", "classes": ["malignant", "healthy"]},
            "dataset.classes",
            "benign",
        ),
        ({"kind": "breast_cancer", "T": 500, "n_val": 69, "n_test": 10}, "dataset.T", "569"),
        ({"kind": "teacher_sign", "flip": 0.7}, "dataset.flip", "0.5"),
        ({"kind": "teacher_sign", "T": 20, "sparsity": 30}, "dataset.sparsity", "<= T"),
        ({"kind": "teacher_sign", "threshold": "mean"}, "dataset.threshold", "median"),
        ({"kind": "openml_binary", "name": "x"}, "dataset.classes", "required"),
    ],
)
def test_validate_refuses_a_bad_classification_setting(tmp_path, dataset, key, words):
    path = write_config(tmp_path / "bad.yaml", _config(dataset))
    refused(invoke(["validate", path]), key, words)


def test_validate_refuses_absent_classes_of_an_openml_data_set(tmp_path):
    example = openml_binary_example(tmp_path)
    cfg = _config({"kind": "openml_binary", **example, "classes": ["pos", "maybe"]})
    refused(
        invoke(["validate", write_config(tmp_path / "bad.yaml", cfg)]), "dataset.classes", "maybe"
    )


# ---- end to end under the square loss ------------------------------------------------------


@pytest.mark.parametrize("kind", PM1_KINDS)
def test_a_classification_kind_runs_and_reports_under_the_square_loss(kind, tmp_path):
    spec = DATASETS[kind]
    example = (spec.example or EXAMPLES[kind])(tmp_path)
    cfg = {
        "name": f"clf_{kind}",
        "seed": 3,
        "repetitions": 2,
        "dataset": {"kind": kind, **example},
        "feature_map": KERNEL_MAP,
        "budget": {"match": "evaluations", "dsgd_k": 4},
        "evaluation": {"m_test": 30, "curve_points": 4},
        "methods": {
            "shrinking_gradient": {"eta": 0.3, "schedule": "constant", "B": 1.0},
            "kernel_ogd": {"eta": 0.3, "schedule": "constant"},
        },
    }
    report = run_and_report(tmp_path, cfg)
    assert f"Dataset `{kind}`" in report
    import pandas as pd

    runs = pd.read_csv(tmp_path / "results" / "runs.csv")
    assert len(runs) == 2 * 2 and np.isfinite(runs["test_loss"]).all()
    if "classes" in runs:  # a list kept as one value: one column, comma-separated
        assert runs["classes"].nunique() == 1 and "," in str(runs["classes"].iloc[0])


def test_a_list_of_features_runs_end_to_end(tmp_path):
    """A list under a dataset key that takes it as one value (``features: [a, b]``) is one
    comma-separated column of the tables, as ``classes`` is (it used to end the run in a
    traceback when the tables grouped their rows)."""
    rng = np.random.default_rng(0)
    a, b, c = rng.normal(size=(3, 80)).round(6)
    lines = ["a,b,c,y"] + [f"{x},{z},{w},{x - z}" for x, z, w in zip(a, b, c, strict=True)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    cfg = _config(
        {
            "kind": "file",
            "path": "t.csv",
            "target": "y",
            "features": ["a", "b"],
            "T": 30,
            "n_val": 20,
        }
    )
    cfg["repetitions"] = 2
    run_and_report(tmp_path, cfg)
    import pandas as pd

    runs = pd.read_csv(tmp_path / "results" / "runs.csv")
    assert set(runs["features"]) == {"a,b"}
