"""Doubly SGD and Fixed-Random compiled with numba: their online passes as plain loops, the same
numbers.

The compiled passes (:func:`dsgd_rounds`, :func:`fr_rounds`) draw the same random numbers, by the
same calls in the same order, from the cell's ``np.random.Generator`` as the numpy code
(learners/doubly_sgd.py, learners/fixed_random.py), and form every value in the numpy code's
order (docs/algorithms.md §2.6):

- a prediction ``sum_j c_j psi(x_t; w_j)`` is the same BLAS ``ddot`` (the call ``np.dot`` compiles
  to: ``shrinking_gradient_kernels.blas_dot``);
- ``W x_t`` of the ReLU, Fourier and random-net maps is the same BLAS call: ``gemv`` over two
  rows or more, ``ddot`` for a single row (numpy's ``matmul`` turns a one-row product into a
  dot); a random-net unit's ``v . relu(W x)`` is numpy's ``einsum`` order
  (``shrinking_gradient_kernels.net_point``);
- the coefficient updates, the decay and its global scale are elementwise, as in numpy;
- Doubly SGD's coordinate draws ``rng.integers(0, D, k)`` are made from the generator's PCG64
  state by ``pcg64_kernels.integers`` (numpy's numbers; the state put back after each call),
  the other maps' by the generator's own calls.

So ``FitResult`` is bit-identical to the numpy path's. Whether this numpy build's BLAS and cosine
are the ones the kernels call is checked on first use in every process (the learners register
self-checks in :data:`PROBES`; each learner's run where that learner runs); a build that differs
runs the numpy code with a one-line note.
``ILNRUN_NO_NUMBA=1`` or a Python without numba runs the numpy code too, as for Shrinking
Gradient (its kernels module holds the switch, the notes and the compilation cache's rules).

The stored parameters are ``(W, b)``: coordinate indices and ``None``; ReLU rows and ``None``;
Fourier rows ``w`` (contiguous) and phases ``b``, so that ``W x`` is one ``gemv`` of the rows
played, as numpy's ``W[:, :-1] @ x`` is; random-net hidden rows (``h`` rows of ``D`` a draw,
contiguous: numpy's ``W[:, :h D].reshape(n h, D) @ x``) and output weights ``b`` (a row ``v`` of
``h`` a draw). The map is read from these types when numba compiles
(:func:`features`, :func:`draws`): a pass is compiled for one map at a time, with only that map's
code, which keeps the first compilation short; so do the ridge solver's array helpers (loops,
not slice arithmetic) and the kernels' common rules (``shrinking_gradient_kernels``: internal
kernels without a CPython wrapper, one set of numba options).
"""

from __future__ import annotations

import math

import numpy as np

from . import pcg64_kernels as pcg
from . import shrinking_gradient_kernels as sgk
from .compiled import RF_CHECKS as PROBES
from .shrinking_gradient_kernels import (
    COORDINATE,
    FOURIER,
    RANDOM_NET,
    RELU,
    SQRT2,
    ZERO,
    _jit,
    blas_dot,
    draw_gaussian,
    draw_indices,
    draw_phases,
    net_point,
    relu,
    wx,
)

DIVERGENCE_BOUND = sgk.DIVERGENCE_BOUND
kind_of = sgk.kind_of  # the compiled map of a feature map, or None


# ----------------------------------------------------------------------------------------------
# feature maps: the map is the type of the stores ``(W, b)`` — coordinate: ``W`` the indices
# (int64, 1-D), ``b`` None; ReLU: ``W`` the rows, ``b`` None; Fourier: ``W`` the rows, ``b`` the
# phases (1-D); random-net: ``W`` the hidden rows, ``b`` the output weights (2-D). A pass is
# compiled once per map, with that map's code only (a short first compile).


def features(x, W, b, lo, hi, out):
    """``out[:hi - lo] = psi(x; w_j)`` for the stored ``w_lo .. w_{hi-1}`` (``FeatureMap.point``):
    coordinate ``x[w_j]``; ReLU ``sqrt2 max(0, w_j . x)``; Fourier ``sqrt2 cos(w_j . x + b_j)``;
    random-net ``2 relu(v_j . relu(W_j x) / sqrt(h))``, with ``W x`` as numpy forms it (one row:
    ``ddot``; more: ``gemv``). Compiled code only: the map's function below, chosen by the
    stores' types and inlined into the pass (numba IR: as fast as one function with the map's
    code written in; as a call, the Fourier and Fixed-Random passes ran ~12% slower, and a
    function LLVM inlines (``forceinline``) ran the Doubly SGD passes 7-20% slower)."""
    raise NotImplementedError


def _coordinate(x, W, b, lo, hi, out):
    for j in range(hi - lo):
        out[j] = x[W[lo + j]]


def _relu(x, W, b, lo, hi, out):
    wx(x, W, lo, hi, out)
    for j in range(hi - lo):
        out[j] = SQRT2 * relu(out[j])


def _fourier(x, W, b, lo, hi, out):
    wx(x, W, lo, hi, out)
    for j in range(hi - lo):
        out[j] = SQRT2 * math.cos(out[j] + b[lo + j])


def _random_net(x, W, b, lo, hi, out):
    net_point(x, W, b, lo, hi, W.shape[1], b.shape[1], out)


if sgk.numba is not None:
    from numba.core import types
    from numba.extending import overload

    from ..compiled_cache import typing_options

    # (numba compiles the chosen function once on its own too, to type it: to IR only, without
    # the wrappers nothing calls)
    @overload(features, inline="always", jit_options=typing_options())
    def _features(x, W, b, lo, hi, out):
        if W.ndim == 1:
            return _coordinate
        if isinstance(b, types.NoneType):
            return _relu
        return _random_net if b.ndim == 2 else _fourier


@_jit(forceinline=True, internal=True)
def draws(rng, stream, jt, d, k, sigma, W, b, lo):
    """Draw ``w_lo .. w_{lo+k-1} ~ mu`` as ``FeatureMap.sample(rng, k)`` draws them and store
    them: coordinate ``rng.integers(0, D, k)`` (from ``rng``'s PCG64 state ``stream``, with its
    jump table ``jt``, where ``stream`` is not ``None``: ``sgk.own_stream``; ``rng`` is then
    ``None``); ReLU ``rng.standard_normal((k, D))``; Fourier
    ``rng.standard_normal((k, D)) / sigma``, then the phases ``rng.uniform(0, 2 pi, k)``;
    random-net ``rng.standard_normal((k, h D + h))``, split into the stores. (Stored by loops,
    not assigned to slices: see ``shrinking_gradient_kernels.draw_w``.) numba reads
    ``W.ndim`` and ``b.ndim`` of a compiled function's arguments as constants and removes the
    branches they rule out (and those on ``b is None`` where ``b`` is None) before it compiles:
    compiled once per map, with that map's code, and inlined into the pass by LLVM."""
    if W.ndim == 1:  # coordinate
        # (each branch under the test of what is None when it must go: numba removes a branch
        # on ``x is not None`` where ``x`` is None, not where it is an array)
        if stream is not None:
            pcg.integers(stream, jt, d, W, lo, lo + k)
        elif rng is not None:
            drawn = draw_indices(rng, d, k)
            for j in range(k):
                W[lo + j] = drawn[j]
    elif b is None:  # ReLU
        drawn = draw_gaussian(rng, k, d)
        for j in range(k):
            for c in range(d):
                W[lo + j, c] = drawn[j, c]
    elif b.ndim == 2:  # random-net: per draw, W row-major, then v
        h = b.shape[1]
        o = h * d
        drawn = draw_gaussian(rng, k, o + h)
        for j in range(k):
            for l in range(h):
                for c in range(d):
                    W[(lo + j) * h + l, c] = drawn[j, l * d + c]
                b[lo + j, l] = drawn[j, o + l]
    else:  # Fourier
        drawn = draw_gaussian(rng, k, d)
        for j in range(k):
            for c in range(d):
                W[lo + j, c] = drawn[j, c] / sigma
        phases = draw_phases(rng, k)
        for j in range(k):
            b[lo + j] = phases[j]


@_jit
def dsgd_rounds(
    t0, t1, X, y, etas, sigma, k, nu, rescale_below, rng, stream, jt, W, b, c, appended, psi,
    losses, state, counts,
):  # fmt: skip
    """Rounds ``t0 .. t1 - 1`` of Dai et al. Algorithms 1-2 (learners/doubly_sgd.py),
    ``alpha = s c``.

    ``(W, b)`` store the ``k T`` parameters (see above), ``c`` the coefficients, ``appended``
    the coefficients as appended (``alpha_{t,j}`` of their round, for the averaged iterate),
    ``psi`` the features of a round; ``rng``, ``stream``, ``jt``: :func:`draws`' (the caller
    puts ``stream`` back into the generator after each call); ``state = [s, 2.0]``,
    ``counts = [train_evals, features_sampled, diverged]`` carry the pass between calls.
    Returns the rounds played (``t1``, or the round after the one whose prediction diverged)."""
    s = state[0]
    d = X.shape[1]
    for t in range(t0, t1):
        x = X[t]
        n_old = k * t
        # Algorithm 2: f(x_t) = s sum_{j < n_old} c_j psi(x_t; w_j)
        f = 0.0
        if n_old:
            features(x, W, b, ZERO, n_old, psi)
            counts[0] += n_old
            f = s * blas_dot(c, psi, n_old)
        # (f - y)**2 as Python's float power: libm's pow (the exponent read from ``state``, so
        # that it is not folded into a product)
        losses[t] = 0.5 * math.pow(f - y[t], state[1])
        if not abs(f) <= DIVERGENCE_BOUND:
            counts[2] = 1
            state[0] = s
            return t + 1
        # Algorithm 1: omega_{t,j} ~ mu, alpha_{t,j} = -gamma_t (f - y_t) psi(x_t; omega_{t,j}) / k
        draws(rng, stream, jt, d, k, sigma, W, b, n_old)
        counts[1] += k
        features(x, W, b, n_old, n_old + k, psi[n_old:])
        counts[0] += k
        g = -etas[t] * (f - y[t])
        # alpha_{i,.} <- (1 - gamma_t nu) alpha_{i,.}: a global scale, or applied directly when
        # the factor is not positive
        factor = 1.0 - etas[t] * nu
        if factor > 0.0:
            s *= factor
        else:
            for j in range(n_old):
                c[j] *= factor
        for j in range(n_old, n_old + k):
            a = psi[j] * g
            if k != 1:
                a /= k
            appended[j] = a
            c[j] = a if s == 1.0 else a / s
        if s < rescale_below:
            for j in range(n_old + k):
                c[j] *= s
            s = 1.0
    state[0] = s
    return t1


@_jit
def fr_rounds(t0, t1, X, y, etas, W, b, inv_sqrt_r, lam, beta, z, losses, state, counts, bsum):
    """Rounds ``t0 .. t1 - 1`` of Fixed-Random's SGD pass (learners/fixed_random.py):
    ``z = psi(x_t; w_{1..r}) / sqrt(r)``, ``yhat = beta . z``,
    ``beta <- (1 - eta_t lam) beta - eta_t (yhat - y_t) z``; with ``average`` (``bsum`` of
    length ``r``, else empty) ``bsum += beta`` before each round's update (the iterate that
    predicted ``x_t``).

    ``state = [2.0]``, ``counts = [train_evals, diverged]``. Returns the rounds played."""
    r = len(beta)
    average = len(bsum) > 0
    for t in range(t0, t1):
        features(X[t], W, b, ZERO, r, z)
        for j in range(r):
            z[j] *= inv_sqrt_r
        counts[0] += r
        yhat = blas_dot(beta, z, r)
        losses[t] = 0.5 * math.pow(yhat - y[t], state[0])
        if average:
            for j in range(r):
                bsum[j] += beta[j]
        if not abs(yhat) <= DIVERGENCE_BOUND:
            counts[1] = 1
            return t + 1
        if lam:
            shrink = 1.0 - etas[t] * lam
            for j in range(r):
                beta[j] *= shrink
        g = etas[t] * (yhat - y[t])
        for j in range(r):
            beta[j] -= z[j] * g
    return t1


# ----------------------------------------------------------------------------------------------
# Fixed-Random's ridge solver: recursive least squares on the fixed features (learners/
# fixed_random.py). The round's arithmetic is written once, as plain functions of numpy arrays
# (elementwise operations on slices, by the helpers below, and ``np.dot`` of contiguous vectors
# only): the numpy path calls
# them as Python (``rls_*.py_func``), the compiled pass (:func:`ridge_rounds`) compiled, so both
# form every number by the same operations in the same order. ``U`` is upper triangular, its
# rows contiguous.


# The functions below change arrays in place by these helpers, never by assigning an array to a
# slice or by arithmetic on slices: compiled, such an assignment compiles numba's shape-mismatch
# error and its message formatting, and each ``view -= a * other`` an array expression with its
# temporary, broadcasting and checks, a large part of a first compilation. Each helper is a loop
# in compiled code (an internal kernel) and its numpy expression in Python (the numpy path calls
# the ``rls_*`` functions as Python): every element is formed by the same operations, so the
# values are the same.


def _copy_into(dst, src):
    for j in range(len(src)):
        dst[j] = src[j]


def _copy_into_numpy(dst, src):
    """``dst[:] = src``."""
    dst[:] = src


def _dot(a, b, n):
    return blas_dot(a, b, n)


def _dot_numpy(a, b, n):
    """``np.dot(a[:n], b[:n])`` (compiled: the same BLAS ``ddot``, ``blas_dot``)."""
    return np.dot(a[:n], b[:n])


def _add_scaled(dst, a, src):
    for j in range(len(dst)):
        dst[j] += a * src[j]


def _add_scaled_numpy(dst, a, src):
    """``dst += a * src`` (each element ``dst_j + (a src_j)``, as numpy forms it)."""
    dst += a * src


def _sub_scaled(dst, a, src):
    for j in range(len(dst)):
        dst[j] -= a * src[j]


def _sub_scaled_numpy(dst, a, src):
    """``dst -= a * src`` (each element ``dst_j - (a src_j)``, as numpy forms it)."""
    dst -= a * src


def _scale_by(dst, a):
    for j in range(len(dst)):
        dst[j] *= a


def _scale_by_numpy(dst, a):
    """``dst *= a``."""
    dst *= a


def _divide_by(dst, a):
    for j in range(len(dst)):
        dst[j] /= a


def _divide_by_numpy(dst, a):
    """``dst /= a``."""
    dst /= a


copy_into = _jit(_copy_into, internal=True, python=_copy_into_numpy)
dot = _jit(_dot, internal=True, python=_dot_numpy)
add_scaled = _jit(_add_scaled, internal=True, python=_add_scaled_numpy)
sub_scaled = _jit(_sub_scaled, internal=True, python=_sub_scaled_numpy)
scale_by = _jit(_scale_by, internal=True, python=_scale_by_numpy)
divide_by = _jit(_divide_by, internal=True, python=_divide_by_numpy)


def _rls_predict(U, c, n, v):
    """``(L^-1 v) . c`` over the first ``n`` entries, ``L = U^T``, ``v[:n]`` overwritten by
    ``L^-1 v`` (forward substitution by columns of ``L``, i.e. rows of ``U``). The prequential
    prediction: primal ``v = z`` (``A = U^T U = T lam I + sum_s z_s z_s^T``, ``c = L^-1 b``,
    ``b = sum_s y_s z_s``: ``z . A^-1 b``); dual ``v = k = Z z`` (``G = U^T U = T lam I +
    Z Z^T`` over the points seen, ``c = L^-1 y``: ``k . G^-1 y``), ``v`` then ``l = L^-1 k``
    for the update."""
    if n == 0:
        return 0.0
    for i in range(n):
        v[i] /= U[i, i]
        sub_scaled(v[i + 1 : n], v[i], U[i, i + 1 : n])
    return dot(v, c, n)


def _rls_primal_update(U, c, z, y, x):
    """``A <- A + z z^T``, ``b <- b + y z``: the rank-one Cholesky update (Givens form) of the
    augmented factor ``[[L, 0], [c^T, .]]`` of ``[[A, b], [b^T, .]]`` by ``[z; y]``, which
    updates ``L = U^T`` and ``c = L^-1 b`` together; ``x`` is work space."""
    copy_into(x, z)
    xy = y
    r = len(x)
    for k in range(r):
        ukk = U[k, k]
        xk = x[k]
        rr = math.sqrt(ukk * ukk + xk * xk)
        cc = rr / ukk
        s = xk / ukk
        U[k, k] = rr
        row = U[k, k + 1 : r]  # (U_k + s x) / cc, then x cc - s U_k with the new U_k
        add_scaled(row, s, x[k + 1 : r])
        divide_by(row, cc)
        rest = x[k + 1 : r]
        scale_by(rest, cc)
        sub_scaled(rest, s, row)
        c[k] = (c[k] + s * xy) / cc
        xy = cc * xy - s * c[k]


def _rls_dual_update(U, c, t, kappa, Tlam, l, y, yhat):
    """Grow ``G`` by point ``t`` (its features' square norm ``kappa``; ``l = L^-1 k`` from the
    prediction): the factor gains the column ``(l, d)`` with ``d^2 = kappa + T lam - l . l``,
    the Schur complement, which exceeds ``T lam`` in exact arithmetic (taken as at least
    ``T lam`` against rounding), and ``c_t = (y - l . c) / d = (y - yhat) / d``."""
    d2 = kappa + Tlam
    if t:
        d2 -= dot(l, l, t)
        copy_into(U[:t, t], l[:t])
    if not d2 >= Tlam:
        d2 = Tlam
    d = math.sqrt(d2)
    U[t, t] = d
    c[t] = (y - yhat) / d


def _rls_beta(U, c, n, Z, alpha, beta):
    """The ridge coefficients on the first ``n`` points: ``alpha = U^-1 c`` (back substitution
    by columns of ``U``), then primal (``Z`` empty) ``beta = alpha``, dual
    ``beta = Z^T alpha = sum_i alpha_i z_i`` (in the order of the points)."""
    copy_into(alpha[:n], c[:n])
    for i in range(n - 1, -1, -1):
        alpha[i] /= U[i, i]
        sub_scaled(alpha[:i], alpha[i], U[:i, i])
    if len(Z) == 0:
        copy_into(beta, alpha[:n])
        return
    beta[:] = 0.0
    for i in range(n):
        add_scaled(beta, alpha[i], Z[i])


rls_predict = _jit(_rls_predict, internal=True)
rls_primal_update = _jit(_rls_primal_update, internal=True)
rls_dual_update = _jit(_rls_dual_update, internal=True)
rls_beta = _jit(_rls_beta)


def python(f):
    """The plain Python function of a kernel (the numpy path's reference)."""
    return getattr(f, "py_func", f)


@_jit
def ridge_rounds(t0, t1, X, y, W, b, inv_sqrt_r, Tlam, U, c, Z, z, v, x, losses, state, counts):
    """Rounds ``t0 .. t1 - 1`` of Fixed-Random's ridge solver (learners/fixed_random.py):
    ``z = psi(x_t; w_{1..r}) / sqrt(r)``, the prequential prediction of the ridge on the points
    before ``t``, then the point added. Primal (``Z`` empty: ``U`` is ``r x r``) or dual (``Z``
    stores the points' features, ``U`` is ``T x T``). ``state = [2.0]``,
    ``counts = [train_evals, diverged]``. Returns the rounds played."""
    r = len(z)
    dual = len(Z) > 0
    for t in range(t0, t1):
        features(X[t], W, b, ZERO, r, z)
        for j in range(r):
            z[j] *= inv_sqrt_r
        counts[0] += r
        if dual:
            for j in range(r):
                Z[t, j] = z[j]
            if t:
                wx(z, Z, ZERO, t, v)  # k = Z z over the points before t
            yhat = rls_predict(U, c, t, v)
        else:
            for j in range(r):
                v[j] = z[j]
            yhat = rls_predict(U, c, r, v)
        losses[t] = 0.5 * math.pow(yhat - y[t], state[0])
        if not abs(yhat) <= DIVERGENCE_BOUND:
            counts[1] = 1
            return t + 1
        if dual:
            rls_dual_update(U, c, t, blas_dot(z, z, r), Tlam, v, y[t], yhat)
        else:
            rls_primal_update(U, c, z, y[t], x)
    return t1


# Self-checks run once per process and map before the compiled passes are trusted (PROBES: each
# takes the map's kind, says whether compiled and numpy code agree bit for bit); the learner
# modules register them in ilnrun.learners.compiled, so this module imports no learner.
_AGREES: dict[tuple, bool] = {}


def use_compiled(fmap, learner: str | None = None) -> bool:
    """Whether the compiled passes run for ``fmap`` in this process: numba is there
    (``sgk.available``; its absence noted once), the map is one the kernels know
    (``sgk.kind_of``), and they reproduce this numpy build's numbers (:data:`PROBES`):
    ``learner``'s checks (``"doubly_sgd"``, ``"fixed_random"``: the checks its module
    registered; a check compiles the passes it checks, and a run of one learner compiles none of
    the other's), or all of them (``None``)."""
    if not sgk.available():
        sgk.note_no_numba()
        return False
    kind = sgk.kind_of(fmap)
    if kind is None:
        return False
    if _AGREES.get((kind, None)):  # every check passed
        return True
    if (kind, learner) not in _AGREES:
        probes = [p for p in PROBES if learner in (None, p.__module__.rsplit(".", 1)[-1])]
        _AGREES[kind, learner] = bool(probes) and all(probe(kind) for probe in probes)
        if not _AGREES[kind, learner]:
            sgk.note(
                f"the compiled Doubly SGD / Fixed-Random passes do not reproduce this numpy "
                f"build's numbers for {type(fmap).name} features: the numpy code runs instead"
            )
    return _AGREES[kind, learner]


def probe_map(kind: int, D: int):
    """A feature map of ``kind`` in ``D`` dimensions for the self-checks (Fourier:
    ``sigma = 1.7``; random-net: ``h = 11``, a block of eight and a rest in its sums)."""
    from ..features import Coordinate, Fourier, RandomNet, ReLU

    if kind == COORDINATE:
        return Coordinate(D)
    if kind == RANDOM_NET:
        return RandomNet(D, 11)
    return ReLU(D) if kind == RELU else Fourier(D, 1.7)


def stored(fmap, kind: int, n: int) -> tuple:
    """Empty stores ``(W, b)`` for ``n`` parameters of ``fmap`` (``b`` None but for Fourier and
    random-net)."""
    if kind == COORDINATE:
        return np.empty(n, np.int64), None
    if kind == RANDOM_NET:
        return np.empty((n * fmap.h, fmap.d)), np.empty((n, fmap.h))
    return np.empty((n, fmap.d)), (np.empty(n) if kind == FOURIER else None)


def split(W: np.ndarray, kind: int, fmap) -> tuple:
    """``FeatureMap.sample``'s parameters of ``fmap`` as the kernels store them: ``(W, b)``."""
    if kind == COORDINATE:
        return np.ascontiguousarray(W, np.int64), None
    if kind == RELU:
        return np.ascontiguousarray(W), None
    if kind == RANDOM_NET:
        h, hd = fmap.h, fmap.h * fmap.d
        return (
            np.ascontiguousarray(W[:, :hd]).reshape(len(W) * h, fmap.d),
            np.ascontiguousarray(W[:, hd:]),
        )
    return np.ascontiguousarray(W[:, :-1]), np.ascontiguousarray(W[:, -1])


def joined(W: np.ndarray, b, kind: int, n: int) -> np.ndarray:
    """The first ``n`` stored parameters in ``FeatureMap.sample``'s layout."""
    if kind == RANDOM_NET:
        h, d = b.shape[1], W.shape[1]
        out = np.empty((n, h * d + h))
        out[:, : h * d] = W[: n * h].reshape(n, h * d)
        out[:, h * d :] = b[:n]
        return out
    if kind != FOURIER:
        return W[:n]
    out = np.empty((n, W.shape[1] + 1))
    out[:, :-1] = W[:n]
    out[:, -1] = b[:n]
    return out
