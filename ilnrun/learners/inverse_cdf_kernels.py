"""The ``inverse_cdf_v1`` and ``inverse_cdf_v2`` Algorithm-2 estimates (``estimate_draws``)
compiled with numba: the numbers of ``estimate_draws.estimate_numpy``, bit for bit.

- Coordinate features (:func:`coordinate_estimates`): the whole estimate in one call. The
  ``r m`` uniforms of a chunk, then its ``r m`` coordinates, are made by ``pcg64_kernels`` from
  the generator's PCG64 state (numpy's ``random()`` and ``integers(0, D)`` streams written out,
  four lanes at once; the state is put back after the call, as numpy would have left it). The
  index of a uniform comes from the table of ``estimate_draws.InverseCdf`` (the same
  ``first``: a bucket that no prefix sum splits gives its index at once, a split one is
  searched: searchsorted's index either way), and each row's products, in draw order, are summed
  in numpy's pairwise order (``shrinking_gradient_kernels.pairwise_sum``).
  ``inverse_cdf_v2`` (:func:`hashed_coordinate_estimates`): the uniforms and coordinates of a
  block from SplitMix64 (:func:`hashed_draws`, one pass with no state from draw to draw), the
  same index step and products.
- ReLU, Fourier and random-net maps (:func:`drawn_estimates`): the indices by numpy
  (``InverseCdf``), then per chunk the ``w`` by numba's generator calls
  (``shrinking_gradient_kernels.draw_w``, numpy's streams), the values by the Shrinking Gradient
  kernels' ``pairs`` (numpy's ``einsum`` order, trusted where those kernels are) and the
  pairwise mean.

Before the compiled estimates run for a map, they are checked once per process against the
numpy code (:func:`agrees`); a build where they differ runs the numpy code, with a one-line
note. Compiled only when first used: a run with the default stream compiles none of this.
"""

from __future__ import annotations

import numpy as np

from ..stopping import deferred
from . import pcg64_kernels as pcg
from . import shrinking_gradient_kernels as kernels
from .estimate_draws import (
    BLOCK_PAIRS,
    GAMMA,
    INVERSE_CDF_V2,
    LOW32,
    MIX1,
    MIX2,
    InverseCdf,
    estimate_numpy,
    splitmix64,
    upper_uniforms,
)
from .shrinking_gradient_kernels import ZERO, _jit, empty, pairwise_sum

S27, S30, S31, S32 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(32)


@_jit
def upper_bound(cdf, key):
    """``searchsorted(cdf, key, side="right")``: how many of ``cdf`` are at most ``key``."""
    lo, hi = 0, len(cdf)
    while lo < hi:
        mid = (lo + hi) >> 1
        if cdf[mid] <= key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def table_indices(u, N, cdf, first, U, idx):
    """``idx[j] = min(searchsorted(cdf, u[j] c, side="right"), d - 1)`` for ``j < N``
    (``c = cdf[d - 1]``) from the table of ``InverseCdf`` (``first``, ``U``) with ``first``
    clamped to ``d - 1``: the bucket's first index ``i``, plus one where ``cdf[i]``, the
    bucket's one prefix sum, is at most the key. Where no prefix sum splits the bucket,
    ``cdf[i]`` is above every key in it, so one comparison serves both cases without a branch
    on the data; more than one prefix sum in the bucket: a binary search. The clamp keeps every
    read inside ``cdf`` and changes no index (one that would be ``d`` is ``d - 1`` either way).
    (Indices unsigned, none being negative: numba adds no wrap-around; the bucket by a signed
    conversion, one instruction, of ``u U >= 0``.)"""
    d = len(cdf)
    c = cdf[d - 1]
    for j in range(N):
        uj = u[j]
        t = np.uint64(np.int64(uj * U))
        i = first[t]
        h = first[t + np.uint64(1)]
        if h - i > 1:
            i = upper_bound(cdf, uj * c)
        else:
            i += cdf[np.uint64(i)] <= uj * c
        idx[j] = min(i, d - 1)


@_jit
def block_estimates(train, signed, sgn, X_eval, r0, r1, idx, W, total, m, prod, out):
    """Step 4 for rows ``r0 .. r1 - 1`` of ``X_eval`` (coordinate features), their draws' indices
    ``idx`` and coordinates ``W`` from 0: per row ``x`` the products ``(x_{i_j}[w_j] sgn_{i_j})
    x[w_j]`` in draw order (``train``: the stored rows flattened, each times its ``sgn`` when
    ``signed``) and ``out[row] = |alpha|_1 (pairwise sum / m)``."""
    uD = np.uint64(X_eval.shape[1])
    for row in range(r1 - r0):
        x = X_eval[r0 + row]
        j0 = row * m
        if signed:
            for k in range(m):
                w = np.uint64(W[j0 + k])
                prod[k] = train[np.uint64(idx[j0 + k]) * uD + w] * x[w]
        else:
            for k in range(m):
                i, w = np.uint64(idx[j0 + k]), np.uint64(W[j0 + k])
                prod[k] = train[i * uD + w] * sgn[i] * x[w]
        out[r0 + row] = total * (pairwise_sum(prod, ZERO, m) / m)


@_jit
def block_scratch(n, m):
    """The rows of a block of :func:`coordinate_estimates` and
    :func:`hashed_coordinate_estimates` (``max(1, BLOCK_PAIRS // m)``: its draws stay in cache)
    and its scratch: the uniforms, coordinates and indices of its draws, one row's products."""
    block = max(1, BLOCK_PAIRS // m)
    size = min(block, n) * m
    f8, i8 = np.float64, np.int64
    return block, empty(size, f8), empty(size, i8), empty(size, i8), empty(m, f8)


@_jit
def coordinate_estimates(train, signed, sgn, X_eval, cdf, first, U, total, m, chunk, st, out):
    """``estimate_numpy`` for a coordinate map (``psi(x; w) = x[w]``). ``train``: the stored
    rows flattened, each times its ``sgn`` when ``signed``; ``first``, ``U``: the table of
    ``InverseCdf`` (``U`` as a float); ``chunk``: rows a chunk; ``st``: the generator's PCG64
    state (``pcg64_kernels.state_of``), advanced here past every number drawn. ``first`` is
    clamped to ``d - 1`` (:func:`table_indices`). Per chunk: the uniforms ``u``, then the
    coordinates ``W``; per row ``x`` and draw ``j``: ``i_j`` from ``u_j``
    (``min(searchsorted(cdf, u_j c), d - 1)``), the product
    ``(x_{i_j}[w_j] sgn_{i_j}) x[w_j]``, then ``|alpha|_1 (pairwise sum / m)``.

    A chunk is made in blocks of rows that stay in cache: the uniforms of a block from the
    chunk's stream of doubles, its coordinates from the stream of 32-bit numbers that starts
    after the chunk's last double (``pcg64_kernels.advance``: a double is one step of the
    generator), each stream continued from block to block. The numbers are those of the two
    calls ``random(r m)`` then ``integers(0, D, r m)``, and the generator ends where they leave
    it."""
    n, D = X_eval.shape
    ih, il = st[2], st[3]
    jt = empty(pcg.JUMPS, np.uint64)
    pcg.fill_jump_table(ih, il, jt)
    block, u, W, idx, prod = block_scratch(n, m)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        uh, ul = st[0], st[1]  # the doubles of the chunk, then its 32-bit numbers
        wh, wl = pcg.advance(uh, ul, jt, (b - a) * m)
        has, buf = st[4], st[5]
        for r0 in range(a, b, block):
            r1 = min(b, r0 + block)
            N = np.int64((r1 - r0) * m)
            uh, ul = pcg.doubles(uh, ul, ih, il, jt, 1.0, u, ZERO, N)
            table_indices(u, N, cdf, first, U, idx)  # (a pass of its own: faster)
            wh, wl, has, buf, _ = pcg.bounded(wh, wl, ih, il, has, buf, jt, D, W, ZERO, N)
            block_estimates(train, signed, sgn, X_eval, r0, r1, idx, W, total, m, prod, out)
        st[0], st[1], st[4], st[5] = wh, wl, has, buf


@_jit
def hashed_draws(key, j0, N, D, u, W):
    """``inverse_cdf_v2``'s draws ``j0 .. j0 + N - 1`` (``estimate_draws.splitmix64``): the
    uniforms ``u[k] = floor(z / 2^32) 2^-32`` and the coordinates ``W[k] = floor((z mod 2^32)
    D / 2^32)`` of ``z = z_{j0 + k}``, ``k < N``."""
    uD = np.uint64(D)
    for k in range(N):
        z = key + np.uint64(j0 + k + 1) * GAMMA
        z = (z ^ (z >> S30)) * MIX1
        z = (z ^ (z >> S27)) * MIX2
        z ^= z >> S31
        u[k] = float(z >> S32) * 2.0**-32
        W[k] = ((z & LOW32) * uD) >> S32


@_jit
def hashed_coordinate_estimates(train, signed, sgn, X_eval, cdf, first, U, total, m, key, out):
    """``estimate_numpy`` with ``inverse_cdf_v2`` for a coordinate map (arguments as in
    :func:`coordinate_estimates`; ``key``: the call's key, drawn by the caller): in blocks of
    rows that stay in cache, the block's uniforms and coordinates (:func:`hashed_draws`), its
    indices (:func:`table_indices`) and its estimates (:func:`block_estimates`). The draws do
    not depend on the chunks: none are needed here."""
    n = X_eval.shape[0]
    block, u, W, idx, prod = block_scratch(n, m)
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        N = np.int64((r1 - r0) * m)
        hashed_draws(key, np.int64(r0 * m), N, X_eval.shape[1], u, W)
        table_indices(u, N, cdf, first, U, idx)
        block_estimates(train, signed, sgn, X_eval, r0, r1, idx, W, total, m, prod, out)


@_jit
def drawn_estimates(X_train, X_eval, a, kind, param, net, sgn, total, m, idx, rng, out):
    """Rows ``a .. a + len(idx) // m - 1`` of ``estimate_numpy`` for a ReLU, Fourier or
    random-net map, given the chunk's indices ``idx`` (drawn by the caller, draw order): one
    draw of every ``w`` of the chunk, then per row the ``m`` products
    ``(sgn_i psi(x_i; w)) psi(x; w)`` in draw order and ``|alpha|_1 (pairwise sum / m)``."""
    rows, d = len(idx) // m, X_eval.shape[1]
    wi, Wf = kernels.draw_w(rng, kind, d, rows * m, param, net, None)  # (coord: not coordinate)
    prod, pe, _, ii, pts, order, _ = kernels.scratch(m)  # (as chunk_estimates_compiled)
    for k in range(m):  # (np.arange(m): a loop compiles faster)
        order[k] = k
    for r in range(rows):
        for k in range(m):
            ii[k] = idx[r * m + k]
        pts[:] = a + r
        kernels.pairs(kind, param, X_train, ii, wi, Wf, r * m, d, order, prod)
        kernels.pairs(kind, param, X_eval, pts, wi, Wf, r * m, d, order, pe)
        for k in range(m):
            prod[k] = sgn[ii[k]] * prod[k] * pe[k]
        out[a + r] = total * (pairwise_sum(prod, ZERO, m) / m)


# ----------------------------------------------------------------------------------------------
# the calls, and when they run


def coordinate(total, q, sgn, X_train, X_eval, fmap, m, rng, chunk_pairs, draws) -> np.ndarray:
    """:func:`coordinate_estimates` (``inverse_cdf_v1``: ``rng`` a PCG64 generator,
    ``2 <= D < 2**32``) or :func:`hashed_coordinate_estimates` (``inverse_cdf_v2``: any
    generator, ``D < 2**32``) for every row of ``X_eval`` (arguments of
    ``estimate_draws.estimate_numpy``)."""
    n, D, d = len(X_eval), fmap.d, len(sgn)
    rows = max(1, chunk_pairs // m)
    search = InverseCdf(q, min(n, rows) * m)
    X_train = np.ascontiguousarray(X_train, dtype=float)
    X_eval = np.ascontiguousarray(X_eval, dtype=float)
    signed = d * D <= n * m  # as the numpy code decides (the same products either way)
    train = (X_train[:d] * sgn[:, None]).reshape(-1) if signed else X_train.reshape(-1)
    out = np.zeros(n)
    args = (train, signed, np.ascontiguousarray(sgn, dtype=float), X_eval, search.cdf)
    first = np.minimum(search.first, d - 1)  # (clamped: see table_indices)
    if draws == INVERSE_CDF_V2:
        key = rng.integers(0, 2**64, dtype=np.uint64)
        with deferred():  # a stop lands after the call
            hashed_coordinate_estimates(*args, first, float(search.U), float(total), m, key, out)
        return out
    with pcg.drawing_from(rng) as st:
        coordinate_estimates(*args, first, float(search.U), float(total), m, rows, st, out)
    return out


def generic(total, q, sgn, X_train, X_eval, fmap, m, rng, chunk_pairs, draws) -> np.ndarray:
    """:func:`drawn_estimates` chunk by chunk for every row of ``X_eval`` (arguments of
    ``estimate_draws.estimate_numpy``): the chunk's uniforms (``inverse_cdf_v1``: by ``rng``;
    ``inverse_cdf_v2``: from the call's key) and indices by numpy, the rest compiled."""
    n, out = len(X_eval), np.zeros(len(X_eval))
    rows = max(1, chunk_pairs // m)
    search = InverseCdf(q, min(n, rows) * m)
    X_train = np.ascontiguousarray(X_train, dtype=float)
    X_eval = np.ascontiguousarray(X_eval, dtype=float)
    sgn, total = np.ascontiguousarray(sgn, dtype=float), float(total)
    kind, param, net = kernels.kind_of(fmap), kernels.map_param(fmap), kernels.map_net(fmap)
    key = rng.integers(0, 2**64, dtype=np.uint64) if draws == INVERSE_CDF_V2 else None
    for a in range(0, n, rows):
        b = min(n, a + rows)
        if key is None:
            u = rng.random((b - a) * m)
        else:
            u = upper_uniforms(splitmix64(key, a * m, (b - a) * m))
        idx = search(u)
        with deferred():  # a stop lands after the call, never in numba's unboxing of rng
            drawn_estimates(X_train, X_eval, a, kind, param, net, sgn, total, m, idx, rng, out)
    return out


_AGREES: dict[tuple[str, int], bool] = {}


def runner(
    fmap,
    X_train: np.ndarray,
    X_eval: np.ndarray,
    rng: np.random.Generator,
    draws: str,
):
    """:func:`coordinate` or :func:`generic` where the compiled estimates of the stream
    ``draws`` run for ``fmap`` and ``rng`` (float inputs; numba there; a map the kernels know
    (``kernels.kind_of``): a coordinate map with ``D < 2**32``, and with ``inverse_cdf_v1``
    ``D >= 2`` and numpy's PCG64; and :func:`agrees`, once per process, stream and map, with a
    one-line note when not), else ``None``: the numpy code runs. :func:`agrees` runs this very
    code against the numpy code, so nothing else is checked for it: a run compiles only the
    kernels its stream uses (not the Shrinking Gradient pass's or the multinomial estimates',
    whose own self-checks compile them)."""
    kind = kernels.kind_of(fmap)
    if kind is None or X_train.dtype != np.float64 or X_eval.dtype != np.float64:
        return None
    if not kernels.available():
        kernels.note_no_numba()
        return None
    if kind == kernels.COORDINATE:
        if draws == INVERSE_CDF_V2:
            if not fmap.d <= pcg.MAX_BOUND:
                return None
        elif not (pcg.supported(rng) and 2 <= fmap.d <= pcg.MAX_BOUND):
            return None
        run = coordinate
    else:
        run = generic
    if (draws, kind) not in _AGREES:
        _AGREES[draws, kind] = agrees(fmap, run, draws)
        if not _AGREES[draws, kind]:
            kernels.note(
                f"the compiled {draws} estimates do not reproduce this numpy build's for "
                f"{type(fmap).name} features: the numpy code runs instead"
            )
    return run if _AGREES[draws, kind] else None


def agrees(fmap, run, draws: str) -> bool:
    """``run`` (:func:`coordinate` or :func:`generic`) gives :func:`estimate_numpy`'s
    estimates of the stream ``draws`` and leaves the generator where it does, on a probe (in
    ``fmap``'s dimension; a coordinate map in 7): alpha with zeros and a skewed law (split
    buckets searched), several chunks, the signed copy of the stored rows (``m = 3 D``) and
    signs per product."""
    from ..features import Coordinate

    probe = np.random.default_rng(20261125)
    if kernels.kind_of(fmap) == kernels.COORDINATE:  # the compiled code is the same for any D
        fmap = Coordinate(7)
    D = fmap.d
    X, X_eval = probe.standard_normal((30, D)), probe.standard_normal((11, D))
    alpha = probe.standard_normal(30) * 0.25 ** probe.integers(0, 6, 30)
    alpha[[3, 8, 29]] = 0.0
    absa = np.abs(alpha)
    total = float(absa.sum())
    law = (total, absa / total, np.sign(alpha))
    for m, chunk in ((90, 400), (7, 1 << 20), (min(3 * D, 300), 1 << 20)):
        want, got = np.random.default_rng(m), np.random.default_rng(m)
        e0 = estimate_numpy(*law, X, X_eval, fmap, m, want, chunk, draws)
        e1 = run(*law, X, X_eval, fmap, m, got, chunk, draws)
        if not np.array_equal(e0, e1) or want.random() != got.random():
            return False
    return True


def estimate(
    total: float,
    q: np.ndarray | None,
    sgn: np.ndarray | None,
    X_train: np.ndarray,
    X_eval: np.ndarray,
    fmap,
    m: int,
    rng: np.random.Generator,
    chunk_pairs: int,
    draws: str,
) -> np.ndarray:
    """:func:`estimate_numpy`'s numbers of the stream ``draws`` (``inverse_cdf_v1`` or
    ``inverse_cdf_v2``), compiled where the compiled code runs and agrees with this numpy build
    (:func:`runner`), else numpy."""
    if total == 0.0 or len(X_eval) == 0:
        return np.zeros(len(X_eval))
    if type(rng) is np.random.Generator:
        run = runner(fmap, X_train, X_eval, rng, draws)
        if run is not None:
            return run(total, q, sgn, X_train, X_eval, fmap, int(m), rng, chunk_pairs, draws)
    return estimate_numpy(total, q, sgn, X_train, X_eval, fmap, m, rng, chunk_pairs, draws)
