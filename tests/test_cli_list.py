"""``ilnrun list``: every registered learner, feature map and dataset with its parameters."""

from __future__ import annotations

from conftest import invoke

_invoke = invoke


def test_list_names_learners_and_feature_maps():
    res = _invoke(["list"])
    assert res.exit_code == 0, res.output
    for name in ("shrinking_gradient", "doubly_sgd", "fixed_random", "kernel_ogd"):
        assert name in res.stdout
    for name in ("coordinate", "relu", "fourier", "clipped_gaussian"):
        assert name in res.stdout
