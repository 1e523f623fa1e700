"""The allocation intrinsics of the compiled kernels do what the numba functions they replace do.

- ``empty(shape, dtype)`` is ``np.empty(shape, dtype)``: C order, the shape and dtype asked for
  (an integer or a tuple of integers; float64, int64, uint64), a size of 0 allowed, a negative
  size raising numba's ``ValueError``, and a new array each call;
- ``flat(X)`` is ``X.reshape(X.size)`` of a C-contiguous array: the same numbers in order, a
  view of the same memory (a write through it is seen in ``X``), which keeps that memory alive
  when ``X`` itself is gone.
"""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.learners import shrinking_gradient_kernels as kernels

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not available")


@pytest.fixture(scope="module")
def compiled():
    import numba

    empty, flat = kernels.empty, kernels.flat

    @numba.njit
    def allocate(n, m):
        return (
            empty(n, np.float64),
            empty((n, m), np.int64),
            empty((n, m, 3), np.uint64),
            empty(np.int32(n), np.float64),
        )

    @numba.njit
    def negative(n):
        return empty((2, n), np.float64)

    @numba.njit
    def view(X):
        v = flat(X)
        v[0] = -1.0
        return v

    @numba.njit
    def orphan(n, m):  # a view returned without the array it was made from
        X = empty((n, m), np.float64)
        for i in range(n):
            for j in range(m):
                X[i, j] = i * m + j
        return flat(X)

    return allocate, negative, view, orphan


@needs_numba
@pytest.mark.parametrize("n, m", [(0, 4), (1, 1), (5, 3)])
def test_empty_allocates_as_np_empty(compiled, n, m):
    a, b, c, d = compiled[0](n, m)
    for got, shape, dtype in (
        (a, (n,), np.float64),
        (b, (n, m), np.int64),
        (c, (n, m, 3), np.uint64),
        (d, (n,), np.float64),
    ):
        assert got.shape == shape and got.dtype == dtype and got.flags.c_contiguous
    if n:
        assert not np.shares_memory(a, d)


@needs_numba
def test_empty_refuses_a_negative_size(compiled):
    with pytest.raises(ValueError, match="negative dimensions"):
        compiled[1](-1)


@needs_numba
def test_flat_is_a_view_in_order(compiled):
    X = np.arange(12.0).reshape(3, 4)
    want = X.reshape(X.size).copy()
    v = compiled[2](X)
    assert v.shape == (12,) and np.shares_memory(v, X)
    want[0] = -1.0
    np.testing.assert_array_equal(v, want)
    assert X[0, 0] == -1.0  # the write went through the view


@needs_numba
def test_flat_keeps_its_memory_alive(compiled):
    views = [compiled[3](40, 25) for _ in range(3)]
    churn = [compiled[0](1000, 1)[0] for _ in range(50)]  # memory freed too early is reused
    for a in churn:
        a[:] = 7.0
    for v in views:
        np.testing.assert_array_equal(v, np.arange(1000.0))
