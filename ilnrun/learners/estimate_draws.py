"""The random streams of Algorithm-2 estimates (``evaluation.estimate_draws``, docs/protocol.md
§5.7): how ``KernelExpansion.predict_estimated`` draws the ``m`` samples of every point.

Algorithm 2 (ILN paper, EST_SCALAR_PROD) estimates ``f(x) = sum_i alpha_i k(x_i, x)`` by
``E = |alpha|_1 / m * sum_k sgn(alpha_{i_k}) psi(x_{i_k}; w_k) psi(x; w_k)`` with ``m`` iid pairs
``(i_k, w_k)``, ``i ~ q = |alpha_i| / |alpha|_1`` and ``w ~ mu``. Both streams below draw exactly
that law (up to the 53-bit resolution of numpy's uniform doubles, which numpy's binomials share);
they differ in the numbers drawn, so results made with one are comparable with results made
with the other in distribution only, never bit for bit.

``multinomial`` (the default, every committed number): per chunk of eval rows, the counts of the
stored examples ``rng.multinomial(m, q, size=rows)``, the ``i`` of a row in ascending order
(``KernelExpansion.estimate_numpy``). numpy draws a multinomial as ``d - 1`` sequential binomials
per row, ``d`` the number of stored examples: about ``d`` binomial draws a point whatever ``m``.

``inverse_cdf_v1`` (this module; a versioned contract: a change of any number it draws is a new
name, ``inverse_cdf_v2``, never a new version of this one). For ``alpha != 0`` (``alpha = 0``:
every estimate is 0 and nothing is drawn), ``d = len(alpha)``:

- ``q = |alpha| / |alpha|_1`` as ``KernelExpansion._sampling`` forms it (``|alpha|_1`` is
  ``np.abs(alpha).sum()``, ``q = np.abs(alpha) / |alpha|_1``), ``sgn = np.sign(alpha)``,
  ``cdf = np.cumsum(q)`` (sequential float64 sums) and ``c = cdf[d - 1]``;
- the rows of ``X_eval`` in chunks of ``r = max(1, P // m)`` rows, in order, where
  ``P = chunk_pairs // fmap.depth`` (``predict_estimated``'s ``chunk_pairs``, ``2**20`` by
  default; the same chunks as ``multinomial``); for each chunk, in this order:

  1. ``u = rng.random(r * m)`` (numpy's uniform doubles in ``[0, 1)``);
  2. ``i_j = min(searchsorted(cdf, u_j * c, side="right"), d - 1)`` for every ``j < r m``
     (inverse-CDF sampling of ``q``: ``P(i = l) = (cdf[l] - cdf[l - 1]) / c``; an ``l`` with
     ``q_l = 0`` is never drawn);
  3. ``W = fmap.sample(rng, r * m)`` (coordinate features: ``rng.integers(0, D, r * m)``);
  4. for the ``rho``-th row ``x`` of the chunk and ``k < m``, ``j = rho m + k``: the products
     ``p_k = sgn_{i_j} * psi(x_{i_j}; w_j) * psi(x; w_j)`` in **draw order** ``k`` (``psi`` as
     ``fmap.pairs`` computes it; a sign is exact, so the grouping of the product does not
     matter), and ``E(x) = |alpha|_1 * (sum_k p_k / m)`` with the sum in numpy's pairwise order
     (``np.mean`` of the row).

It draws ``2 r m`` numbers a chunk where ``multinomial`` draws about ``r d`` binomials and
``r m`` parameters: cheaper when ``m`` is not much above ``d``, and without the ``O(d)`` pass a
row that turns counts into indices. Results of ``inverse_cdf_v1`` are the same on every machine
and path: the numpy code here (:func:`estimate_numpy`, the reference) and the compiled code
(``inverse_cdf_kernels``) give the same numbers bit for bit, checked once per process before
the compiled code is trusted.

``inverse_cdf_v2`` (a versioned contract like ``inverse_cdf_v1``): the same law and the same
step 2, with the random numbers of a counter-based stream (SplitMix64, Steele, Lea and Flood
2014: ``mix(z) = g(g(z, 30, C1), 27, C2) ^ (. >> 31)``, ``g(z, s, C) = (z ^ (z >> s)) C`` mod
``2^64``, ``C1 = 0xBF58476D1CE4E5B9``, ``C2 = 0x94D049BB133111EB``) keyed by one number of
``rng``. For ``alpha != 0``:

- ``key = rng.integers(0, 2**64, dtype=np.uint64)`` (one 64-bit number of the generator), once
  a call, before anything else;
- the ``j``-th draw of the call (``j = rho m + k`` for the ``k``-th draw of the ``rho``-th row of
  ``X_eval``, counted over every row, whatever the chunks) takes the 64 bits
  ``z_j = mix(key + (j + 1) gamma)`` mod ``2^64`` (:func:`splitmix64`, ``gamma =
  0x9E3779B97F4A7C15``): its upper 32 bits ``h`` make the uniform ``u_j = h 2^-32`` of step 2
  (``i_j`` exactly as in ``inverse_cdf_v1``), its lower 32 bits ``l`` the coordinate ``w_j =
  floor(l D / 2^32)`` of a map that draws ``w`` from 32 random bits
  (``FeatureMap.sample_bits``: coordinate features); any other map draws ``W =
  fmap.sample(rng, r m)`` per chunk of ``r`` rows (the chunks of ``inverse_cdf_v1``), in order;
- the products and ``E(x)`` as in step 4 of ``inverse_cdf_v1``.

Its law is Algorithm 2's up to a resolution of ``2^-32``: ``u`` takes the ``2^32`` values
``h 2^-32``, so every ``P(i = l)`` is a multiple of ``2^-32`` within a few ``2^-32`` of ``q_l``
(the rounding of ``u c`` moves an edge between two indices by at most one value of ``h``; an
``l`` with ``q_l = 0`` is never drawn), and every ``P(w = v)`` is within ``2^-32`` of ``1 / D``
(each ``v`` takes ``floor`` or ``ceil`` of ``2^32 / D`` of the ``2^32`` values of ``l``); the
two halves of ``z_j`` are independent for a generator that is (SplitMix64 passes BigCrush).
Its draws are independent of each other and fast to make (no state carried from draw to draw:
a pass the compiler vectorizes), so it costs about half of ``inverse_cdf_v1`` a draw with
coordinate features (bench/estimate_draws.py).

The index search of step 2 is ``searchsorted``'s exactly, found faster from a table
(:class:`InverseCdf`); only the time depends on the table.
"""

from __future__ import annotations

import numpy as np

MULTINOMIAL = "multinomial"
INVERSE_CDF_V1 = "inverse_cdf_v1"
INVERSE_CDF_V2 = "inverse_cdf_v2"
# every stream, the default first (evaluation.estimate_draws's choices)
DRAWS = (MULTINOMIAL, INVERSE_CDF_V1, INVERSE_CDF_V2)
# SplitMix64 (inverse_cdf_v2): the counter's step and the two multipliers of its mix
GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
LOW32 = np.uint64(0xFFFFFFFF)
BLOCK_PAIRS = 1 << 14  # samples searched and multiplied per block in numpy (cache-sized)
TABLE_PER_INDEX = 16  # table entries per stored example (at most; see InverseCdf)
MAX_TABLE = 1 << 18  # table entries at most (about 9 MB while it is built)
TABLE_BYTES = 33  # bytes an entry while the table is built (edges, keys, first, split, sure)


def table_size(d: int, keys: int) -> int:
    """Buckets ``U`` of :class:`InverseCdf`'s table for ``d`` stored examples and about
    ``keys`` uniforms: the power of two at or above ``max(64, min(16 d, keys / 4, 2^18))``
    (enough buckets that few are split by a prefix sum, few enough that building the table
    costs less than the keys it serves)."""
    want = max(64, min(TABLE_PER_INDEX * d, keys // 4, MAX_TABLE))
    return 1 << (want - 1).bit_length()


def splitmix64(key: np.uint64, start: int, count: int) -> np.ndarray:
    """``z_j = mix(key + (j + 1) gamma)`` mod ``2^64`` for ``j = start .. start + count - 1``
    (uint64): the numbers of ``inverse_cdf_v2`` (the module's docstring)."""
    z = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    z *= GAMMA
    z += np.uint64(key)
    for shift, mult in ((30, MIX1), (27, MIX2)):
        z ^= z >> np.uint64(shift)
        z *= mult
    z ^= z >> np.uint64(31)
    return z


def upper_uniforms(z: np.ndarray) -> np.ndarray:
    """``u = floor(z / 2^32) 2^-32`` (exact doubles in ``[0, 1)``): step 2's uniforms of
    ``inverse_cdf_v2``."""
    return (z >> np.uint64(32)).astype(np.float64) * 2.0**-32


def check_draws(draws: str) -> str:
    """``draws`` if it names a stream of :data:`DRAWS`, else ``ValueError`` naming them."""
    if not isinstance(draws, str) or draws not in DRAWS:
        raise ValueError(f"draws must be one of {', '.join(DRAWS)}, got {draws!r}")
    return draws


class InverseCdf:
    """Step 2 of ``inverse_cdf_v1``: ``i = min(searchsorted(cdf, u c, side="right"), d - 1)``
    for uniforms ``u`` in ``[0, 1)`` (``c = cdf[-1]``), found from a table.

    The table splits ``[0, 1)`` into ``U`` buckets (``U`` a power of two, so ``u U`` is exact
    and its bucket ``floor(u U)`` too) and holds ``first[b] = S(b / U)``, ``S(u)`` the
    searchsorted index of the key ``u * c`` computed as the stream computes it. The product
    ``u * c`` and ``searchsorted`` are monotone in ``u``, so every ``u`` of bucket ``b`` has
    ``first[b] <= S(u) <= first[b + 1]``: where the two are equal (a bucket that no prefix sum
    splits) the index is ``first[b]``; elsewhere it is searched. At most ``d`` buckets are
    split, so with ``U >= 16 d`` at most one key in sixteen is searched. The index is
    searchsorted's in every case; ``U`` (:func:`table_size`; ``keys``: about how many keys
    the table will serve, which bounds its cost) sets only the time."""

    def __init__(self, q: np.ndarray, keys: int):
        self.cdf = np.cumsum(q)
        self.d = len(self.cdf)
        self.c = self.cdf[-1]
        self.U = table_size(self.d, keys)
        edges = np.arange(self.U + 1, dtype=float) / self.U  # exact: U is a power of two
        # S(b / U) for b = 0 .. U (S(1) = d: every prefix sum is at most c)
        self.first = np.searchsorted(self.cdf, edges * self.c, side="right")
        self.split = self.first[:-1] != self.first[1:]
        self.sure = np.minimum(self.first[:-1], self.d - 1)

    def __call__(self, u: np.ndarray) -> np.ndarray:
        """The indices ``i`` of the uniforms ``u`` (int64, draw order)."""
        b = (u * self.U).astype(np.int64)
        i = self.sure.take(b)
        split = np.flatnonzero(self.split.take(b))
        if split.size:
            keys = u.take(split) * self.c
            i[split] = np.minimum(np.searchsorted(self.cdf, keys, side="right"), self.d - 1)
        return i


def estimate_numpy(
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
    """The estimates of the stream ``draws`` (``inverse_cdf_v1`` or ``inverse_cdf_v2``) of
    every row of ``X_eval`` in numpy (the reference of the contracts above), given Algorithm 2's law
    ``total = |alpha|_1``, ``q``, ``sgn`` (``KernelExpansion._sampling``; ``total = 0``: all
    zeros, nothing drawn) and the chunk size ``chunk_pairs`` (already divided by the map's
    depth). Coordinate features gather both values from flat arrays (the same numbers as
    ``fmap.pairs``); every other map forms ``fmap.pairs``."""
    from ..features import Coordinate

    n, out = len(X_eval), np.zeros(len(X_eval))
    if total == 0.0 or n == 0:
        return out
    m = int(m)
    hashed = draws == INVERSE_CDF_V2
    key = rng.integers(0, 2**64, dtype=np.uint64) if hashed else None
    # (inverse_cdf_v2: w from the numbers' lower halves where the map takes them)
    bits = hashed and fmap.sample_bits(np.zeros(0, np.uint64)) is not None
    rows_per_chunk = max(1, chunk_pairs // m)
    search = InverseCdf(q, min(n, rows_per_chunk) * m)
    flat = type(fmap) is Coordinate
    if flat:
        D = fmap.d
        X_train = np.ascontiguousarray(X_train, dtype=float)
        X_eval = np.ascontiguousarray(X_eval, dtype=float)
        d = len(sgn)
        if d * D <= n * m:  # a signed copy of the stored rows: cheaper than signing products
            train, signs = (X_train[:d] * sgn[:, None]).reshape(-1), None
        else:
            train, signs = X_train.reshape(-1), sgn
        points = X_eval.reshape(-1)
    block = max(1, BLOCK_PAIRS // m)  # rows searched and multiplied at once
    for a in range(0, n, rows_per_chunk):
        b = min(n, a + rows_per_chunk)
        if not hashed:
            u = rng.random((b - a) * m)
        if not bits:
            W = fmap.sample(rng, (b - a) * m)
        for r0 in range(a, b, block):
            r1 = min(b, r0 + block)
            lo, hi = (r0 - a) * m, (r1 - a) * m
            if hashed:  # (the block's numbers: the same whatever the block)
                z = splitmix64(key, r0 * m, (r1 - r0) * m)
                idx = search(upper_uniforms(z))
                w = fmap.sample_bits(z & LOW32) if bits else W[lo:hi]
            else:
                idx, w = search(u[lo:hi]), W[lo:hi]
            if flat:
                prod = train.take(idx * D + w)
                if signs is not None:
                    prod *= signs.take(idx)
                pts = np.repeat(np.arange(r0, r1) * D, m)
                prod *= points.take(pts + w)
            else:
                pts = np.repeat(np.arange(r0, r1), m)
                prod = sgn[idx] * fmap.pairs(X_train, idx, w) * fmap.pairs(X_eval, pts, w)
            out[r0:r1] = total * prod.reshape(r1 - r0, m).mean(axis=1)
    return out
