"""Doubly SGD and Fixed-Random compiled with numba: their online passes as plain loops, the same
numbers.

The compiled passes (:func:`dsgd_rounds`, :func:`fr_rounds`) draw the same random numbers, by the
same calls in the same order, from the cell's ``np.random.Generator`` as the numpy code
(learners/doubly_sgd.py, learners/fixed_random.py), and form every value in the numpy code's
order (docs/algorithms.md §2.6):

- a prediction ``sum_j c_j psi(x_t; w_j)`` is the same BLAS ``ddot`` (``np.dot`` compiles to it);
- ``W x_t`` of the ReLU and Fourier maps is the same BLAS call: ``gemv`` over two rows or more,
  ``ddot`` for a single row (numpy's ``matmul`` turns a one-row product into a dot);
- the coefficient updates, the decay and its global scale are elementwise, as in numpy.

So ``FitResult`` is bit-identical to the numpy path's. Whether this numpy build's BLAS and cosine
are the ones the kernels call is checked on first use in every process (the learners register
self-checks in :data:`PROBES`); a build that differs runs the numpy code with a one-line note.
``ILNRUN_NO_NUMBA=1`` or a Python without numba runs the numpy code too, as for Shrinking
Gradient (its kernels module holds the switch, the notes and the compilation cache's rules).

Stored Fourier parameters are kept as ``Wm`` (the ``w`` rows, contiguous) and ``b`` (the phases):
``Wm x`` is then one ``gemv`` of the rows played, as numpy's ``W[:, :-1] @ x`` is.
"""

from __future__ import annotations

import math

import numpy as np

from . import shrinking_gradient_kernels as sgk
from .shrinking_gradient_kernels import COORDINATE, FOURIER, RELU, SQRT2, _jit, draw_w, relu

DIVERGENCE_BOUND = sgk.DIVERGENCE_BOUND
kind_of = sgk.kind_of  # the compiled map of a feature map, or None


@_jit
def features(kind, x, wi, Wm, b, lo, hi, out):
    """``out[:hi - lo] = psi(x; w_j)`` for the stored ``w_lo .. w_{hi-1}`` (``FeatureMap.point``):
    coordinate ``x[w_j]``; ReLU ``sqrt2 max(0, w_j . x)``; Fourier ``sqrt2 cos(w_j . x + b_j)``,
    with ``W x`` as numpy forms it (one row: ``ddot``; more: ``gemv``)."""
    n = hi - lo
    if kind == COORDINATE:
        for j in range(n):
            out[j] = x[wi[lo + j]]
        return
    if n == 1:
        out[0] = np.dot(Wm[lo], x)
    else:
        out[:n] = np.dot(Wm[lo:hi], x)
    if kind == RELU:
        for j in range(n):
            out[j] = SQRT2 * relu(out[j])
    else:
        for j in range(n):
            out[j] = SQRT2 * math.cos(out[j] + b[lo + j])


@_jit
def store_draws(rng, kind, d, k, sigma, wi, Wm, b, lo):
    """Draw ``w_{lo} .. w_{lo+k-1} ~ mu`` as ``FeatureMap.sample(rng, k)`` draws them and store
    them (coordinate indices in ``wi``, ReLU / Fourier rows in ``Wm``, Fourier phases in ``b``)."""
    w_int, Wf = draw_w(rng, kind, d, k, sigma)
    if kind == COORDINATE:
        wi[lo : lo + k] = w_int
    else:
        Wm[lo : lo + k] = Wf[:, :d]
        if kind == FOURIER:
            b[lo : lo + k] = Wf[:, d]


@_jit
def dsgd_rounds(
    t0, t1, X, y, etas, kind, sigma, k, nu, rescale_below, rng,
    wi, Wm, b, c, psi, losses, state, counts,
):  # fmt: skip
    """Rounds ``t0 .. t1 - 1`` of Dai et al. Algorithms 1-2 (learners/doubly_sgd.py),
    ``alpha = s c``.

    ``state = [s, 2.0]``, ``counts = [train_evals, features_sampled, diverged]`` carry the pass
    between calls. Returns the rounds played (``t1``, or the round after the one whose prediction
    diverged)."""
    s = state[0]
    d = X.shape[1]
    for t in range(t0, t1):
        x = X[t]
        n_old = k * t
        # Algorithm 2: f(x_t) = s sum_{j < n_old} c_j psi(x_t; w_j)
        f = 0.0
        if n_old:
            features(kind, x, wi, Wm, b, 0, n_old, psi)
            counts[0] += n_old
            f = s * np.dot(c[:n_old], psi[:n_old])
        # (f - y)**2 as Python's float power: libm's pow (the exponent read from ``state``, so
        # that it is not folded into a product)
        losses[t] = 0.5 * math.pow(f - y[t], state[1])
        if not abs(f) <= DIVERGENCE_BOUND:
            counts[2] = 1
            state[0] = s
            return t + 1
        # Algorithm 1: omega_{t,j} ~ mu, alpha_{t,j} = -gamma_t (f - y_t) psi(x_t; omega_{t,j}) / k
        store_draws(rng, kind, d, k, sigma, wi, Wm, b, n_old)
        counts[1] += k
        features(kind, x, wi, Wm, b, n_old, n_old + k, psi[n_old:])
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
            c[j] = a if s == 1.0 else a / s
        if s < rescale_below:
            for j in range(n_old + k):
                c[j] *= s
            s = 1.0
    state[0] = s
    return t1


@_jit
def fr_rounds(t0, t1, X, y, etas, kind, wi, Wm, b, inv_sqrt_r, lam, beta, z, losses, state, counts):
    """Rounds ``t0 .. t1 - 1`` of Fixed-Random's SGD pass (learners/fixed_random.py):
    ``z = psi(x_t; w_{1..r}) / sqrt(r)``, ``yhat = beta . z``,
    ``beta <- (1 - eta_t lam) beta - eta_t (yhat - y_t) z``.

    ``state = [2.0]``, ``counts = [train_evals, diverged]``. Returns the rounds played."""
    r = len(beta)
    for t in range(t0, t1):
        features(kind, X[t], wi, Wm, b, 0, r, z)
        for j in range(r):
            z[j] *= inv_sqrt_r
        counts[0] += r
        yhat = np.dot(beta, z)
        losses[t] = 0.5 * math.pow(yhat - y[t], state[0])
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


# Self-checks run once per process and map before the compiled passes are trusted (each takes
# the map's kind, says whether compiled and numpy code agree bit for bit); the learner modules
# register them, so this module imports no learner.
PROBES: list = []
_AGREES: dict[int, bool] = {}


def use_compiled(fmap) -> bool:
    """Whether the compiled passes run for ``fmap`` in this process: numba is there
    (``sgk.available``; its absence noted once), the map is one the kernels know
    (``sgk.kind_of``), and they reproduce this numpy build's numbers (:data:`PROBES`)."""
    if not sgk.available():
        sgk.note_no_numba()
        return False
    kind = sgk.kind_of(fmap)
    if kind is None:
        return False
    if kind not in _AGREES:
        _AGREES[kind] = bool(PROBES) and all(probe(kind) for probe in PROBES)
        if not _AGREES[kind]:
            sgk.note(
                f"the compiled Doubly SGD / Fixed-Random passes do not reproduce this numpy "
                f"build's numbers for {type(fmap).name} features: the numpy code runs instead"
            )
    return _AGREES[kind]


def stored(fmap, kind: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty stores for ``n`` parameters of ``fmap``: ``(wi, Wm, b)`` (unused ones empty)."""
    d = fmap.d
    wi = np.empty(n if kind == COORDINATE else 0, np.int64)
    Wm = np.empty((0, 0) if kind == COORDINATE else (n, d))
    b = np.empty(n if kind == FOURIER else 0)
    return wi, Wm, b


def split(W: np.ndarray, kind: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``FeatureMap.sample``'s parameters as the kernels store them: ``(wi, Wm, b)``."""
    if kind == COORDINATE:
        return np.ascontiguousarray(W, np.int64), np.empty((0, 0)), np.empty(0)
    if kind == RELU:
        return np.empty(0, np.int64), np.ascontiguousarray(W), np.empty(0)
    return np.empty(0, np.int64), np.ascontiguousarray(W[:, :-1]), np.ascontiguousarray(W[:, -1])


def joined(wi: np.ndarray, Wm: np.ndarray, b: np.ndarray, kind: int, n: int) -> np.ndarray:
    """The first ``n`` stored parameters in ``FeatureMap.sample``'s layout."""
    if kind == COORDINATE:
        return wi[:n]
    if kind == RELU:
        return Wm[:n]
    W = np.empty((n, Wm.shape[1] + 1))
    W[:, :-1] = Wm[:n]
    W[:, -1] = b[:n]
    return W
