"""numpy's PCG64 streams written out in compiled code: ``random()`` and ``integers(0, d)``, the
same numbers, drawn several at a time and from any position of the stream (jump-ahead).

A compiled pass that calls ``Generator.random()`` or ``Generator.integers`` through numba calls
numpy's C functions through a pointer, one number a call, each draw waiting on the previous
one's 128-bit state. Here the generator's state is read once (:func:`state_of`), the numbers
are made by the same arithmetic as numpy's ``pcg64.h`` and ``distributions.c`` (numpy 1.17 on;
checked against numpy by ``agrees`` and the tests), and the state is put back
(:func:`put_state`), so the generator goes on exactly as if numpy had drawn them:

- the state is PCG64's (O'Neill's XSL-RR 128/64): ``state <- state * MULT + inc`` (mod 2**128),
  then the output ``rotr64(hi ^ lo, hi >> 58)`` of the new state;
- ``random()`` is ``(next64 >> 11) * 2**-53``;
- ``integers(0, d)`` (``int64``, ``2 <= d <= 2**32 - 1``) is Lemire's bounded draw on 32-bit
  numbers (``buffered_bounded_lemire_uint32``): ``x * d``, its high half the value, redrawn
  while its low half is below ``(2**32 - d) % d``; a 64-bit output gives two 32-bit numbers,
  low half first, the high half kept (``has_uint32``, ``uinteger``) for the next 32-bit draw;
- jump-ahead (Brown, "Random number generation with arbitrary strides", 1994): ``n`` steps are
  ``state <- A_n state + C_n``, composed from the ``A``, ``C`` of ``2**i`` steps
  (:func:`fill_jump_table`), so any position of the stream is a few multiplications away.

So a block of draws can start anywhere: :func:`doubles` and :func:`bounded` draw in four lanes at
once (four independent states, a quarter of the block each), and a parallel pass gives each
thread its own block of the same stream. :func:`next_double` and :func:`integers` draw from a
state array in place, one ``random()`` or one ``integers(0, d, n)`` call (the Algorithm-2
estimates' binomials and ``w``, Doubly SGD's coordinate draws).

A bounded draw that numpy would redraw (probability ``((2**32 - d) % d) / 2**32`` a number,
about 2e-8 for ``d = 800``) shifts every later number of the stream: a block in which one
occurs is drawn again number by number (:func:`bounded`), and the caller redraws the blocks
after it (their start was computed without it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..compiled_cache import decorator
from ..stopping import deferred
from .compiled import switched_off

try:
    if switched_off():
        raise ImportError("switched off")
    import numba
except ImportError:
    numba = None

LANES = 4  # independent states a block is drawn with (a quarter of the block each)
MIN_LANE = 16  # a block of fewer than LANES * MIN_LANE numbers is drawn in one lane
# PCG64's multiplier (numpy's PCG_DEFAULT_MULTIPLIER_HIGH / _LOW)
MULT_HI, MULT_LO = 2549297995355413924, 4865540595714422341
TO_DOUBLE = 1.0 / 9007199254740992.0  # 2**-53
MAX_BOUND = (1 << 32) - 1  # integers(0, d): d up to this (beyond it numpy draws 64-bit numbers)


_jit = decorator(numba is not None)  # @_jit(internal=True): compiled_cache.jit


if numba is not None:
    from llvmlite import ir as _llvm
    from numba.core import cgutils as _cgutils
    from numba.core import types as _types
    from numba.extending import intrinsic as _intrinsic

    @_intrinsic
    def mul_add(typingctx, ah, al, bh, bl, ch, cl):
        """``a * b + c`` mod 2**128, each number given as its (high, low) 64-bit halves."""
        u64 = _types.uint64
        sig = _types.UniTuple(u64, 2)(u64, u64, u64, u64, u64, u64)

        def codegen(context, builder, signature, args):
            i128, i64 = _llvm.IntType(128), _llvm.IntType(64)

            def join(h, lo):
                return builder.or_(
                    builder.shl(builder.zext(h, i128), i128(64)), builder.zext(lo, i128)
                )

            a, b, c = join(args[0], args[1]), join(args[2], args[3]), join(args[4], args[5])
            r = builder.add(builder.mul(a, b), c)
            hi = builder.trunc(builder.lshr(r, i128(64)), i64)
            return context.make_tuple(builder, signature.return_type, (hi, builder.trunc(r, i64)))

        return sig, codegen

    @_intrinsic
    def output(typingctx, hi, lo):
        """PCG's XSL-RR output of a state: ``hi ^ lo`` rotated right by ``hi >> 58``."""
        u64 = _types.uint64

        def codegen(context, builder, signature, args):
            i64 = _llvm.IntType(64)
            v = builder.xor(args[0], args[1])
            fnty = _llvm.FunctionType(i64, [i64, i64, i64])
            fshr = _cgutils.get_or_insert_function(builder.module, fnty, "llvm.fshr.i64")
            return builder.call(fshr, [v, v, builder.lshr(args[0], i64(58))])

        return u64(u64, u64), codegen

else:

    def mul_add(ah, al, bh, bl, ch, cl):
        """(numba absent: never called)"""

    def output(hi, lo):
        """(numba absent: never called)"""


_MH, _ML = np.uint64(MULT_HI), np.uint64(MULT_LO)
_0, _1 = np.uint64(0), np.uint64(1)
_M32, _S32, _S11 = np.uint64(0xFFFFFFFF), np.uint64(32), np.uint64(11)


# ----------------------------------------------------------------------------------------------
# the generator's state: pcg = [state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger]


def supported(rng: np.random.Generator) -> bool:
    """Whether ``rng`` draws from numpy's PCG64 (``default_rng``'s), whose streams this module
    writes out."""
    return type(rng.bit_generator) is np.random.PCG64


def state_of(rng: np.random.Generator) -> np.ndarray:
    """The PCG64 state of ``rng`` as the ``uint64`` array the kernels read and advance."""
    s = rng.bit_generator.state
    mask = (1 << 64) - 1
    st, inc = s["state"]["state"], s["state"]["inc"]
    return np.array(
        [st >> 64, st & mask, inc >> 64, inc & mask, s["has_uint32"], s["uinteger"]], np.uint64
    )


def put_state(rng: np.random.Generator, pcg: np.ndarray) -> None:
    """Set ``rng``'s state to ``pcg`` (:func:`state_of`'s form), as the kernels left it."""
    s = rng.bit_generator.state
    s["state"]["state"] = (int(pcg[0]) << 64) | int(pcg[1])
    s["state"]["inc"] = (int(pcg[2]) << 64) | int(pcg[3])
    s["has_uint32"], s["uinteger"] = int(pcg[4]), int(pcg[5])
    rng.bit_generator.state = s


@contextmanager
def drawing_from(rng: np.random.Generator) -> Iterator[np.ndarray]:
    """``rng``'s state (:func:`state_of`) for the kernels called in the block to draw from,
    put back into ``rng`` (:func:`put_state`) when the block ends; the block is a
    :func:`~ilnrun.stopping.deferred` one, so a stop lands after the generator has its new
    state, never between the numbers drawn and the state put back."""
    st = state_of(rng)
    with deferred():
        yield st
        put_state(rng, st)


# ----------------------------------------------------------------------------------------------
# steps and jumps


@_jit(internal=True)
def step(sh, sl, ih, il):
    """One step of the LCG: ``state * MULT + inc``."""
    return mul_add(sh, sl, _MH, _ML, ih, il)


JUMPS = (64, 4)  # the shape of a jump table


def _fill_jump_table_python(ih, il, jt) -> None:
    """:func:`fill_jump_table` on Python's integers (its twin where Python calls it)."""
    mask, mod = (1 << 64) - 1, (1 << 128) - 1
    a, c = (MULT_HI << 64) | MULT_LO, (int(ih) << 64) | int(il)
    for i in range(64):
        jt[i] = a >> 64, a & mask, c >> 64, c & mask
        c = (a + 1) * c & mod  # C_{2n} = (A_n + 1) C_n
        a = a * a & mod  # A_{2n} = A_n A_n


@_jit(internal=True, python=_fill_jump_table_python)
def fill_jump_table(ih, il, jt):
    """``jt`` (``JUMPS``: 64 rows ``A_hi, A_lo, C_hi, C_lo``) set to the ``(A, C)`` of ``2**i``
    steps for ``i < 64`` of the stream of increment ``(ih, il)``: ``2**i`` steps take
    ``state`` to ``A state + C`` (mod 2**128); ``A_1 = MULT``, ``C_1 = inc``. The caller gives
    the table (compiled callers make it with ``shrinking_gradient_kernels.empty``, which sits
    above this module: an ``np.empty`` here would compile numba's own)."""
    ah, al, ch, cl = _MH, _ML, ih, il
    for i in range(64):
        jt[i, 0], jt[i, 1], jt[i, 2], jt[i, 3] = ah, al, ch, cl
        ch, cl = mul_add(ah, al, ch, cl, ch, cl)  # C_{2n} = (A_n + 1) C_n
        ah, al = mul_add(ah, al, ah, al, _0, _0)  # A_{2n} = A_n A_n


def jump_table(ih, il) -> np.ndarray:
    """A new jump table (:func:`fill_jump_table`) of the stream of increment ``(ih, il)``."""
    jt = np.empty(JUMPS, np.uint64)
    _fill_jump_table_python(ih, il, jt)
    return jt


@_jit(internal=True)
def advance(sh, sl, jt, n):
    """The state ``n`` steps (``0 <= n < 2**63``) after ``(sh, sl)``."""
    sh, sl = np.uint64(sh), np.uint64(sl)
    i = 0
    while n > 0:
        if n & 1:
            sh, sl = mul_add(jt[i, 0], jt[i, 1], sh, sl, jt[i, 2], jt[i, 3])
        n >>= 1
        i += 1
    return sh, sl


# ----------------------------------------------------------------------------------------------
# random(): doubles


@_jit(internal=True)
def doubles(sh, sl, ih, il, jt, scale, out, lo, hi):
    """``out[k] = random() * scale`` for ``k`` in ``lo .. hi - 1``: ``hi - lo`` calls of numpy's
    ``random()`` from state ``(sh, sl)``, each times ``scale``; returns the state after them.
    Four lanes start a quarter of the block apart (:func:`advance`) and step together."""
    sh, sl, ih, il = np.uint64(sh), np.uint64(sl), np.uint64(ih), np.uint64(il)
    n = hi - lo
    q = n // LANES
    if q < MIN_LANE:
        for k in range(lo, hi):
            sh, sl = step(sh, sl, ih, il)
            out[k] = (output(sh, sl) >> _S11) * TO_DOUBLE * scale
        return sh, sl
    h1, l1 = advance(sh, sl, jt, q)
    h2, l2 = advance(h1, l1, jt, q)
    h3, l3 = advance(h2, l2, jt, q)
    b1, b2, b3 = lo + q, lo + 2 * q, lo + 3 * q
    for k in range(q):
        sh, sl = step(sh, sl, ih, il)
        h1, l1 = step(h1, l1, ih, il)
        h2, l2 = step(h2, l2, ih, il)
        h3, l3 = step(h3, l3, ih, il)
        out[lo + k] = (output(sh, sl) >> _S11) * TO_DOUBLE * scale
        out[b1 + k] = (output(h1, l1) >> _S11) * TO_DOUBLE * scale
        out[b2 + k] = (output(h2, l2) >> _S11) * TO_DOUBLE * scale
        out[b3 + k] = (output(h3, l3) >> _S11) * TO_DOUBLE * scale
    for k in range(lo + 4 * q, hi):  # the rest, after the last lane
        h3, l3 = step(h3, l3, ih, il)
        out[k] = (output(h3, l3) >> _S11) * TO_DOUBLE * scale
    return h3, l3


@_jit(internal=True)
def next_double(pcg):
    """One ``random()`` from the state array ``pcg`` (:func:`state_of`'s form), advanced in
    place: ``(next64 >> 11) 2**-53``."""
    sh, sl = step(pcg[0], pcg[1], pcg[2], pcg[3])
    pcg[0], pcg[1] = sh, sl
    return (output(sh, sl) >> _S11) * TO_DOUBLE


# ----------------------------------------------------------------------------------------------
# integers(0, d): bounded 32-bit draws


@_jit(internal=True)
def next32(sh, sl, ih, il, has, buf):
    """numpy's ``pcg64_next32``: the kept high half if there is one, else a step, its low half
    returned and its high half kept. Returns ``(sh, sl, has, buf, value)``."""
    if has:
        return sh, sl, _0, buf, buf
    sh, sl = step(sh, sl, ih, il)
    o = output(sh, sl)
    return sh, sl, _1, o >> _S32, o & _M32


@_jit(internal=True)
def bounded_one_by_one(sh, sl, ih, il, has, buf, d, out, lo, hi):
    """``out[lo:hi]`` as numpy's ``integers(0, d, hi - lo)`` draws them from the 32-bit stream
    at ``(sh, sl, has, buf)``, redraws included. Returns the stream after them and the 32-bit
    numbers used."""
    sh, sl, ih, il = np.uint64(sh), np.uint64(sl), np.uint64(ih), np.uint64(il)
    has, buf = np.uint64(has), np.uint64(buf)
    re = np.uint64(d)
    threshold = (_M32 - (re - _1)) % re
    used = 0
    for k in range(lo, hi):
        sh, sl, has, buf, v = next32(sh, sl, ih, il, has, buf)
        used += 1
        x = v * re
        while (x & _M32) < threshold:
            sh, sl, has, buf, v = next32(sh, sl, ih, il, has, buf)
            used += 1
            x = v * re
        out[k] = np.int64(x >> _S32)
    return sh, sl, has, buf, used


@_jit(internal=True)
def bounded(sh, sl, ih, il, has, buf, jt, d, out, lo, hi):
    """``out[lo:hi]``: ``integers(0, d, hi - lo)`` (``2 <= d <= MAX_BOUND``) from the 32-bit
    stream at ``(sh, sl, has, buf)``, two numbers a step in four lanes; where a number would be
    redrawn, the whole block again by :func:`bounded_one_by_one`. Returns the stream after the
    block and the 32-bit numbers used (``hi - lo`` unless some were redrawn)."""
    sh, sl, ih, il = np.uint64(sh), np.uint64(sl), np.uint64(ih), np.uint64(il)
    has, buf = np.uint64(has), np.uint64(buf)
    re = np.uint64(d)
    threshold = (_M32 - (re - _1)) % re
    sh0, sl0, has0, buf0 = sh, sl, has, buf
    k0 = lo
    redraw = False
    if has and hi > lo:  # the kept high half first
        x = buf * re
        redraw = (x & _M32) < threshold
        out[k0] = np.int64(x >> _S32)
        has = _0
        k0 += 1
    q = (hi - k0) // (2 * LANES)  # steps a lane
    if q >= MIN_LANE // 2 and not redraw:
        h1, l1 = advance(sh, sl, jt, q)
        h2, l2 = advance(h1, l1, jt, q)
        h3, l3 = advance(h2, l2, jt, q)
        b1, b2, b3 = k0 + 2 * q, k0 + 4 * q, k0 + 6 * q
        for i in range(q):
            sh, sl = step(sh, sl, ih, il)
            h1, l1 = step(h1, l1, ih, il)
            h2, l2 = step(h2, l2, ih, il)
            h3, l3 = step(h3, l3, ih, il)
            o0, o1, o2, o3 = output(sh, sl), output(h1, l1), output(h2, l2), output(h3, l3)
            a0, c0 = (o0 & _M32) * re, (o0 >> _S32) * re
            a1, c1 = (o1 & _M32) * re, (o1 >> _S32) * re
            a2, c2 = (o2 & _M32) * re, (o2 >> _S32) * re
            a3, c3 = (o3 & _M32) * re, (o3 >> _S32) * re
            redraw |= ((a0 & _M32) < threshold) | ((c0 & _M32) < threshold)
            redraw |= ((a1 & _M32) < threshold) | ((c1 & _M32) < threshold)
            redraw |= ((a2 & _M32) < threshold) | ((c2 & _M32) < threshold)
            redraw |= ((a3 & _M32) < threshold) | ((c3 & _M32) < threshold)
            j = 2 * i
            out[k0 + j], out[k0 + j + 1] = np.int64(a0 >> _S32), np.int64(c0 >> _S32)
            out[b1 + j], out[b1 + j + 1] = np.int64(a1 >> _S32), np.int64(c1 >> _S32)
            out[b2 + j], out[b2 + j + 1] = np.int64(a2 >> _S32), np.int64(c2 >> _S32)
            out[b3 + j], out[b3 + j + 1] = np.int64(a3 >> _S32), np.int64(c3 >> _S32)
        # the last lane's state: its last step's high half was used, and stays as uinteger
        sh, sl, buf = h3, l3, output(h3, l3) >> _S32
        k0 += 8 * q
    if redraw:
        return bounded_one_by_one(sh0, sl0, ih, il, has0, buf0, d, out, lo, hi)
    sh, sl, has, buf, used = bounded_one_by_one(sh, sl, ih, il, has, buf, d, out, k0, hi)
    return sh, sl, has, buf, used + (k0 - lo)


@_jit(internal=True)
def integers(pcg, jt, d, out, lo, hi):
    """``out[lo:hi]``: numpy's ``integers(0, d, hi - lo)`` (``1 <= d <= MAX_BOUND``) from the
    state array ``pcg`` (:func:`state_of`'s form), advanced in place; ``jt`` its
    :func:`jump_table`. ``d = 1`` gives zeros and draws nothing, as numpy."""
    if d == 1:
        for k in range(lo, hi):
            out[k] = 0
        return
    sh, sl, has, buf, _ = bounded(
        pcg[0], pcg[1], pcg[2], pcg[3], pcg[4], pcg[5], jt, d, out, lo, hi
    )
    pcg[0], pcg[1], pcg[4], pcg[5] = sh, sl, has, buf


@_jit(internal=True)
def position32(sh, sl, has, buf, jt, n):
    """The 32-bit stream ``n`` numbers after ``(sh, sl, has, buf)``, no redraw among them
    (``has``/``buf`` as numpy leaves them: a kept high half, else the last one, used)."""
    sh, sl, has, buf = np.uint64(sh), np.uint64(sl), np.uint64(has), np.uint64(buf)
    if n == 0:
        return sh, sl, has, buf
    k = n - 1 if has else n  # numbers from new steps
    sh, sl = advance(sh, sl, jt, k // 2)
    if k % 2 == 1:  # half of a step used: its high half kept
        sh, sl = mul_add(jt[0, 0], jt[0, 1], sh, sl, jt[0, 2], jt[0, 3])
        return sh, sl, _1, output(sh, sl) >> _S32
    if k > 0:
        buf = output(sh, sl) >> _S32
    return sh, sl, _0, buf
