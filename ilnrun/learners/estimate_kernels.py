"""Algorithm-2 test estimates for coordinate features compiled with numba, the same numbers.

``KernelExpansion.estimate_numpy`` (learners/base.py) draws, for every chunk of eval rows, the
counts ``Multinomial(m, q)`` of the stored examples by ``rng.multinomial(m, q, size=rows)``, then
every ``w`` of the chunk by ``rng.integers(0, D, rows * m)``, and averages the products
``sgn(alpha_i) x_i[w] x[w]``. :func:`coordinate_estimates` does the same in one compiled call:

- the counts by :func:`multinomial_rows`, numpy's ``Generator.multinomial`` written out
  (below), which draws the very same numbers from the generator;
- the ``w`` by ``pcg64_kernels.integers``, numpy's ``Generator.integers`` written out;
- both from the generator's PCG64 state, read before the call and put back after it
  (``pcg64_kernels.drawing_from``): the generator goes on as if numpy had drawn
  them (a generator of another bit generator runs the numpy code);
- every product as numpy forms it, ``(x_i[w] sgn(alpha_i)) x[w]``, in ascending ``i``, and the
  mean over the ``m`` products of a row as numpy's ``mean``: its pairwise sum
  (``shrinking_gradient_kernels.pairwise_sum``) divided by ``m``, times ``|alpha|_1``.

numpy's multinomial (``random_multinomial`` in its C distributions): for every row, with
``dn = n`` and ``rest = 1``, category ``j = 0 .. d - 2`` gets ``Binomial(dn, p_j)`` with
``p_j = pvals[j] / rest`` (then ``dn -= count``, the row ends when ``dn`` reaches 0, and
``rest -= pvals[j]``); the last category gets what is left. ``pvals`` are used as given (numpy
only checks them). Its binomial: 0 when ``dn = 0`` or ``p = 0``; with ``r = p`` for
``p <= 0.5`` and ``r = 1 - p`` else (the draw is then ``dn - X``), ``X`` by inversion when
``r dn <= 30`` and by BTPE (Kachitvichyanukul and Schmeiser, 1988) otherwise. Both are written
below with numpy's operations in numpy's order, so every comparison, and hence every draw,
is the same. ``p_j`` does not depend on the row (``rest`` is the same sequence in every row), so
it is computed once per call, and so are ``log(1 - r)`` and, per ``(j, dn)`` met, the inversion's
``(1 - r)^dn = exp(dn log(1 - r))`` and its bound: the same values as recomputed ones, so the
same draws, at a fraction of the cost.

That the compiled estimates reproduce this numpy build is checked once per process
(:func:`agrees`) before they run: a build that disagrees runs the numpy code, with a one-line
note. ``ILNRUN_NO_NUMBA=1`` or a Python without numba run the numpy code (see
``shrinking_gradient_kernels``).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from . import pcg64_kernels as pcg
from . import shrinking_gradient_kernels as kernels
from .shrinking_gradient_kernels import _jit, empty, flat, pairwise_sum

# numpy semantics for a division by zero (a category after the mass ran out): no exception
_njit = partial(_jit, error_model="numpy")
SLOTS = 32  # cached inversion set-ups per category, at most (direct-mapped by dn mod slots)
CHAIN = 16  # probabilities px_x kept per set-up
# the set-ups' probabilities of a call, at most (bytes): fewer slots a category for many
# categories (a power of two, at least one), so that a call over 10^5 stored examples does not
# hold 400 MB of them; the slots change no number, only how often a set-up is computed again
SETUP_BYTES = 1 << 23


# ----------------------------------------------------------------------------------------------
# numpy's binomial and multinomial


@_njit(internal=True)
def binomial_btpe(st, n, p):
    """``Binomial(n, p)`` for ``p <= 0.5``, ``n p > 30`` by BTPE, as numpy's
    ``random_binomial_btpe``: the triangle, parallelogram and two exponential tails, accepted by
    the explicit ratio when ``y`` is near the mode and by the squeeze and Stirling's bound
    otherwise. The result is ``n - y`` when ``p > 0.5`` (never, as called here)."""
    r = (1.0 - p) if (1.0 - p) < p else p  # min(p, 1 - p) (written out: see kernels.ZERO)
    q = 1.0 - r
    fm = n * r + r
    m = np.int64(math.floor(fm))
    p1 = math.floor(2.195 * math.sqrt(n * r * q) - 4.6 * q) + 0.5
    xm = m + 0.5
    xl = xm - p1
    xr = xm + p1
    c = 0.134 + 20.5 / (15.3 + m)
    a = (fm - xl) / (fm - xl * r)
    laml = a * (1.0 + a / 2.0)
    a = (xr - fm) / (xr * q)
    lamr = a * (1.0 + a / 2.0)
    p2 = p1 * (1.0 + 2.0 * c)
    p3 = p2 + c / laml
    p4 = p3 + c / lamr
    while True:
        nrq = n * r * q
        u = pcg.next_double(st) * p4
        v = pcg.next_double(st)
        if u <= p1:  # the triangle: accepted at once
            y = np.int64(math.floor(xm - p1 * v + u))
            break
        if u <= p2:  # the parallelogram
            x = xl + (u - p1) / c
            v = v * c + 1.0 - abs(m - x + 0.5) / p1
            if v > 1.0:
                continue
            y = np.int64(math.floor(x))
        elif u <= p3:  # the left tail
            if v == 0.0:
                continue
            fy = math.floor(xl + math.log(v) / laml)
            if fy < 0.0:
                continue
            y = np.int64(fy)
            v = v * (u - p2) * laml
        else:  # the right tail
            if v == 0.0:
                continue
            fy = math.floor(xr - math.log(v) / lamr)
            if fy > n:
                continue
            y = np.int64(fy)
            v = v * (u - p3) * lamr
        k = abs(y - m)
        if not (k > 20 and k < nrq / 2.0 - 1):  # the explicit ratio f(y) / f(m)
            s = r / q
            a = s * (n + 1)
            F = 1.0
            if m < y:
                for i in range(m + 1, y + 1):
                    F *= a / i - s
            elif m > y:
                for i in range(y + 1, m + 1):
                    F /= a / i - s
            if v > F:
                continue
            break
        # the squeeze, then Stirling's bound on log(f(y) / f(m))
        rho = (k / nrq) * ((k * (k / 3.0 + 0.625) + 0.16666666666666666) / nrq + 0.5)
        t = -k * k / (2 * nrq)
        log_v = math.log(v) if v > 0.0 else -math.inf
        if log_v < t - rho:
            break
        if log_v > t + rho:
            continue
        x1 = y + 1.0
        f1 = m + 1.0
        z = n + 1.0 - m
        w = n - y + 1.0
        x2 = x1 * x1
        f2 = f1 * f1
        z2 = z * z
        w2 = w * w
        bound = (
            xm * math.log(f1 / x1)
            + (n - m + 0.5) * math.log(z / w)
            + (y - m) * math.log(w * r / (x1 * q))
            + (13680.0 - (462.0 - (132.0 - (99.0 - 140.0 / f2) / f2) / f2) / f2) / f1 / 166320.0
            + (13680.0 - (462.0 - (132.0 - (99.0 - 140.0 / z2) / z2) / z2) / z2) / z / 166320.0
            + (13680.0 - (462.0 - (132.0 - (99.0 - 140.0 / x2) / x2) / x2) / x2) / x1 / 166320.0
            + (13680.0 - (462.0 - (132.0 - (99.0 - 140.0 / w2) / w2) / w2) / w2) / w / 166320.0
        )
        if log_v > bound:
            continue
        break
    if p > 0.5:
        y = n - y
    return y


@_njit(internal=True)
def binomial_inversion(st, n, p, q, bound, chain, filled):
    """``Binomial(n, p)`` by inversion, as numpy's ``random_binomial_inversion``: ``U`` uniform,
    ``px_0 = P(X = 0) = q^n`` and ``px_x = ((n - x + 1) p px_{x-1}) / (x q)`` subtracted from
    ``U`` until ``U <= px_x``; past ``bound`` a new ``U``. ``chain[:filled]`` holds the
    ``px_x`` already computed for this ``(n, p)`` (at least ``px_0``; the ones computed here are
    added, up to ``len(chain)``); returns ``(X, filled)``."""
    L = len(chain)
    x = 0
    px = chain[0]
    u = pcg.next_double(st)
    while u > px:
        x += 1
        if x > bound:
            x = 0
            px = chain[0]
            u = pcg.next_double(st)
        else:
            u -= px
            if x < filled:
                px = chain[x]
            else:
                px = ((n - x + 1) * p * px) / (x * q)
                if x < L:
                    chain[x] = px
                    filled = x + 1
    return x, filled


@_njit(internal=True)
def category_laws(pvals):
    """Per category ``j``: ``p_j = pvals[j] / rest_j`` (``rest_0 = 1``,
    ``rest_{j+1} = rest_j - pvals[j]``), the parameter ``r_j`` of the binomial numpy draws
    (``p_j``, or ``1 - p_j`` when ``p_j > 0.5``: the count is then ``dn - X``), and
    ``log(1 - r_j)``."""
    d = len(pvals)
    p = empty(d, np.float64)
    r = empty(d, np.float64)
    logq = empty(d, np.float64)
    rest = 1.0
    for j in range(d - 1):
        p[j] = pvals[j] / rest
        r[j] = p[j] if p[j] <= 0.5 else 1.0 - p[j]
        logq[j] = math.log(1.0 - r[j])
        rest -= pvals[j]
    return p, r, logq


@_njit(internal=True)
def new_setups(d):
    """Empty set-up tables for ``d`` categories: ``keys``, ``bounds``, ``filled``, ``chains``,
    with ``slots`` set-ups a category: :data:`SLOTS`, halved while the chains would take more
    than :data:`SETUP_BYTES` (at least one)."""
    slots = SLOTS
    while slots > 1 and d * slots * CHAIN * 8 > SETUP_BYTES:
        slots //= 2
    keys = empty((d, slots), np.int64)
    for j in range(d):  # (np.full: a loop compiles faster)
        for slot in range(slots):
            keys[j, slot] = -1
    return (
        keys,
        empty((d, slots), np.int64),
        empty((d, slots), np.int64),
        empty((d, slots, CHAIN), np.float64),
    )


@_njit(internal=True)
def multinomial_rows(st, n, p, r, logq, keys, bounds, filled, chains, out):
    """``rng.multinomial(n, pvals, size=len(out))`` into ``out`` (zeroed here) from ``rng``'s
    PCG64 state ``st`` (``pcg64_kernels.state_of``; advanced here), given
    :func:`category_laws` of ``pvals``; ``keys, bounds, filled, chains`` (:func:`new_setups`)
    keep the inversion set-ups already computed: for ``(j, dn)``, ``q = 1 - r_j``,
    ``px_0 = exp(dn log q)`` and ``bound = min(dn, dn r_j + 10 sqrt(dn r_j q + 1))``."""
    rows, d = out.shape
    mask = keys.shape[1] - 1  # slots - 1 (a power of two): dn & mask = dn mod slots
    out[:] = 0
    for row in range(rows):
        dn = n
        for j in range(d - 1):
            pj = p[j]
            if dn == 0 or pj == 0.0:
                x = 0
            else:
                rj = r[j]
                if rj * dn <= 30.0:
                    slot = dn & mask
                    chain = chains[j, slot]
                    if keys[j, slot] != dn:
                        q = 1.0 - rj
                        chain[0] = math.exp(dn * logq[j])
                        np_ = dn * rj
                        b = np_ + 10.0 * math.sqrt(np_ * q + 1)
                        keys[j, slot] = dn
                        bounds[j, slot] = dn if dn < b else np.int64(b)
                        filled[j, slot] = 1
                    x, filled[j, slot] = binomial_inversion(
                        st, dn, rj, 1.0 - rj, bounds[j, slot], chain, filled[j, slot]
                    )
                else:
                    x = binomial_btpe(st, dn, rj)
                if pj > 0.5:
                    x = dn - x
            out[row, j] = x
            dn -= x
            if dn <= 0:
                break
        if dn > 0:
            out[row, d - 1] = dn


def multinomial(rng, n, pvals, rows):
    """``rng.multinomial(n, pvals, size=rows)``: the same counts, the generator left in the same
    state (``pvals`` used as given: no checks). The kernels :func:`coordinate_estimates` calls,
    here called from Python: they are internal (compiled code calls them in a run), so this runs
    their twins compiled with a CPython wrapper, compiled only where it is called (the tests, the
    benchmarks)."""
    pvals = np.ascontiguousarray(pvals, dtype=np.float64)
    p, r, logq = category_laws(pvals)
    keys, bounds, filled, chains = new_setups(len(pvals))
    out = np.empty((rows, len(pvals)), np.int64)
    with pcg.drawing_from(rng) as st:
        multinomial_rows(st, int(n), p, r, logq, keys, bounds, filled, chains, out)
    return out


# ----------------------------------------------------------------------------------------------
# Algorithm 2 with coordinate features


@_njit
def coordinate_estimates(X_train, X_eval, q, sgn, total, m, rows_per_chunk, st, out):
    """``KernelExpansion.estimate_numpy`` for a coordinate map (``psi(x; w) = x[w]``): for
    every chunk of ``rows_per_chunk`` eval rows, the counts ``Multinomial(m, q)`` of every row,
    then every ``w`` of the chunk, then per row
    ``E = |alpha|_1 (sum_k (x_{i_k}[w_k] sgn(alpha_{i_k})) x[w_k]) / m`` with the ``i_k`` in
    ascending order and the sum in numpy's pairwise order. The signed stored rows
    ``x_i sgn(alpha_i)`` are formed once when that costs less than signing every product (a
    sign is exact: the same products either way). ``st``: the generator's PCG64 state
    (``pcg64_kernels.state_of``), advanced here past every number drawn."""
    n_eval, D = X_eval.shape
    d = len(q)
    p, r, logq = category_laws(q)
    keys, bounds, filled, chains = new_setups(d)
    counts = empty((n_eval if n_eval < rows_per_chunk else rows_per_chunk, d), np.int64)
    signed = d * D <= n_eval * m
    if signed:
        train = empty(d * D, np.float64)
        for i in range(d):
            for c in range(D):
                train[i * D + c] = X_train[i, c] * sgn[i]
    else:
        train = flat(X_train)
    prod = empty(m, np.float64)
    key = empty(m, np.int64)
    sk = empty(m, np.float64)
    W = empty(len(counts) * m, np.int64)
    jt = empty(pcg.JUMPS, np.uint64)
    pcg.fill_jump_table(st[2], st[3], jt)
    for a in range(0, n_eval, rows_per_chunk):
        b = a + rows_per_chunk
        b = n_eval if n_eval < b else b
        cnt = counts[: b - a]
        multinomial_rows(st, m, p, r, logq, keys, bounds, filled, chains, cnt)
        pcg.integers(st, jt, D, W, kernels.ZERO, (b - a) * m)
        for row in range(b - a):
            k = 0
            for i in range(d):  # the m draws of i in ascending order: row offsets (and signs)
                for _ in range(cnt[row, i]):
                    key[k] = i * D
                    sk[k] = sgn[i]
                    k += 1
            x = X_eval[a + row]
            Wr = W[row * m : (row + 1) * m]
            if signed:  # (unsigned indices, none being negative: no wrap-around added)
                for k in range(m):
                    w = np.uint64(Wr[k])
                    prod[k] = train[np.uint64(key[k]) + w] * x[w]
            else:
                for k in range(m):
                    w = np.uint64(Wr[k])
                    prod[k] = train[np.uint64(key[k]) + w] * sk[k] * x[w]
            out[a + row] = total * (pairwise_sum(prod, kernels.ZERO, m) / m)


# ----------------------------------------------------------------------------------------------
# when the compiled estimates run

_AGREES: list[bool] = []


def use_compiled(fmap, X_train: np.ndarray, X_eval: np.ndarray, rng, reference) -> bool:
    """Whether :func:`coordinate_estimates` runs: a coordinate map, float inputs, ``rng`` a
    PCG64 generator (``default_rng``'s), numba there, and the compiled multinomial and
    estimates agreeing with this numpy build (:func:`agrees` against ``reference``, the numpy
    estimates ``reference(alpha, X_train, X_eval, fmap, m, rng, chunk_pairs)``; once per
    process, a one-line note when they do not). That check runs
    this very code, so nothing else is checked for it: a run without a Shrinking Gradient pass
    compiles none."""
    if kernels.kind_of(fmap) != kernels.COORDINATE:
        return False
    if X_train.dtype != np.float64 or X_eval.dtype != np.float64:
        return False
    if not (pcg.supported(rng) and X_train.shape[1] <= pcg.MAX_BOUND):
        return False
    if not kernels.available():
        kernels.note_no_numba()
        return False
    if not _AGREES:
        _AGREES.append(agrees(reference))
        if not _AGREES[0]:
            kernels.note(
                "the compiled multinomial draws or coordinate test estimates do not reproduce "
                "this numpy build's: the numpy code runs instead"
            )
    return _AGREES[0]


def estimate(X_train, X_eval, q, sgn, total, m, rng, chunk_pairs) -> np.ndarray:
    """The estimates of :func:`coordinate_estimates` for every row of ``X_eval`` (inputs made
    C-contiguous: the same values), drawn from ``rng``'s PCG64 state, which is put back after
    the numbers drawn (a generator of another bit generator: ``ValueError``; ``use_compiled``
    says so first)."""
    if not pcg.supported(rng):
        raise ValueError(
            f"the compiled coordinate estimates draw from numpy's PCG64, not "
            f"{type(rng.bit_generator).__name__}: use estimate_numpy"
        )
    out = np.zeros(len(X_eval))
    args = (
        np.ascontiguousarray(X_train),
        np.ascontiguousarray(X_eval),
        np.ascontiguousarray(q, dtype=float),
        np.ascontiguousarray(sgn, dtype=float),
        float(total),
        int(m),
        max(1, chunk_pairs // m),
    )
    with pcg.drawing_from(rng) as st:
        coordinate_estimates(*args, st, out)
    return out


def agrees(reference) -> bool:
    """Compiled coordinate estimates equal ``reference``'s (the numpy estimates, see
    :func:`use_compiled`) and leave the generator where numpy leaves it, on laws whose
    multinomial draws take every branch (inversion and BTPE binomials, ``p > 0.5``, zeros, rows
    that end early; ``m`` from 1 to 700) and on a signed ``alpha`` with zeros: equal estimates
    from random inputs mean equal counts, equal ``w`` and equal sums. Only
    :func:`coordinate_estimates` is called, the one kernel a run calls (its callees compiled
    into it)."""
    from ..features import Coordinate

    probe = np.random.default_rng(20261124)
    laws = [
        np.array([0.6, 0.0, 0.3, 0.1]),
        np.array([0.02, 0.9, 0.0, 0.05, 0.03, 0.0]),
        probe.dirichlet(np.full(40, 0.3)),
    ]
    X_eval = probe.standard_normal((9, 7))
    cases = []
    for pvals in laws:
        X = probe.standard_normal((len(pvals), 7))
        cases += [(pvals, X, m) for m in (1, 7, 60, 700)]
    alpha = probe.standard_normal(30) * 0.25 ** probe.integers(0, 4, 30)
    alpha[[3, 8]] = 0.0
    cases.append((alpha, probe.standard_normal((30, 7)), 90))
    for alpha, X, m in cases:
        want, got = np.random.default_rng(m), np.random.default_rng(m)
        e0 = reference(alpha, X, X_eval, Coordinate(7), m, want, 400)
        absa = np.abs(alpha)
        total = float(absa.sum())
        e1 = estimate(X, X_eval, absa / total, np.sign(alpha), total, m, got, 400)
        if not np.array_equal(e0, e1) or want.random() != got.random():
            return False
    return True
