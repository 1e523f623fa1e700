"""numpy's PCG64 streams written out (``ilnrun/learners/pcg64_kernels.py``): ``random()`` and
``integers(0, d)`` from any position of the stream, in lanes and by blocks, equal to numpy's
numbers and leave the generator in numpy's state (``has_uint32`` and ``uinteger`` included).
"""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.learners import pcg64_kernels as pcg
from ilnrun.learners import shrinking_gradient_kernels as kernels

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not available")
U64 = np.uint64
# bounds for integers(0, d): small, the benchmark's, 2**20, and ones numpy redraws often
# (2**31 + 1: about every other number; 3 * 2**30: one in four)
BOUNDS = (2, 7, 800, 1 << 20, (1 << 31) + 1, 3 << 30, pcg.MAX_BOUND)
# block lengths: below the lanes, around them (odd, with a rest), long
LENGTHS = (1, 2, 3, 31, 64, 65, 129, 1001, 5000)


def _generator(seed: int, kept: bool) -> np.random.Generator:
    """``default_rng(seed)``, with a kept 32-bit half (``has_uint32``) if ``kept``."""
    rng = np.random.default_rng(seed)
    if kept:
        rng.integers(0, 10, 1)
        assert rng.bit_generator.state["has_uint32"] == 1
    return rng


def test_state_round_trip():
    rng = _generator(3, True)
    other = np.random.default_rng(99)
    pcg.put_state(other, pcg.state_of(rng))
    assert other.bit_generator.state == rng.bit_generator.state
    assert pcg.supported(rng)
    assert not pcg.supported(np.random.Generator(np.random.MT19937(1)))


@needs_numba
@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("d", BOUNDS)
def test_blocks_are_numpys_numbers(d, kept):
    """Doubles, then integers split into two blocks at a random place (the second started by
    ``position32``, as a parallel pass starts a block): numpy's numbers and state, every time."""
    rs = np.random.default_rng(d)
    for n in LENGTHS:
        rng = _generator(int(rs.integers(1 << 30)), kept)
        st = pcg.state_of(rng)
        jt = pcg.jump_table(st[2], st[3])
        lo = int(rs.integers(0, 4))  # blocks start anywhere in the output array
        u, w = np.zeros(lo + n), np.zeros(lo + n, np.int64)
        # (numba hands uint64 back as Python ints: made uint64 again to pass them back)
        sh, sl = (U64(x) for x in pcg.doubles(st[0], st[1], st[2], st[3], jt, 2.5, u, lo, lo + n))
        # the integers' stream starts where the doubles ended, with the kept half as it was
        cut = int(rs.integers(0, n + 1))
        first = pcg.bounded(sh, sl, st[2], st[3], st[4], st[5], jt, d, w, lo, lo + cut)
        if first[4] == cut:  # no number redrawn: the jump-ahead lands where the block ended
            assert pcg.position32(sh, sl, st[4], st[5], jt, cut) == first[:4]
        h, l_, has, buf = (U64(x) for x in first[:4])
        second = pcg.bounded(h, l_, st[2], st[3], has, buf, jt, d, w, lo + cut, lo + n)
        np.testing.assert_array_equal(u[lo:], rng.random(n) * 2.5, strict=True)
        np.testing.assert_array_equal(w[lo:], rng.integers(0, d, n), strict=True)
        st[0], st[1], st[4], st[5] = second[:4]
        mine = np.random.default_rng(0)
        pcg.put_state(mine, st)
        assert mine.bit_generator.state == rng.bit_generator.state, (n, d)


@needs_numba
def test_redrawn_numbers_are_counted():
    """A bound numpy often redraws for: the block uses more 32-bit numbers than it draws."""
    rng = _generator(5, False)
    st = pcg.state_of(rng)
    jt = pcg.jump_table(st[2], st[3])
    w = np.zeros(1000, np.int64)
    *_, used = pcg.bounded(st[0], st[1], st[2], st[3], st[4], st[5], jt, (1 << 31) + 1, w, 0, 1000)
    assert used > 1200  # about 2000 expected
    np.testing.assert_array_equal(w, rng.integers(0, (1 << 31) + 1, 1000))


@needs_numba
def test_jump_ahead_is_numpys_advance():
    rng = np.random.default_rng(8)
    st = pcg.state_of(rng)
    jt = pcg.jump_table(st[2], st[3])
    for n in (0, 1, 2, 3, 1000, 123_456_789, (1 << 62) + 12345):
        st[0], st[1] = pcg.advance(st[0], st[1], jt, n)
        rng.bit_generator.advance(n)  # (numpy's advance also drops a kept half)
        mine = np.random.default_rng(0)
        pcg.put_state(mine, st)
        assert mine.bit_generator.state["state"] == rng.bit_generator.state["state"], n


@needs_numba
def test_compiled_jump_table_is_the_python_one():
    """The table compiled kernels fill (``fill_jump_table``, 128-bit products in LLVM) is the
    one Python makes (``jump_table``, Python's integers; numpy's ``advance`` by the test above),
    for streams of numpy's seeds and for the largest increment."""
    import numba

    @numba.njit
    def fill(ih, il, jt):
        pcg.fill_jump_table(ih, il, jt)

    top = U64((1 << 64) - 1)
    incs = [tuple(pcg.state_of(np.random.default_rng(s))[2:4]) for s in (0, 8, 2**40)]
    for ih, il in [*incs, (top, top), (U64(0), U64(1))]:
        jt = np.zeros(pcg.JUMPS, np.uint64)
        fill(ih, il, jt)
        np.testing.assert_array_equal(jt, pcg.jump_table(ih, il))
        assert jt[0, 2] == ih and jt[0, 3] == il  # C_1 = inc


@needs_numba
@pytest.mark.parametrize("kept", [False, True])
def test_in_place_draws_are_numpys_calls(kept):
    """``next_double`` and ``integers`` on a state array, called in any order (single
    ``random()`` calls between blocks of ``integers(0, d, n)``, ``d = 1`` included, which numpy
    draws nothing for): numpy's numbers from the same calls, and numpy's state after them."""
    rs = np.random.default_rng(11 + kept)
    for trial in range(40):
        rng = _generator(int(rs.integers(1 << 30)), kept)
        st = pcg.state_of(rng)
        jt = pcg.jump_table(st[2], st[3])
        for _ in range(int(rs.integers(1, 6))):
            for _ in range(int(rs.integers(0, 4))):
                assert pcg.next_double(st) == rng.random()
            d = int(rs.choice((1, *BOUNDS)))
            n, lo = int(rs.choice(LENGTHS)), int(rs.integers(0, 3))
            w = np.full(lo + n, -1, np.int64)
            pcg.integers(st, jt, d, w, lo, lo + n)
            np.testing.assert_array_equal(w[lo:], rng.integers(0, d, n), strict=True)
            assert (w[:lo] == -1).all()
        mine = np.random.default_rng(0)
        pcg.put_state(mine, st)
        assert mine.bit_generator.state == rng.bit_generator.state, trial
