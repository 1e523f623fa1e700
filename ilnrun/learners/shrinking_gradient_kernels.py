"""Shrinking Gradient compiled with numba: Algorithms 1 and 2 as plain loops, the same numbers.

The compiled pass (:func:`sg_rounds`) and the compiled Algorithm-2 test estimates
(:func:`chunk_estimates`) draw the same random numbers, by the same calls in the same order,
from the cell's ``np.random.Generator`` as the numpy code (numba's nopython mode reproduces numpy's
streams for ``random``, ``integers``, ``standard_normal`` and ``uniform``; the multinomial counts
of the test estimates are drawn by numpy itself, between the compiled calls; a coordinate pass
on numpy's PCG64, ``default_rng``'s, makes the same numbers itself, several at a time and each
thread its own block of them: :mod:`pcg64_kernels`), and form every sum in the numpy code's
order (docs/algorithms.md §1.9):

- ``E_t``'s sum ``sum_k sgn(alpha_i) psi(x_i; w_k) psi(x_t; w_k)`` and the ``W x_t`` of the
  ReLU, Fourier and random-net maps are the same BLAS calls (``ddot``, ``dgemv``: the calls
  numba's ``np.dot`` makes, :func:`blas_dot`, :func:`blas_gemv`);
- ``w . x_i`` of a drawn pair is numpy's ``einsum('ij,ij->i')`` inner loop written out
  (:func:`einsum_dot`: two lanes, blocks of eight, lanes added at the end); so are a random-net
  unit's ``w_l . x`` and ``v . relu(W x)`` (:func:`net_psi`);
- the mean over the ``m`` samples of a test estimate is numpy's pairwise sum (:func:`pairwise_sum`).

The index ``i ~ |alpha_i| / |alpha|_1`` of each sample is the numpy code's
``searchsorted(cum, u total, side='right')`` exactly, found from a guide table over the prefix
sums (:func:`guided_search`), the stored numbers read ahead of use (:func:`block_search`); no
number depends on the order of the work or the threads.

So ``FitResult`` and every test estimate are bit-identical to the numpy path's. That these
sums are the numpy build's own is checked on first use in every process (:func:`agrees`): a
build whose sums differ (another BLAS kernel, an ``einsum`` with fused multiply-adds) runs the
numpy path, with a one-line note. ``ILNRUN_NO_NUMBA=1`` forces the numpy path; so does a
Python without numba.

The compilation cache is persistent (:mod:`ilnrun.compiled_cache`: numba's ``cache=True`` with
a digest on every file, damaged files rebuilt, saves locked): numba writes it under
``NUMBA_CACHE_DIR`` when that is set, else to ``__pycache__`` beside this module, else (a
read-only install) to the user's cache directory (``~/.cache/numba``); where nothing is
writable the kernels are compiled in memory in every process.

Only what a run uses is compiled, and once (a first compilation costs seconds: docs/
algorithms.md §1.9, "Compilation cache"). numba removes a branch on ``x is None`` before it
compiles a function for an argument ``x`` that is ``None``, and only then: coordinate features
pass ``param=None`` (:func:`map_param`) and the other maps ``coord=None`` (:func:`map_coord`),
so that a pass compiles its own map's draws only; a serial pass passes ``blocks=None`` and
``work=None``, a coordinate pass on the kernels' PCG64 stream ``rng=None``, so that neither the
parallel search nor the generator's calls are compiled where they do not run. Functions called
from compiled code only are compiled without numba's CPython wrapper (``internal=True``), and
every kernel with the same numba options (:data:`ilnrun.compiled_cache.OPTIONS`): numba compiles
its own functions (``np.empty``, a generator's methods) once for each set of options of their
callers. min, max, ``int()``, ``np.dot`` and ``np.arange`` are written out (see :data:`ZERO`):
numba compiles each of its own as a function of its own.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import warnings

import numpy as np

from ..compiled_cache import decorator
from .compiled import NO_NUMBA_ENV, switched_off
from .compiled import SG_CHECKS as PROBES
from .compiled import SG_ESTIMATE_CHECKS as ESTIMATE_PROBES

COORDINATE, RELU, FOURIER, RANDOM_NET = 0, 1, 2, 3
# maps whose Algorithm-2 test estimates run compiled here
ESTIMATED_KINDS = (RELU, FOURIER, RANDOM_NET)
SQRT2 = math.sqrt(2.0)
DIVERGENCE_BOUND = 1e6  # = base.DIVERGENCE_BOUND (checked by the tests)
# numpy's einsum sums w . x of a single pair in buffered pieces of 8192 products: up to that
# dimension it is one piece (einsum_dot); beyond it ReLU, Fourier and random-net features (whose
# hidden width h is summed the same way) run as numpy code
MAX_D = 8192
# 0 as an argument of a compiled function called from compiled code: a constant argument is
# typed as its value (``Literal[int](0)``) and compiles the callee once more, for that value
ZERO = np.int64(0)
# (likewise 1, False, and the coordinate map's kind in run_blocks: a global int or bool is a
# constant too, a numpy scalar is not)
ONE, FALSE, COORDINATE_KIND = np.int64(1), np.bool_(False), np.int64(COORDINATE)
# min, max and int() are written out in the kernels: ``b if b < a else a`` is Python's
# ``min(a, b)`` (and numba's: NaN included), ``b if b > a else a`` its ``max(a, b)``, and
# ``np.int64(x)`` its ``int(x)`` (truncation). numba compiles its own min, max and int as
# functions, once for each type and set of options: a tenth of a second each in a first
# compilation.
# the search runs this many keys ahead of the gather (block_search: the prefetches in flight)
PREFETCH_AHEAD = 32
# a threaded coordinate pass (threaded_work): blocks of a round per thread, the control words
# (the next block to claim, the blocks done, stop, the round's t, n, guide top, guided), and the
# atomic reads a waiting thread makes before it yields its core at each further look
BLOCKS_PER_THREAD = 4
NEXT, DONE, STOP, T_, N_, TOP, GUIDED = range(7)
SPINS = 2000

try:
    if switched_off():
        raise ImportError(f"{NO_NUMBA_ENV} is set")
    # numba's own thread pool for the parallel loops (fit's threads), unless the user chose one:
    # an OpenMP pool would be pinned to one thread by a cell's limits
    # (ilnrun.numeric_env.one_thread)
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import numba

        # numba's np.dot calls scipy's BLAS: load it now, before a cell pins the native
        # thread pools to one thread (ilnrun.numeric_env.one_thread lists the loaded libraries)
        import scipy.linalg.cython_blas  # noqa: F401
    _WHY_NOT = ""
except ImportError as exc:  # a Python that numba does not support yet, or switched off
    numba = None
    _WHY_NOT = str(exc)

# numpy's PCG64 streams written out (imports numba: after the threading layer is chosen above)
from . import pcg64_kernels as pcg  # noqa: E402

# numba.njit with the on-disk cache of compiled_cache.jit (damaged files rebuilt, saves locked;
# compiled in memory where no cache directory is writable); the plain function or its python
# twin where numba is absent. @_jit(inline="always") passes numba's options; internal=True
# (called from compiled code only) and python= are compiled_cache.jit's
_jit = decorator(numba is not None)


if numba is not None:
    from llvmlite import ir as _llvm
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic

    @_intrinsic
    def prefetch(typingctx, address):
        """Start reading the memory at ``address`` into the cache (LLVM's ``prefetch``: a hint,
        it never faults and changes no number)."""

        def codegen(context, builder, signature, args):
            i8p, i32 = _llvm.IntType(8).as_pointer(), _llvm.IntType(32)
            fnty = _llvm.FunctionType(_llvm.VoidType(), [i8p, i32, i32, i32])
            fn = _cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
            # read, keep in all cache levels, data cache
            builder.call(fn, [builder.inttoptr(args[0], i8p), i32(0), i32(3), i32(1)])
            return context.get_dummy_value()

        return numba.types.void(numba.types.intp), codegen

    def _element(context, builder, signature, args):
        """The address of ``args[0][args[1]]`` (a 1-d int64 array, an index in range)."""
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        return _cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)

    @_intrinsic
    def atomic_add(typingctx, arr, i, v):
        """``arr[i] += v`` as one atomic step (sequentially consistent); the value before."""

        def codegen(context, builder, signature, args):
            ptr = _element(context, builder, signature, args)
            return builder.atomic_rmw("add", ptr, args[2], "seq_cst")

        return numba.types.int64(arr, numba.types.intp, numba.types.int64), codegen

    @_intrinsic
    def atomic_load(typingctx, arr, i):
        """``arr[i]``, read with acquire order: what was written before the store that wrote
        it (:func:`atomic_store`) is seen after."""

        def codegen(context, builder, signature, args):
            return builder.load_atomic(_element(context, builder, signature, args), "acquire", 8)

        return numba.types.int64(arr, numba.types.intp), codegen

    @_intrinsic
    def atomic_store(typingctx, arr, i, v):
        """``arr[i] = v``, written with release order (see :func:`atomic_load`)."""

        def codegen(context, builder, signature, args):
            ptr = _element(context, builder, signature, args)
            builder.store_atomic(args[2], ptr, "release", 8)
            return context.get_dummy_value()

        return numba.types.void(arr, numba.types.intp, numba.types.int64), codegen

    @_intrinsic
    def blas_dot(typingctx, a, b, n):
        """``np.dot(a[:n], b[:n])`` of two C-contiguous float64 vectors (``1 <= n < 2**31``):
        the BLAS ``ddot`` call numba's ``np.dot`` makes (``numba.np.linalg.call_xxdot``), without
        what numba compiles around it (its own function, size checks, a second dispatch) for
        every signature and caller; the same number."""
        from numba.np import linalg

        def codegen(context, builder, signature, args):
            linalg.ensure_blas()
            f64 = numba.types.float64
            x = context.make_array(signature.args[0])(context, builder, args[0])
            y = context.make_array(signature.args[1])(context, builder, args[1])
            out = _cgutils.alloca_once(builder, context.get_value_type(f64))
            linalg.call_xxdot(context, builder, False, f64, args[2], x.data, y.data, out)
            return builder.load(out)

        return numba.types.float64(a, b, numba.types.intp), codegen

    @_intrinsic
    def blas_gemv(typingctx, W, lo, hi, x, out):
        """``out[:hi - lo] = np.dot(W[lo:hi, :len(x)], x)`` for a C-contiguous float64 matrix
        ``W`` (``lo < hi``, ``1 <= len(x) <= W.shape[1]``, sizes below ``2**31``): the BLAS
        ``dgemv`` call numba's and numpy's products make (``numba.np.linalg.call_xxgemv``: the
        transposed product of the rows in place, ``lda = W.shape[1]``: a Fourier map's rows
        with their phase after them, as numpy's ``W[:, :-1] @ x``), into ``out`` (``beta = 0``:
        ``out``'s numbers are not read); the same numbers, without numba's ``np.dot``, its
        output array and a copy of the rows compiled around it."""
        from numba.np import linalg

        def codegen(context, builder, signature, args):
            linalg.ensure_blas()
            wty, f64 = signature.args[0], numba.types.float64
            w = context.make_array(wty)(context, builder, args[0])
            v = context.make_array(signature.args[3])(context, builder, args[3])
            o = context.make_array(signature.args[4])(context, builder, args[4])
            lda = _cgutils.unpack_tuple(builder, w.shape)[1]
            cols = _cgutils.unpack_tuple(builder, v.shape)[0]
            rows = builder.sub(args[2], args[1])
            zero = context.get_constant(numba.types.intp, 0)
            first = _cgutils.get_item_pointer(
                context, builder, wty, w, [args[1], zero], wraparound=False
            )
            # numba_xxgemv(kind, trans, m, n, alpha, a, lda, x, beta, y), as call_xxgemv
            char, intp = _llvm.IntType(8), context.get_value_type(numba.types.intp)
            vp = _llvm.IntType(8).as_pointer()
            fnty = _llvm.FunctionType(
                _llvm.IntType(32), [char, char, intp, intp, vp, vp, intp, vp, vp, vp]
            )
            fn = _cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemv")
            alpha = linalg.make_constant_slot(context, builder, f64, 1.0)
            beta = linalg.make_constant_slot(context, builder, f64, 0.0)
            res = builder.call(
                fn,
                (
                    char(ord(linalg.get_blas_kind(f64))), char(ord("t")), cols, rows,
                    builder.bitcast(alpha, vp), builder.bitcast(first, vp), lda,
                    builder.bitcast(v.data, vp), builder.bitcast(beta, vp),
                    builder.bitcast(o.data, vp),
                ),
            )  # fmt: skip
            linalg.check_blas_return(context, builder, res)
            return context.get_dummy_value()

        intp = numba.types.intp
        return numba.types.void(W, intp, intp, x, out), codegen

    @_intrinsic
    def empty(typingctx, shape, dtype):
        """``np.empty(shape, dtype)`` in C order (``shape`` an integer or a tuple of integers,
        ``dtype`` a numpy scalar type such as ``np.float64``): the code numba's ``np.empty``
        lowers to (``arrayobj._parse_empty_args``, its check of negative sizes, and
        ``arrayobj._empty_nd_impl``, its allocation), in place. numba compiles its ``np.empty``
        as a function of its own, with its own machine code, for every signature and every set
        of options of its callers: 7 to 11 of them in a first compilation of a map family's
        passes, about 0.03 CPU-s each."""
        from numba.np import arrayobj

        if isinstance(shape, numba.types.Integer):
            ndim = 1
        elif isinstance(shape, numba.types.UniTuple) and isinstance(
            shape.dtype, numba.types.Integer
        ):
            ndim = shape.count
        else:
            return None
        if not isinstance(dtype, numba.types.NumberClass):
            return None
        arrty = numba.types.Array(dtype.instance_type, ndim, "C")

        def codegen(context, builder, signature, args):
            _, shapes = arrayobj._parse_empty_args(context, builder, signature, args)
            return arrayobj._empty_nd_impl(context, builder, arrty, shapes)._getvalue()

        return arrty(shape, dtype), codegen

    @_intrinsic
    def flat(typingctx, X):
        """``X.reshape(X.size)`` of a C-contiguous array: a 1-d view of its numbers (the same
        memory, kept alive by the view), made in place. numba's ``reshape`` and ``ravel``
        compile functions of their own for every caller."""
        from numba.core.imputils import impl_ret_borrowed
        from numba.np import arrayobj

        if not (isinstance(X, numba.types.Array) and X.layout == "C"):
            return None
        retty = numba.types.Array(X.dtype, 1, "C")

        def codegen(context, builder, signature, args):
            ary = context.make_array(X)(context, builder, args[0])
            out = context.make_array(retty)(context, builder)
            arrayobj.populate_array(
                out, data=ary.data, shape=[ary.nitems], strides=[ary.itemsize],
                itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent,
            )  # fmt: skip
            return impl_ret_borrowed(context, builder, retty, out._getvalue())

        return retty(X), codegen

    @_intrinsic
    def yield_cpu(typingctx):
        """Let another thread run on this core (``sched_yield``): a waiting thread's courtesy."""

        def codegen(context, builder, signature, args):
            fnty = _llvm.FunctionType(_llvm.IntType(32), [])
            builder.call(_cgutils.get_or_insert_function(builder.module, fnty, "sched_yield"), [])
            return context.get_dummy_value()

        return numba.types.void(), codegen

else:

    def prefetch(address):
        """(numba absent: never called)"""

    def blas_dot(a, b, n):
        """(numba absent: never called)"""

    def blas_gemv(W, lo, hi, x, out):
        """(numba absent: never called)"""

    def atomic_add(arr, i, v):
        """(numba absent: never called)"""

    def atomic_load(arr, i):
        """(numba absent: never called)"""

    def atomic_store(arr, i, v):
        """(numba absent: never called)"""

    def yield_cpu():
        """(numba absent: never called)"""

    def empty(shape, dtype):
        """``np.empty(shape, dtype)`` (numba absent: never called)"""
        return np.empty(shape, dtype)

    def flat(X):
        """``X.reshape(X.size)`` (numba absent: never called)"""
        return X.reshape(X.size)


# ----------------------------------------------------------------------------------------------
# sums in numpy's order


@_jit(internal=True)
def einsum_dot(x, w, n):
    """``sum_{k<n} x[k] w[k]`` in the order of numpy's ``einsum('ij,ij->i')`` inner loop: two
    lanes (even and odd k), eight products a step added from the last to the first into the
    lanes, the rest one pair a step, then ``lane0 + lane1``."""
    l0 = 0.0
    l1 = 0.0
    k = 0
    while n - k >= 8:
        a = x[k + 6] * w[k + 6] + l0
        b = x[k + 7] * w[k + 7] + l1
        a = x[k + 4] * w[k + 4] + a
        b = x[k + 5] * w[k + 5] + b
        a = x[k + 2] * w[k + 2] + a
        b = x[k + 3] * w[k + 3] + b
        l0 = x[k] * w[k] + a
        l1 = x[k + 1] * w[k + 1] + b
        k += 8
    while k < n:
        l0 = x[k] * w[k] + l0
        if k + 1 < n:
            l1 = x[k + 1] * w[k + 1] + l1
        k += 2
    return l0 + l1


@_jit(internal=True)
def block_sum(a, lo, n):
    """``sum(a[lo:lo + n])`` for ``n <= 128`` as numpy sums a block: one by one below eight,
    else eight accumulators, combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``,
    then the rest one by one."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@_jit(internal=True)
def pairwise_sum(a, lo, n):
    """``sum(a[lo:lo + n])`` in numpy's pairwise order: a block of more than 128 is split at
    ``h = n // 2 - (n // 2) % 8`` into ``sum(first h) + sum(rest)``, recursively; blocks of at
    most 128 by :func:`block_sum`. (The recursion is unrolled onto a stack: numba's cache does
    not keep recursive functions.)"""
    los = empty(64, np.int64)
    ns = empty(64, np.int64)
    left_done = empty(64, np.int64)  # (0 / 1: numba compiles bool arrays' code for seconds)
    left = empty(64, np.float64)
    sp = 0  # split blocks waiting for their halves
    lo_k, k = lo, n
    while True:
        while k > 128:  # go down the first halves
            los[sp], ns[sp], left_done[sp] = lo_k, k, 0
            sp += 1
            k = k // 2 - (k // 2) % 8
        res = block_sum(a, lo_k, k)
        while sp > 0 and left_done[sp - 1] != 0:  # both halves done: add them
            sp -= 1
            res = left[sp] + res
        if sp == 0:
            return res
        left[sp - 1], left_done[sp - 1] = res, 1  # first half done: now the second
        h = ns[sp - 1] // 2 - (ns[sp - 1] // 2) % 8
        lo_k, k = los[sp - 1] + h, ns[sp - 1] - h


# ----------------------------------------------------------------------------------------------
# feature maps: the draws of FeatureMap.sample and the values of FeatureMap.pairs / point.
# ``param`` is the map's number (:func:`map_param`): ``None`` for coordinate features, the
# bandwidth ``sigma`` for Fourier, the hidden width ``h`` for random-net, unused for ReLU;
# ``net`` is the hidden width of a random-net map, ``None`` for the others (:func:`map_net`).
# numba removes the branches on ``param is None`` and ``net is None`` before it compiles for a
# ``None`` argument: the draws and ``psi(x_t; w)`` of a pass compile its map family's code only.


# The generator's draws through one compiled function each: numba compiles a generator method
# into every compiled function that calls it, so the passes and the Algorithm-2 estimates share
# these instead (the same calls, the same numbers). Every argument of a generator method is
# given, its defaults too: numba types a call with defaults left out for the arguments given
# and lowers it for all of them, and compiled the method twice (the same code).


@_jit(internal=True)
def draw_indices(rng, d, n):
    """``rng.integers(0, d, n)``."""
    return rng.integers(0, d, n, np.int64, False)


@_jit(internal=True)
def draw_gaussian(rng, n, d):
    """``rng.standard_normal((n, d))``. (numba's array form: one ``standard_normal()`` after the
    other written out in a loop compiled a little less, but the passes that draw many ran ~4%
    slower.)"""
    return rng.standard_normal((n, d), np.float64)


@_jit(internal=True)
def draw_random(rng):
    """``rng.random()``."""
    return rng.random(None, np.float64)


@_jit(internal=True)
def draw_phases(rng, n):
    """``rng.uniform(0.0, 2 pi, n)`` (Fourier features' phases): numpy's (and numba's)
    ``low + (high - low) random()`` for each, written out on ``random()`` (the same numbers
    and stream), which the passes compile anyway: numba's ``uniform`` is three more functions."""
    low, high = 0.0, 2.0 * np.pi
    scale = high - low
    out = empty(n, np.float64)
    for i in range(n):
        out[i] = low + scale * draw_random(rng)
    return out


@_jit(internal=True)
def draw_w(rng, kind, d, n, param, net, coord):
    """``n`` draws ``w ~ mu`` as ``FeatureMap.sample`` draws them: coordinate indices in ``wi``,
    ReLU / Fourier / random-net parameters in the rows of ``Wf`` (Fourier: the phase in the last
    column; random-net: ``W`` row-major, then ``v``). Each map's code sits under an argument
    that is ``None`` for the other maps (:func:`map_coord`): numba compiles the map's own."""
    if coord is not None:  # coordinate features
        return draw_indices(rng, d, n), empty((0, 0), np.float64)
    if param is None:  # (not reached: coordinate features have coord)
        return empty(0, np.int64), empty((0, 0), np.float64)
    if net is not None:
        h = np.int64(net)
        return empty(0, np.int64), draw_gaussian(rng, n, h * d + h)
    if kind == RELU:
        return empty(0, np.int64), draw_gaussian(rng, n, d)
    # the draws of FeatureMap.sample in its order (the Gaussian rows, then the phases), stored
    # by loops: an array assigned to a slice compiles numba's shape-mismatch error (its message
    # formatting) once per assignment, seconds of a first compilation
    g = draw_gaussian(rng, n, d)
    Wf = empty((n, d + 1), np.float64)
    for i in range(n):
        for c in range(d):
            Wf[i, c] = g[i, c] / param
    phases = draw_phases(rng, n)
    for i in range(n):
        Wf[i, d] = phases[i]
    return empty(0, np.int64), Wf


@_jit(internal=True)
def columns(A, lo, hi, cols):
    """The numbers of ``A[:, lo:hi]`` in row-major order as a C-contiguous array of ``cols``
    columns (``hi - lo`` a multiple of ``cols``): ``np.ascontiguousarray(A[:, lo:hi])``
    reshaped, by loops (the same numbers; numba compiles loops in a fraction of the time it
    takes for ``ascontiguousarray`` and ``reshape``)."""
    n, w = A.shape[0], hi - lo
    out = empty(n * w, np.float64)
    for i in range(n):
        for c in range(w):
            out[i * w + c] = A[i, lo + c]
    return out.reshape(n * w // cols, cols)


@_jit(internal=True)
def relu(v):
    """``max(v, 0)`` as ``np.maximum(v, 0.0)`` (nan and -0.0 pass through)."""
    return v if (v >= 0.0 or v != v) else 0.0


@_jit(internal=True)
def wx(x, W, lo, hi, out):
    """``out[:hi - lo] = W[lo:hi] x``: ``ddot`` for one row, ``gemv`` for more (numpy's
    ``matmul`` turns a one-row product into a dot)."""
    if hi - lo == 1:
        out[0] = blas_dot(W[lo], x, len(x))
    else:
        blas_gemv(W, lo, hi, x, out)


@_jit(internal=True)
def net_unit(x, w, d, l):
    """``relu(W_l . x)`` of a random-net draw ``w`` (``W`` row-major in ``w[:h d]``), the sum in
    ``einsum('ij,ij->i')``'s order (``RandomNet.pairs``)."""
    return relu(einsum_dot(x, w[l * d : (l + 1) * d], d))


@_jit(internal=True)
def net_psi(x, w, d, h):
    """``2 relu(v . relu(W x) / sqrt(h))`` for one random-net draw ``w = (W, v)``, as
    ``RandomNet.pairs`` forms it: every ``W_l . x`` and then ``v . relu(W x)`` in the order of
    numpy's ``einsum('ij,ij->i')`` (:func:`einsum_dot`'s lanes, with the hidden unit ``l``
    computed where that loop reads its ``l``-th number)."""
    o = h * d
    l0 = 0.0
    l1 = 0.0
    k = ZERO  # (not the constant 0: net_unit would be compiled for it too)
    while h - k >= 8:
        a = w[o + k + 6] * net_unit(x, w, d, k + 6) + l0
        b = w[o + k + 7] * net_unit(x, w, d, k + 7) + l1
        a = w[o + k + 4] * net_unit(x, w, d, k + 4) + a
        b = w[o + k + 5] * net_unit(x, w, d, k + 5) + b
        a = w[o + k + 2] * net_unit(x, w, d, k + 2) + a
        b = w[o + k + 3] * net_unit(x, w, d, k + 3) + b
        l0 = w[o + k] * net_unit(x, w, d, k) + a
        l1 = w[o + k + 1] * net_unit(x, w, d, k + 1) + b
        k += 8
    while k < h:
        l0 = w[o + k] * net_unit(x, w, d, k) + l0
        if k + 1 < h:
            l1 = w[o + k + 1] * net_unit(x, w, d, k + 1) + l1
        k += 2
    return 2.0 * relu((l0 + l1) / math.sqrt(h))


@_jit(internal=True)
def net_point(x, W, V, lo, hi, d, h, out):
    """``out[j] = psi(x; w_{lo + j})`` for random-net draws stored as ``W`` (``h`` rows of ``d``
    per draw, C-contiguous) and ``V`` (a row ``v`` per draw), as ``RandomNet.point`` forms them:
    ``W x`` by one BLAS call (:func:`wx`), ``v . relu(W x)`` by :func:`einsum_dot`."""
    n = hi - lo
    pre = empty(n * h, np.float64)
    wx(x, W, lo * h, hi * h, pre)
    root_h = math.sqrt(h)
    for j in range(n):
        for l in range(j * h, (j + 1) * h):
            pre[l] = relu(pre[l])
        out[j] = 2.0 * relu(einsum_dot(V[lo + j], pre[j * h : (j + 1) * h], h) / root_h)


@_jit(internal=True)
def pair(kind, param, X, i, wi, Wf, j, d):
    """``psi(X[i]; w_j)`` (one element of ``FeatureMap.pairs``). (The maps' branches are kept
    here, whatever the map: with the random-net branch removed for ReLU features, the compiled
    search of a ReLU pass ran ~6% slower.)"""
    if param is None:
        return X[i, wi[j]]
    if kind == RELU:
        return SQRT2 * relu(einsum_dot(X[i], Wf[j], d))
    if kind == RANDOM_NET:
        # (int(), not np.int64(): with the cast written out the ReLU search ran ~3% slower)
        return net_psi(X[i], Wf[j], d, int(param))
    return SQRT2 * math.cos(einsum_dot(X[i], Wf[j], d) + Wf[j, d])


@_jit(internal=True)
def pairs(kind, param, X, rows, wi, Wf, j0, d, order, out):
    """``out[k] = psi(X[rows[k]]; w_{j0 + k})`` (``FeatureMap.pairs``), evaluated in the order
    ``order`` (rows nearly ascending: a large ``X`` is then read nearly sequentially)."""
    for k in order:
        out[k] = pair(kind, param, X, rows[k], wi, Wf, j0 + k, d)


@_jit(internal=True)
def psi_point(kind, param, net, coord, x, wi, Wf, d):
    """``psi(x; w_j)`` for every draw (:func:`draw_w`; ``FeatureMap.point``: ``W x`` by BLAS,
    as numpy)."""
    n = Wf.shape[0]
    if coord is not None:  # coordinate features: x[wi]
        v = empty(len(wi), np.float64)
        for j in range(len(wi)):
            v[j] = x[wi[j]]
        return v
    if param is None:  # (not reached: coordinate features have coord)
        return empty(0, np.float64)
    if net is not None:
        h = np.int64(net)
        v = empty(n, np.float64)
        # the output weights contiguous, as the Doubly SGD / Fixed-Random passes store them:
        # one compiled net_point for both
        W, V = columns(Wf, ZERO, h * d, d), columns(Wf, h * d, h * d + h, h)
        net_point(x, W, V, ZERO, n, d, h, v)
        return v
    v = empty(n, np.float64)
    if kind == RELU:
        blas_gemv(Wf, ZERO, n, x, v)
        for j in range(len(v)):
            v[j] = SQRT2 * relu(v[j])
        return v
    blas_gemv(Wf, ZERO, n, x, v)  # (the first d numbers of each row, as numpy's W[:, :-1] @ x)
    for j in range(len(v)):
        v[j] = SQRT2 * math.cos(v[j] + Wf[j, d])
    return v


@_jit(internal=True)
def upper_bound(cum, n, key):
    """``cum[:n].searchsorted(key, side='right')``: the number of ``cum[:n]`` at most ``key``
    (a binary search without branches on the data)."""
    if n == 0:
        return 0
    base, length = 0, n
    while length > 1:
        half = length >> 1
        base = base + half if cum[base + half] <= key else base
        length -= half
    return base + (1 if cum[base] <= key else 0)


# ----------------------------------------------------------------------------------------------
# the search of a round: a guide table over the prefix sums
#
# i = upper_bound(cum, n, key) for m keys a round. A bucket function f(x) = int(min(x scale,
# c)) is monotone in x (a product with scale > 0, rounded, clamped, then truncated), so for the
# key's bucket b = f(key): every cum[i] with f(cum[i]) < b is below the key, and every cum[i]
# above it has f(cum[i]) >= b. With G[b] = #{i < n: f(cum[i]) < b}, the answer is G[b] plus the
# cum[i] from G[b] on that are at most the key: a few (scale puts about one prefix sum in a
# bucket). This is upper_bound exactly, whatever f rounds: only the time depends on scale. A key
# is clamped to the bucket above the last prefix sum's (c = top + 1, G[top + 1] = n): every
# prefix sum is below it. cum is append-only, so G only grows at its end (a round adds one
# entry); it is built again when the prefix sums outgrow the scale (about every doubling) or
# were recomputed (a rescale).


@_jit(inline="always")
def bucket_of(x, scale, last):
    """The guide's bucket of ``x >= 0``: ``min(int(x scale), last)`` (monotone in ``x``)."""
    v = x * scale
    return np.int64(last if last < v else v)


@_jit(internal=True)
def guide_extend(cum, lo, n, scale, G, top):
    """Add ``cum[lo:n]`` to the guide whose highest filled bucket is ``top``; returns the new
    ``top``. ``G[b]`` becomes the first ``i`` with ``bucket_of(cum[i]) >= b`` for every
    ``b <= top`` (buckets above ``top`` start at ``n``)."""
    last = float(len(G) - 1)
    for i in range(lo, n):
        c = bucket_of(cum[i], scale, last)
        while top < c:
            top += 1
            G[top] = i
    return top


@_jit(internal=True)
def guide_update(cum, n, total, G, guide, state):
    """The guide over ``cum[:n]`` (``total = cum[n]``, ``0 < total``) at the start of a round:
    ``guide = [U, top, covered]`` and ``state[3] = scale`` carry it between rounds and calls
    (``covered > n``: build it again). Built with ``U = max(n, 64)`` buckets up to ``total``,
    about one prefix sum a bucket; built again once ``total`` has doubled (keys would pass the
    last bucket) or ``n`` has (buckets would fill up). ``len(G) >= 2 max(T, 64) + 2``.
    Returns whether the guide is used (a scale that is not a finite positive number, for a
    ``total`` near the ends of the float range: no; the round searches by bisection)."""
    U, top, covered, scale = guide[0], guide[1], guide[2], state[3]
    if covered > n or not (total * scale <= 2.0 * U) or n > 2 * U:
        U = 64 if n < 64 else n  # max(n, 64)
        scale = U / total
        top, covered = -1, 0
    if not (0.0 < scale < math.inf and total < math.inf):
        guide[2] = n + 1  # build again next round
        return False
    top = guide_extend(cum, covered, n, scale, G, top)
    G[top + 1] = n  # the bucket of every key past the last prefix sum (guided_search)
    guide[0], guide[1], guide[2], state[3] = U, top, n, scale
    return True


@_jit(inline="always")
def guided_search(cum, n, key, G, top1, scale):
    """``upper_bound(cum, n, key)`` (``0 <= key <= cum[n]``, every ``cum[i]`` from ``n + 1`` on
    ``+inf``: :func:`sg_rounds`) from the guide (``top1 = top + 1``, ``G[top + 1] = n``): the
    key's bucket's first index ``h`` (a key past the last prefix sum's bucket: ``n``), then the
    prefix sums from ``h`` on that are at most the key, four compared at once (``cum`` ascends
    to the ``+inf`` past its end, so the comparisons that hold come first: their count is the
    step, with no branch on the data), more one by one (rare: a bucket with more); clamped to
    ``n`` (``cum[n] = total`` is at most a key that rounded up to it). (Indices are unsigned
    here: none is negative, and numba then adds no wrap-around to the reads.)"""
    v = key * scale
    h = G[np.uint64(top1 if top1 < v else v)]
    c = (cum[np.uint64(h)] <= key) + (cum[np.uint64(h + 1)] <= key)
    c += (cum[np.uint64(h + 2)] <= key) + (cum[np.uint64(h + 3)] <= key)
    h += c
    if c == 4:
        while cum[np.uint64(h)] <= key:
            h += 1
    return n if n < h else h


# ----------------------------------------------------------------------------------------------
# one round's search and gather, by blocks of its m samples


@_jit(internal=True)
def block_search(
    lo, hi, m, kind, param, X, cum, n, u, total, systematic, r, wi, Wf, d, sgn, G, top, scale,
    guided, hs, signed,
):  # fmt: skip
    """``signed[k] = psi(x_i; w_k) sgn[i]`` with ``i = upper_bound(cum, n, key_k)`` for the
    samples ``k`` in ``lo .. hi - 1`` of a round (each computed alone: the same numbers by any
    number of blocks), the keys ``u[k]`` (iid) or ``(k / m + r) total`` (systematic, written
    into ``u``). By chunks of ``PREFETCH_AHEAD`` samples: the chunk's indices are searched
    (``hs``) and the processor asked to start reading each pair's stored numbers (a prefetch, a
    hint that changes no number), then the chunk before it is gathered, its numbers arrived or
    on their way: many reads from memory are in flight at once, whatever their order."""
    if systematic:
        for k in range(lo, hi):
            u[k] = (k / m + r) * total
    top1 = float(top + 1)
    Xf = flat(X)  # (C-contiguous: sg_rounds' caller makes it so)
    base = X.ctypes.data
    for c0 in range(lo, hi + PREFETCH_AHEAD, PREFETCH_AHEAD):
        c1 = c0 + PREFETCH_AHEAD
        c1 = hi if hi < c1 else c1
        if guided:
            for k in range(c0, c1):
                hs[k] = guided_search(cum, n, u[k], G, top1, scale)
        else:
            for k in range(c0, c1):
                hs[k] = upper_bound(cum, n, u[k])
        for k in range(c0, c1):  # the pair's number; a dense map's row: its first line
            prefetch(base + 8 * (hs[k] * d + (wi[k] if param is None else 0)))
        k0 = c0 - PREFETCH_AHEAD
        for k in range(k0 if k0 > lo else lo, hi if hi < c0 else c0):
            h = hs[k]
            if param is None:  # (unsigned indices: no wrap-around, as in guided_search)
                signed[np.uint64(k)] = Xf[np.uint64(h * d + wi[k])] * sgn[np.uint64(h)]
            else:
                signed[k] = pair(kind, param, X, h, wi, Wf, k, d) * sgn[h]


@_jit(internal=True)
def block_draws(b, lo, hi, X, t, total, keys, ih, il, jt, starts, ends, u, wi, psi):
    """The draws of block ``b`` (samples ``lo .. hi - 1``) of a coordinate round from numpy's
    PCG64 stream (:mod:`pcg64_kernels`): with ``keys``, the iid keys ``u[k] = random() total``
    from ``starts[b, :2]`` (the stream ``lo`` doubles into the round); the coordinates
    ``wi[k] = integers(0, d)`` from the 32-bit stream at ``starts[b, 2:]`` (``lo`` numbers into
    the round's integers), and ``psi[k] = X[t, wi[k]]``. ``ends[b]``: the 32-bit stream after
    the block and the numbers it used (more than ``hi - lo`` if one was redrawn)."""
    if keys:
        pcg.doubles(starts[b, 0], starts[b, 1], ih, il, jt, total, u, lo, hi)
    sh, sl, has, buf, used = pcg.bounded(
        starts[b, 2], starts[b, 3], ih, il, starts[b, 4], starts[b, 5], jt, X.shape[1], wi, lo, hi
    )
    ends[b, 0], ends[b, 1], ends[b, 2], ends[b, 3], ends[b, 4] = sh, sl, has, buf, used
    for k in range(lo, hi):
        psi[k] = X[t, wi[k]]


def _blocks_parallel(
    blocks, m, kind, param, X, cum, n, u, total, systematic, r, wi, Wf, d, sgn, G, top, scale,
    guided, hs, signed,
):  # fmt: skip
    """:func:`block_search` for ``blocks`` blocks of a round's samples, in parallel (numba's
    threads; the draws were made before, in stream order)."""
    for b in numba.prange(blocks):
        lo, hi = b * m // blocks, (b + 1) * m // blocks
        if lo < hi:
            block_search(
                lo, hi, m, kind, param, X, cum, n, u, total, systematic, r, wi, Wf, d, sgn, G,
                top, scale, guided, hs, signed,
            )  # fmt: skip


blocks_parallel = _jit(_blocks_parallel, parallel=True, internal=True)


# ----------------------------------------------------------------------------------------------
# a threaded coordinate pass: threads that stay for the whole call and take blocks as they come
#
# numba's parallel loop starts and joins its threads at every call: about 60 us a round on the
# 2-core machine, a fifth of a round's work at m = 50 000 on two threads. Here the threads of a
# call (sg_worker, started by the caller) wait between rounds; the main thread (sg_rounds)
# publishes a round (its numbers, then NEXT = 0), every thread claims blocks by an atomic
# increment of NEXT and counts those it finished in DONE, and the main thread goes on once DONE
# is the number of blocks. A thread that is not running (a busy machine) claims nothing: the
# others take its blocks. Each block's numbers do not depend on which thread made them.


def threaded_work(m: int, blocks: int, stream: np.ndarray) -> tuple:
    """The arrays a threaded coordinate pass shares between its threads (``work`` of
    :func:`sg_rounds` and :func:`sg_worker`): keys, ``psi(x_t; w)``, indices, products,
    coordinates, the jump table of ``stream``, each block's stream starts and ends, the control
    words (``NEXT`` closed: no round published) and the round's ``total, r, scale``."""
    ctl = np.zeros(8, np.int64)
    ctl[NEXT] = blocks
    return (
        np.empty(m), np.empty(m), np.empty(m, np.int64), np.empty(m), np.empty(m, np.int64),
        pcg.jump_table(stream[2], stream[3]), np.empty((blocks, 6), np.uint64),
        np.empty((blocks, 5), np.uint64), ctl, np.zeros(4),
    )  # fmt: skip


@_jit(internal=True)
def run_blocks(work, X, cum, sgn, G, m, nb, systematic):
    """Claim blocks of the round published in ``work`` and make them (:func:`block_draws`,
    :func:`block_search`) until none is left to claim. A claimed block holds the round open
    (``DONE`` stays short of ``nb``), so the round's numbers read after the claim are its own."""
    u, psi, hs, signed, wi, jt, starts, ends, ctl, ctlf = work
    Wf = empty((0, 0), np.float64)
    while atomic_load(ctl, NEXT) < nb:
        b = atomic_add(ctl, NEXT, 1)
        if b >= nb:
            break
        t, n, top, guided = ctl[T_], ctl[N_], ctl[TOP], ctl[GUIDED] != 0
        total, r, scale = ctlf[0], ctlf[1], ctlf[2]
        lo, hi = b * m // nb, (b + 1) * m // nb
        block_draws(b, lo, hi, X, t, total, not systematic, jt[0, 2], jt[0, 3], jt, starts, ends,
                    u, wi, psi)  # fmt: skip
        block_search(
            lo, hi, m, COORDINATE_KIND, None, X, cum, n, u, total, systematic, r, wi, Wf,
            X.shape[1], sgn, G, top, scale, guided, hs, signed,
        )  # fmt: skip
        atomic_add(ctl, DONE, 1)


@_jit(nogil=True)
def sg_worker(work, X, cum, sgn, G, m, nb, systematic):
    """A thread of a threaded coordinate pass: makes blocks of each round the main thread
    publishes (:func:`run_blocks`) until it sets ``STOP``; between rounds it watches ``NEXT``,
    yielding its core after ``SPINS`` looks."""
    ctl = work[8]
    while True:
        run_blocks(work, X, cum, sgn, G, m, nb, systematic)
        spins = 0
        while atomic_load(ctl, NEXT) >= nb:
            if atomic_load(ctl, STOP) != 0:
                return
            spins += 1
            if spins > SPINS:
                yield_cpu()


# ----------------------------------------------------------------------------------------------
# Algorithms 1 and 2


@_jit(internal=True)
def scratch(m):
    """Work arrays of ``m`` numbers for :func:`sg_rounds` and :func:`chunk_estimates_compiled`:
    three of float64, three of int64, and an empty 2-D ``Wf``."""
    f8, i8 = np.float64, np.int64
    return (
        empty(m, f8), empty(m, f8), empty(m, f8), empty(m, i8), empty(m, i8), empty(m, i8),
        empty((0, 0), f8),
    )  # fmt: skip


@_jit(nogil=True)
def sg_rounds(
    t0, t1, X, y, etas, kind, param, net, coord, m, threshold, sign, systematic, rescale_below,
    blocks, rng, stream, work, G, guide, a, sgn, cum, alpha_new, shrinks_before, alpha_l1, losses,
    state, counts,
):  # fmt: skip
    """Rounds ``t0 .. t1 - 1`` of Algorithm 1 (learners/shrinking_gradient.py), ``alpha = s a``.

    ``cum``: the prefix sums ``cum[i] = sum_{j <= i} |a_j|`` of the rounds played, then ``+inf``
    (at least ``T + 3`` numbers). ``state = [s, total, 2.0, scale]`` (``total = |a|_1``;
    ``scale``: the guide's), ``counts = [shrinks, features_sampled, train_evals, diverged]``,
    the guide ``G``, ``guide`` (:func:`guide_update`) carry the pass between calls. ``param``,
    ``net``, ``coord``: :func:`map_param`, :func:`map_net`, :func:`map_coord`. ``stream``:
    ``None`` (the draws are the calls of ``rng``), or the state of ``rng``'s PCG64
    (:func:`pcg64_kernels.state_of`; coordinate features only) whose numbers are made here (the
    same numbers) and which is advanced in place; ``rng`` is then ``None`` (numba then compiles
    no code of ``rng``'s calls). With ``blocks`` a number (not ``None``) each round runs in
    ``blocks`` pieces in parallel: with a stream, on the threads that share ``work``
    (:func:`threaded_work`; the caller runs :func:`sg_worker` on them, and they stop when this
    returns), the draws included; without, the search and gather on numba's threads
    (:func:`blocks_parallel`). The same numbers either way. Releases the GIL (the workers'
    threads run meanwhile), and sets ``STOP`` when it returns (they stop).
    Returns the rounds played (``t1``, or the round after the one whose estimate diverged)."""
    s, total = state[0], state[1]
    d = X.shape[1]
    nb = 1 if blocks is None else blocks
    # work space of the rounds: keys, products, psi(x_t; w), the indices
    if work is not None:
        u, psi, hs, signed, wi, jt, starts, ends, ctl, ctlf = work
        Wf = empty((0, 0), np.float64)
        ih, il = stream[2], stream[3]
    else:
        u, signed, psi, hs, wi, _, Wf = scratch(m)
        if stream is not None:
            ih, il = stream[2], stream[3]
            jt = empty(pcg.JUMPS, np.uint64)
            pcg.fill_jump_table(ih, il, jt)
            starts, ends = empty((1, 6), np.uint64), empty((1, 5), np.uint64)
    for t in range(t0, t1):
        shrinks_before[t] = counts[0]
        y_t = y[t]
        # --- Algorithm 2: E_t = EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m) -------------------
        E = 0.0
        if total > 0.0:
            n = t - 1  # i ~ |a_i| / |a|_1: the first i < n with cum[i] > u, else n
            guided = guide_update(cum, n, total, G, guide, state)
            top, scale = guide[1], state[3]
            r = 0.0
            if stream is not None:
                sh, sl, has, buf = stream[0], stream[1], stream[4], stream[5]
                if systematic:  # one random(): the keys (k / m + r) total
                    sh, sl = pcg.doubles(sh, sl, ih, il, jt, 1.0, u, ZERO, ONE)
                    r = u[0] / m
                    wh, wl = sh, sl
                else:  # m random() for the keys, then the integers
                    wh, wl = pcg.advance(sh, sl, jt, m)
                for b in range(nb):  # where each block's numbers start in the stream
                    lo = b * m // nb
                    starts[b, 0], starts[b, 1] = pcg.advance(sh, sl, jt, lo)
                    w0, w1, w2, w3 = pcg.position32(wh, wl, has, buf, jt, lo)
                    starts[b, 2], starts[b, 3], starts[b, 4], starts[b, 5] = w0, w1, w2, w3
                if work is None:
                    block_draws(ZERO, ZERO, m, X, t, total, not systematic, ih, il, jt, starts,
                                ends, u, wi, psi)  # fmt: skip
                    block_search(
                        ZERO, m, m, kind, param, X, cum, n, u, total, systematic, r, wi, Wf, d, sgn,
                        G, top, scale, guided, hs, signed,
                    )  # fmt: skip
                else:
                    # publish the round (its numbers, then NEXT), take blocks, wait for the rest
                    ctl[T_], ctl[N_], ctl[TOP], ctl[GUIDED] = t, n, top, 1 if guided else 0
                    ctlf[0], ctlf[1], ctlf[2] = total, r, scale
                    atomic_store(ctl, DONE, 0)
                    atomic_store(ctl, NEXT, 0)
                    run_blocks(work, X, cum, sgn, G, m, nb, systematic)
                    spins = 0
                    while atomic_load(ctl, DONE) < nb:
                        spins += 1
                        if spins > SPINS:
                            yield_cpu()
                    # a block whose integers redrew a number moved the start of every later
                    # block's: draw those again, one after the other (rare)
                    for b in range(nb - 1):
                        if np.int64(ends[b, 4]) != (b + 1) * m // nb - b * m // nb:
                            for c in range(b + 1, nb):
                                lo, hi = c * m // nb, (c + 1) * m // nb
                                for j in range(4):  # (a loop: see draw_w)
                                    starts[c, 2 + j] = ends[c - 1, j]
                                block_draws(c, lo, hi, X, t, total, FALSE, ih, il, jt, starts,
                                            ends, u, wi, psi)  # fmt: skip
                                block_search(
                                    lo, hi, m, kind, param, X, cum, n, u, total, systematic, r,
                                    wi, Wf, d, sgn, G, top, scale, guided, hs, signed,
                                )  # fmt: skip
                            break
                stream[0], stream[1] = ends[nb - 1, 0], ends[nb - 1, 1]
                stream[4], stream[5] = ends[nb - 1, 2], ends[nb - 1, 3]
            elif rng is not None:  # (None on the kernels' stream: no code of rng's calls)
                if systematic:
                    r = draw_random(rng) / m
                else:  # rng.random(m) * total, one draw at a time (the same stream)
                    for k in range(m):
                        u[k] = draw_random(rng) * total
                wi, Wf = draw_w(rng, kind, d, m, param, net, coord)
                psi = psi_point(kind, param, net, coord, X[t], wi, Wf, d)
                if blocks is None:
                    block_search(
                        ZERO, m, m, kind, param, X, cum, n, u, total, systematic, r, wi, Wf, d, sgn,
                        G, top, scale, guided, hs, signed,
                    )  # fmt: skip
                else:
                    blocks_parallel(
                        nb, m, kind, param, X, cum, n, u, total, systematic, r, wi, Wf, d, sgn, G,
                        top, scale, guided, hs, signed,
                    )  # fmt: skip
            counts[1] += m
            counts[2] += 2 * m
            E = s * total / m * blas_dot(signed, psi, m)
        # (E - y)**2 as Python's float power: libm's pow, which can differ from a product in
        # the last bit (the exponent is read from ``state`` so that it is not folded into one)
        losses[t] = 0.5 * math.pow(E - y_t, state[2])
        if not abs(E) <= DIVERGENCE_BOUND:
            counts[3] = 1
            state[0], state[1] = s, total
            if work is not None:
                atomic_store(work[8], STOP, 1)
            return t + 1
        # --- Algorithm 1: gradient step or shrink -----------------------------------------
        if abs(E) < threshold:
            step = sign * etas[t] * (y_t - E)
            alpha_new[t] = step
            a_t = step / s
            a[t] = a_t
            sgn[t] = 1.0 if a_t > 0.0 else -1.0 if a_t < 0.0 else 0.0
            total = total + abs(a_t)
        else:
            s /= 4.0
            counts[0] += 1
        cum[t] = total
        alpha_l1[t] = s * total
        if s < rescale_below:  # fold the scale into a (see shrinking_gradient.RESCALE_BELOW)
            acc = 0.0
            for i in range(t + 1):
                a[i] *= s
                sgn[i] = np.sign(a[i])
                acc += abs(a[i])
                cum[i] = acc
            total = cum[t]
            s = 1.0
            guide[2] = len(G)  # the prefix sums changed: the guide is built again
    state[0], state[1] = s, total
    if work is not None:
        atomic_store(work[8], STOP, 1)
    return t1


@_jit
def average_recursion(decay, G):
    """``G_{n-1} = 0``, ``G_{n-2} = 1``, ``G_i = 1 + decay_{i+1} G_{i+1}`` into ``G`` (the
    weights of the averaged iterate, ``shrinking_gradient.iterate_weights``: the same operations
    in the same order)."""
    n = len(G)
    acc = 0.0
    for i in range(n - 2, -1, -1):
        acc = 1.0 + decay[i + 1] * acc if i + 1 < n - 1 else 1.0
        G[i] = acc


def chunk_estimates(X_train, X_eval, a, fmap, sgn, total, m, counts, rng, out):
    """:func:`chunk_estimates_compiled` for the feature map ``fmap`` (its :func:`kind_of`,
    :func:`map_param`, :func:`map_net` and :func:`map_coord`)."""
    chunk_estimates_compiled(
        X_train,
        X_eval,
        a,
        kind_of(fmap),
        map_param(fmap),
        map_net(fmap),
        map_coord(fmap),
        sgn,
        total,
        m,
        counts,
        rng,
        out,
    )


@_jit
def chunk_estimates_compiled(
    X_train, X_eval, a, kind, param, net, coord, sgn, total, m, counts, rng, out
):  # fmt: skip
    """Algorithm 2 for rows ``a .. a + len(counts) - 1`` of ``X_eval``
    (``KernelExpansion.predict_estimated``), given the multinomial counts of every row (drawn
    by the caller, as numpy draws them): one draw of every ``w`` of the chunk, the ``m``
    products ``sgn(alpha_i) psi(x_i; w) psi(x; w)`` of a row in ascending ``i``, and
    ``E = |alpha|_1 mean_k(...)``."""
    rows, d = counts.shape[0], X_eval.shape[1]
    wi, Wf = draw_w(rng, kind, d, rows * m, param, net, coord)
    prod, pe, _, idx, pts, order, _ = scratch(m)
    for k in range(m):  # (np.arange(m): a loop compiles faster)
        order[k] = k
    for r in range(rows):
        k = 0
        for i in range(counts.shape[1]):  # the m draws of i in ascending order
            for _ in range(counts[r, i]):
                idx[k] = i
                k += 1
        pts[:] = a + r
        pairs(kind, param, X_train, idx, wi, Wf, r * m, d, order, prod)
        pairs(kind, param, X_eval, pts, wi, Wf, r * m, d, order, pe)
        for k in range(m):
            prod[k] = sgn[idx[k]] * prod[k] * pe[k]
        out[a + r] = total * (pairwise_sum(prod, ZERO, m) / m)


# ----------------------------------------------------------------------------------------------
# when the compiled path runs

_AGREES: dict[int, bool] = {}
_ESTIMATES_AGREE: dict[int, bool] = {}
_NOTED: set[str] = set()


def available() -> bool:
    """numba imports and ``ILNRUN_NO_NUMBA`` is not set."""
    return numba is not None


def max_threads() -> int:
    """The threads a pass may use: the cores numba found."""
    return numba.config.NUMBA_NUM_THREADS


def set_threads(threads: int) -> int:
    """Let numba's parallel loops use ``threads`` threads (at most the cores numba found)."""
    n = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(n)
    return n


def own_stream(rng: np.random.Generator, kind: int, d: int) -> np.ndarray | None:
    """The ``stream`` argument of :func:`sg_rounds`: the state of ``rng``'s PCG64
    (:func:`pcg64_kernels.state_of`) where the kernels make the pass's draws themselves (a
    coordinate pass, ``2 <= d <= pcg64_kernels.MAX_BOUND``, a PCG64 generator:
    ``default_rng``'s), else ``None`` (``rng``'s own calls). The caller puts it back
    (:func:`pcg64_kernels.put_state`) after each call."""
    if kind != COORDINATE or not 2 <= d <= pcg.MAX_BOUND or not pcg.supported(rng):
        return None
    return pcg.state_of(rng)


def map_param(fmap) -> float | None:
    """The ``param`` argument of the kernels for a map they know: ``None`` for coordinate
    features, else the map's one number as a float: the Fourier bandwidth ``sigma``, the
    random-net hidden width ``h`` (ReLU: 1.0, unused). numba removes the branches on
    ``param is None`` before it compiles a function for a ``None`` argument, so a coordinate
    pass compiles no Gaussian draws and no dense products (its cold compile takes seconds
    less); ReLU, Fourier and random-net share one compiled pass."""
    kind = kind_of(fmap)
    if kind == COORDINATE:
        return None
    return float(fmap.h) if kind == RANDOM_NET else float(getattr(fmap, "sigma", 1.0))


def map_net(fmap) -> float | None:
    """The ``net`` argument of the kernels: a random-net map's hidden width ``h`` as a float,
    ``None`` for the other maps (so that their passes compile no random-net code)."""
    return float(fmap.h) if kind_of(fmap) == RANDOM_NET else None


def map_coord(fmap) -> bool | None:
    """The ``coord`` argument of :func:`sg_rounds`: ``True`` for coordinate features, ``None``
    for the others. numba removes a branch on ``x is None`` only where ``x`` is ``None``: the
    coordinate draws sit under ``coord is not None`` so that no other map's pass compiles them,
    as the other maps' code sits under ``param is not None``."""
    return True if kind_of(fmap) == COORDINATE else None


def kind_of(fmap) -> int | None:
    """The compiled map of a feature map (its exact class only; ReLU, Fourier and random-net up
    to ``MAX_D`` dimensions, random-net up to ``MAX_D`` hidden units), or ``None``."""
    from ..features import Coordinate, Fourier, RandomNet, ReLU

    kind = {Coordinate: COORDINATE, ReLU: RELU, Fourier: FOURIER, RandomNet: RANDOM_NET}.get(
        type(fmap)
    )
    if kind != COORDINATE and kind is not None and fmap.d > MAX_D:
        return None
    return None if kind == RANDOM_NET and fmap.h > MAX_D else kind


NOTED_ENV = "ILNRUN_NOTED"  # digests of the notes printed, inherited by the workers of a run


def note(msg: str) -> None:
    """A one-line note on stderr, once per process and the worker processes it starts after it
    (they inherit :data:`NOTED_ENV`): a run prints it once, not once per worker."""
    key = hashlib.sha256(msg.encode()).hexdigest()[:12]
    seen = os.environ.get(NOTED_ENV, "").split(",")
    if msg not in _NOTED and key not in seen:
        _NOTED.add(msg)
        print(f"note: {msg}", file=sys.stderr)
        os.environ[NOTED_ENV] = ",".join([*filter(None, seen), key])


def note_no_numba() -> None:
    """The one note of a process without numba (none where ``ILNRUN_NO_NUMBA`` switched it
    off): every learner with compiled kernels runs its numpy code."""
    if NO_NUMBA_ENV not in _WHY_NOT:
        note(f"numba is not available ({_WHY_NOT}): the learners run as numpy code")


def use_compiled(fmap) -> bool:
    """Whether the compiled kernels run for ``fmap`` in this process: numba is there, the map
    is one they know, and they reproduce this numpy build's numbers (:func:`agrees`)."""
    if numba is None:
        note_no_numba()
        return False
    if kind_of(fmap) is None:
        return False
    kind = kind_of(fmap)
    if kind not in _AGREES:
        _AGREES[kind] = agrees(kind)
        if not _AGREES[kind]:
            note(
                f"the compiled Shrinking Gradient kernels do not reproduce this numpy build's "
                f"sums for {type(fmap).name} features: the numpy code runs instead"
            )
    return _AGREES[kind]


def estimates_compiled(fmap) -> bool:
    """Whether the Algorithm-2 test estimates of ReLU, Fourier and random-net maps run compiled
    here (about twice as fast as numpy's per-pair einsum): numba is there and they reproduce
    this numpy build's estimates (:data:`ESTIMATE_PROBES`, checked once per process and map,
    where estimates first run: a run without them compiles none of their kernels). Coordinate
    features have their own compiled estimates, multinomial counts included
    (``estimate_kernels``, ``KernelExpansion.estimate_coordinate``)."""
    kind = kind_of(fmap)
    if kind not in ESTIMATED_KINDS:
        return False
    if numba is None:
        note_no_numba()
        return False
    if kind not in _ESTIMATES_AGREE:
        _ESTIMATES_AGREE[kind] = bool(ESTIMATE_PROBES) and all(p(kind) for p in ESTIMATE_PROBES)
        if not _ESTIMATES_AGREE[kind]:
            note(
                f"the compiled Algorithm-2 test estimates do not reproduce this numpy build's "
                f"sums for {type(fmap).name} features: the numpy code runs instead"
            )
    return _ESTIMATES_AGREE[kind]


# Self-checks run once per process and map before the compiled kernels are trusted (PROBES,
# imported above): each takes the compiled map's kind and says whether compiled and numpy code
# agree bit for bit. The learner modules that use these kernels register them in
# ilnrun.learners.compiled (shrinking_gradient.py), so this module imports no learner
# (docs/architecture.md §9: no import circle).


def agrees(kind: int) -> bool:
    """Every registered self-check passes for ``kind`` (none registered: not trusted)."""
    return bool(PROBES) and all(probe(kind) for probe in PROBES)
