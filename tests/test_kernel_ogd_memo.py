"""Kernel OGD's first block of kernel rows kept for the next pass (``kernel_ogd.first_block``):
the passes of a dataset instance's cells, one after another in a process, give the numbers of
passes that each compute their kernel; any change of the inputs (one bit, the sign of a zero),
of the map or of its parameters computes the block again."""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.datasets import clipped_gaussian
from ilnrun.features import Coordinate, Fourier, ReLU
from ilnrun.learners import kernel_ogd


def _data(T: int, D: int = 7, seed: int = 3):
    return clipped_gaussian(np.random.default_rng(seed), D=D, T=T, n_val=1, n_test=1, sparsity=3)


def _fit(X, y, fmap, **kw):
    args = {"eta": 0.3, "schedule": "inv_sqrt", **kw}
    return kernel_ogd.fit(X, y, fmap, np.random.default_rng(0), **args)


@pytest.fixture(autouse=True)
def empty_memo():
    kernel_ogd._MEMO[0] = None
    yield
    kernel_ogd._MEMO[0] = None


MAPS = [Coordinate(7), ReLU(7), Fourier(7, sigma=1.5)]


@pytest.mark.parametrize("T", [60, kernel_ogd.BLOCK + 40])
@pytest.mark.parametrize("fmap", MAPS, ids=lambda f: f.name)
def test_passes_sharing_a_block_give_the_numbers_of_passes_without(T, fmap):
    d = _data(T)
    alone = []
    for eta in (0.1, 0.3, 1.0):  # each pass computing its own kernel
        kernel_ogd._MEMO[0] = None
        alone.append(_fit(d.X_train, d.y_train, fmap, eta=eta))
    kernel_ogd._MEMO[0] = None
    shared = [_fit(d.X_train, d.y_train, fmap, eta=eta) for eta in (0.1, 0.3, 1.0)]
    for a, b in zip(alone, shared, strict=True):
        np.testing.assert_array_equal(a.losses, b.losses, strict=True)
        np.testing.assert_array_equal(a.predictor.alpha, b.predictor.alpha, strict=True)
        assert a.counters == b.counters


def test_the_block_is_kept_only_for_the_same_map_and_the_same_bits():
    X = _data(50).X_train
    f = Coordinate(7)
    K = kernel_ogd.first_block(f, X)
    assert kernel_ogd.first_block(f, X.copy()) is K  # the same bits: kept
    assert not K.flags.writeable  # shared: read only
    np.testing.assert_array_equal(K, f.kernel(X, X), strict=True)
    changed = X.copy()
    changed[4, 2] = np.nextafter(changed[4, 2], 2.0)  # one bit
    assert kernel_ogd.first_block(f, changed) is not K
    zeros = np.zeros((5, 7))
    Z = kernel_ogd.first_block(f, zeros)
    assert kernel_ogd.first_block(f, -zeros) is not Z  # -0.0 is another input
    assert kernel_ogd.first_block(f, zeros.astype(np.float32)) is not Z
    assert kernel_ogd.first_block(Coordinate(8), zeros[:, :7]) is not Z  # another map
    R = kernel_ogd.first_block(Fourier(7, sigma=1.0), X)
    assert kernel_ogd.first_block(Fourier(7, sigma=2.0), X) is not R  # another parameter


def test_a_large_block_is_not_kept(monkeypatch):
    monkeypatch.setattr(kernel_ogd, "MEMO_BYTES", 100)
    X = _data(50).X_train
    K = kernel_ogd.first_block(Coordinate(7), X)
    assert kernel_ogd._MEMO == [None] and kernel_ogd.first_block(Coordinate(7), X) is not K
