"""What every learner returns, and the two kinds of learned predictor.

A learner is a function ``fit(X, y, fmap, rng, **hyper) -> FitResult`` that makes one online pass
over ``(X, y)`` in order, predicting ``yhat_t`` before it sees ``y_t`` (docs/algorithms.md), and
counts its own feature evaluations and draws. Its module declares a :class:`LearnerSpec`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from time import perf_counter
from typing import Any

import numpy as np

from ..features import Coordinate, FeatureMap
from ..losses import DEFAULT_LOSS, EVERY, LOSSES
from ..params import Param
from ..schedules import SCHEDULES, step_sizes
from ..stopping import deferred
from . import estimate_draws
from .estimate_draws import MULTINOMIAL, check_draws
from .implements import NOTHING, Implements, unimplemented

# A prediction with |yhat| above this bound (labels lie in [-1, 1]) or a non-finite one stops the
# pass and marks the cell ``diverged``.
DIVERGENCE_BOUND = 1e6


def out_of_time(deadline: float | None) -> bool:
    """True when a ``time.perf_counter()`` deadline is set and has passed."""
    return deadline is not None and perf_counter() > deadline


# work (samples or feature evaluations) of one call of a compiled pass between two looks at
# the deadline
COMPILED_WORK_PER_CALL = 1 << 22


def compiled_rounds(
    T: int,
    deadline: float | None,
    round_cost: Callable[[int], int],
    call: Callable[[int, int], int],
    diverged: Callable[[], bool],
) -> tuple[int, bool]:
    """Drive a compiled pass over rounds ``0 .. T - 1``: ``call(t, t1)`` runs rounds
    ``t .. t1 - 1`` and returns the round it stopped at. Without a deadline one call runs them
    all; with one, round 1 runs alone (the numpy passes look at the deadline after it), then
    calls of about ``COMPILED_WORK_PER_CALL / round_cost(t)`` rounds, the deadline looked at
    between them. Stops after a call that ``diverged()``. Returns ``(rounds run, timed_out)``;
    the size of the calls changes no number."""
    t = 0
    while t < T:
        if t and out_of_time(deadline):
            return t, True
        t1 = T
        if deadline is not None:
            t1 = min(T, t + (1 if t == 0 else max(1, COMPILED_WORK_PER_CALL // round_cost(t))))
        with deferred():  # a stop lands after the call, never in numba's unboxing of rng
            t = call(t, t1)
        if diverged():
            break
    return t, False


def is_divergent(yhat: float) -> bool:
    """True when a prediction is non-finite or exceeds ``DIVERGENCE_BOUND`` in magnitude."""
    return not (abs(yhat) <= DIVERGENCE_BOUND)  # also True for nan


class OnlinePass:
    """The bookkeeping every online pass shares (docs/algorithms.md): the step sizes ``eta_t``
    and labels as Python floats (the same IEEE doubles as numpy scalars, cheaper per round),
    the losses ``l(yhat_t, y_t)`` (``0.5 (yhat_t - y_t)^2`` for the square loss, the default;
    :mod:`ilnrun.losses`), and the two ways a pass stops early — its deadline (looked at from
    round 2 on) and a divergent prediction (:func:`is_divergent`).

    ``gradient(t, yhat)`` is ``l'(yhat, y_t)`` of the pass's loss (``yhat - y_t`` for the
    square loss): an online learner steps along ``-eta_t`` times it (Dai et al., Algorithm 1)."""

    def __init__(
        self,
        y: np.ndarray,
        eta: float,
        schedule: str,
        decay: float | None,
        deadline: float | None,
        loss: str = DEFAULT_LOSS,
    ) -> None:
        self.T = len(y)
        self.etas = step_sizes(schedule, eta, self.T, decay).tolist()
        self.y = y.tolist()
        self.losses = np.empty(self.T)
        self.deadline = deadline
        self.diverged = self.timed_out = False
        # the square loss keeps its own arithmetic (the committed numbers'); others their spec's
        self.square = loss == DEFAULT_LOSS
        self.loss = LOSSES[loss]

    def gradient(self, t: int, yhat: float) -> float:
        """``l'(yhat, y_t)``: ``yhat - y_t`` for the square loss."""
        if self.square:
            return yhat - self.y[t]
        return float(self.loss.derivative(yhat, self.y[t]))

    def rounds(self):
        """``t = 0 .. T-1``, stopping (``timed_out``, losses cut to the rounds played) when the
        deadline has passed before a round after the first."""
        for t in range(self.T):
            if t and out_of_time(self.deadline):
                self.timed_out = True
                self.losses = self.losses[:t]
                return
            yield t

    def diverges(self, t: int, yhat: float) -> bool:
        """Records round ``t``'s loss; True (``diverged``, losses cut after round ``t``) when
        ``yhat`` is divergent (:func:`is_divergent`) or, under a loss other than the square loss,
        the loss at ``yhat`` is not finite: the pass must stop.

        A loss that grows exponentially (docs/architecture.md §6.1's ``exp(−y p)``) overflows at
        ``|yhat|`` near 710, long before the bound of :func:`is_divergent`; its value is then
        ``inf``, and that is this round's divergence, reported by the pass's ``diverged`` (and
        the cell's ``diverged in fit``, docs/protocol.md §4). numpy's overflow warning is
        silenced here, around this one evaluation, because the overflow is detected and
        reported by the stop; without it the pass would go on to step along an infinite
        derivative. The square loss keeps its arithmetic (the committed numbers'), and is finite
        wherever :func:`is_divergent` is False."""
        blown = False
        if self.square:
            self.losses[t] = 0.5 * (yhat - self.y[t]) ** 2
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # a non-finite loss: the stop
                self.losses[t] = self.loss.value(yhat, self.y[t])
            blown = not math.isfinite(self.losses[t])
        if blown or is_divergent(yhat):
            self.diverged = True
            self.losses = self.losses[: t + 1]
            return True
        return False

    def result(self, predictor, counters: dict[str, int], **more) -> FitResult:
        """The pass's :class:`FitResult`."""
        return FitResult(predictor, self.losses, counters, self.diverged, self.timed_out, **more)


def new_costs() -> dict[str, int]:
    """A predictor's evaluation counters: ``psi`` (feature evaluations ``psi(x; w)``) and
    ``kernel`` (closed-form kernel values ``k(x, x')``) spent by its predictions so far."""
    return {"psi": 0, "kernel": 0}


@dataclass
class KernelExpansion:
    """``f(x) = sum_i alpha_i k(x_i, x)`` over the stored training inputs (``f = sum alpha_i
    Phi(x_i)``, ILN paper Algorithm 1).

    ``costs`` counts what its predictions spend (docs/protocol.md §3.2): an exact prediction
    ``|supp alpha|`` kernel values a point (:meth:`exact_evals_per_point`; added by
    :meth:`predict_exact` and by whoever evaluates it in the primal,
    :meth:`count_exact`), an Algorithm-2 estimate ``2 m`` feature evaluations a point (``m``
    on the drawn stored ``x_i``, ``m`` on the point; none when ``alpha = 0``: nothing is drawn),
    added by :meth:`predict_estimated` for the points it was asked for."""

    alpha: np.ndarray
    costs: dict = field(default_factory=new_costs, repr=False, compare=False)

    def predict_exact(self, K_eval_train: np.ndarray) -> np.ndarray:
        """Exact ``f(x) = K(x, X_train) alpha`` given the precomputed kernel block."""
        self.count_exact(len(K_eval_train))
        return K_eval_train[:, : len(self.alpha)] @ self.alpha

    def count_exact(self, n: int) -> None:
        """Count ``n`` exact predictions: :meth:`exact_evals_per_point` kernel values each."""
        self.costs["kernel"] += n * self.exact_evals_per_point()

    def exact_evals_per_point(self) -> int:
        """Kernel values of one exact prediction: the support size ``|{i: alpha_i != 0}|``."""
        return int(np.count_nonzero(self.alpha))

    def estimate_evals_per_point(self, m: int) -> int:
        """Feature evaluations of one Algorithm-2 estimate with ``m`` samples: ``2 m`` (``0``
        when ``alpha = 0``: the estimate is 0 and nothing is drawn)."""
        return 2 * int(m) if np.any(self.alpha) else 0

    def predict_estimated(
        self,
        X_train: np.ndarray,
        X_eval: np.ndarray,
        fmap: FeatureMap,
        m: int,
        rng: np.random.Generator,
        chunk_pairs: int = 1 << 20,
        draws: str = MULTINOMIAL,
    ) -> np.ndarray:
        """ILN paper Algorithm 2 (EST_SCALAR_PROD) with ``m`` samples for every row of ``X_eval``:
        ``E = |alpha|_1 / m * sum_k sgn(alpha_i) psi(x_i; w_k) psi(x; w_k)``,
        ``i ~ |alpha_i| / |alpha|_1``, ``w_k ~ mu``; ``E = 0`` when ``alpha = 0``.
        Uses ``2 m`` evaluations a point.

        ``draws`` names the random stream (``estimate_draws``; ``evaluation.estimate_draws``):
        both have Algorithm 2's law, with different numbers. ``multinomial`` (the default): the
        ``m`` iid draws of ``i`` for a point are drawn as their counts, ``Multinomial(m, q)``,
        and listed in sorted order: the sum over ``k`` does not depend on the order and the
        ``w_k`` are iid and independent of ``i``, so the estimate has exactly Algorithm 2's
        distribution, while the sorted gathers are cache-friendly. ``inverse_cdf_v1``: the
        ``i`` by inverse-CDF sampling of iid uniforms, in draw order
        (``inverse_cdf_kernels.estimate``, faster); ``inverse_cdf_v2``: the same with the
        numbers of a counter-based stream keyed by one number of ``rng`` (faster still).

        Compiled where that is faster (:meth:`estimate_compiled`: ReLU, Fourier and random-net
        maps; :meth:`estimate_coordinate`: coordinate maps), else numpy (:meth:`estimate_numpy`):
        the same draws and numbers, bit for bit. Adds its ``2 m`` evaluations a point to
        ``costs["psi"]``; ``ValueError`` for an unknown ``draws``."""
        from . import estimate_kernels
        from . import shrinking_gradient_kernels as kernels

        check_draws(draws)
        self.costs["psi"] += len(X_eval) * self.estimate_evals_per_point(m)
        run = self.estimate_numpy
        # a map with a hidden layer forms that many numbers a pair: proportionally fewer a chunk
        chunk_pairs = max(1, chunk_pairs // fmap.depth)
        if draws != MULTINOMIAL:
            law = self._sampling()
            from . import inverse_cdf_kernels

            return inverse_cdf_kernels.estimate(
                *law, X_train, X_eval, fmap, m, rng, chunk_pairs, draws
            )
        if type(rng) is np.random.Generator:
            if estimate_kernels.use_compiled(fmap, X_train, X_eval, rng, _numpy_estimate):
                run = self.estimate_coordinate
            elif kernels.estimates_compiled(fmap):
                run = self.estimate_compiled
        return run(X_train, X_eval, fmap, m, rng, chunk_pairs)

    def _sampling(self) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        """Algorithm 2's sampling law: ``|alpha|_1``, ``q(i) = |alpha_i| / |alpha|_1`` and
        ``sgn(alpha)`` (``0, None, None`` when ``alpha = 0``: every estimate is 0)."""
        absa = np.abs(self.alpha)
        total = float(absa.sum())
        if total == 0.0:
            return 0.0, None, None
        return total, absa / total, np.sign(self.alpha)

    def estimate_compiled(
        self,
        X_train: np.ndarray,
        X_eval: np.ndarray,
        fmap: FeatureMap,
        m: int,
        rng: np.random.Generator,
        chunk_pairs: int = 1 << 20,
    ) -> np.ndarray:
        """:meth:`estimate_numpy` compiled (``shrinking_gradient_kernels.chunk_estimates``): the
        multinomial counts of a chunk of rows drawn by numpy, then the rest compiled."""
        from . import shrinking_gradient_kernels as kernels

        n, out, (total, q, sgn) = len(X_eval), np.zeros(len(X_eval)), self._sampling()
        if total == 0.0:
            return out
        X_train = np.ascontiguousarray(X_train, dtype=float)
        X_eval = np.ascontiguousarray(X_eval, dtype=float)
        rows_per_chunk = max(1, chunk_pairs // m)
        for a in range(0, n, rows_per_chunk):
            counts = rng.multinomial(m, q, size=min(n, a + rows_per_chunk) - a)
            with deferred():  # see compiled_rounds
                kernels.chunk_estimates(X_train, X_eval, a, fmap, sgn, total, m, counts, rng, out)
        return out

    def estimate_coordinate(
        self,
        X_train: np.ndarray,
        X_eval: np.ndarray,
        fmap: FeatureMap,
        m: int,
        rng: np.random.Generator,
        chunk_pairs: int = 1 << 20,
    ) -> np.ndarray:
        """:meth:`estimate_numpy` for a coordinate map, compiled whole
        (``estimate_kernels.coordinate_estimates``: numpy's multinomial draws written out, the
        ``w`` draws, the products and the pairwise mean), drawn from ``rng``'s PCG64 state
        (``default_rng``'s bit generator; another: ``ValueError``)."""
        from . import estimate_kernels

        total, q, sgn = self._sampling()
        if total == 0.0:
            return np.zeros(len(X_eval))
        return estimate_kernels.estimate(X_train, X_eval, q, sgn, total, m, rng, chunk_pairs)

    def estimate_numpy(
        self,
        X_train: np.ndarray,
        X_eval: np.ndarray,
        fmap: FeatureMap,
        m: int,
        rng: np.random.Generator,
        chunk_pairs: int = 1 << 20,
        draws: str = MULTINOMIAL,
    ) -> np.ndarray:
        """:meth:`predict_estimated` in numpy (the reference; ``chunk_pairs`` as given, not
        divided by the map's depth). ``draws``: the stream, as there."""
        n, out, (total, q, sgn) = len(X_eval), np.zeros(len(X_eval)), self._sampling()
        if check_draws(draws) != MULTINOMIAL:
            law = (total, q, sgn)
            return estimate_draws.estimate_numpy(
                *law, X_train, X_eval, fmap, m, rng, chunk_pairs, draws
            )
        if total == 0.0:
            return out
        support = np.arange(len(q))
        rows_per_chunk = max(1, chunk_pairs // m)
        flat = _CoordinateProducts.make(fmap, X_train, X_eval, sgn, n * m)
        for a in range(0, n, rows_per_chunk):
            b = min(n, a + rows_per_chunk)
            counts = rng.multinomial(m, q, size=b - a)
            if flat is not None:  # the same products, gathered from flat arrays (faster)
                prod = flat.products(rng, counts, a, b, m)
            else:
                idx = np.repeat(np.tile(support, b - a), counts.ravel())
                W = fmap.sample(rng, len(idx))
                pts = np.repeat(np.arange(a, b), m)
                prod = sgn[idx] * fmap.pairs(X_train, idx, W) * fmap.pairs(X_eval, pts, W)
            out[a:b] = total * prod.reshape(b - a, m).mean(axis=1)
        return out


def _numpy_estimate(alpha: np.ndarray, *args) -> np.ndarray:
    """``KernelExpansion(alpha).estimate_numpy(*args)``: the reference of the compiled
    estimates' self-check (``estimate_kernels.agrees``)."""
    return KernelExpansion(alpha).estimate_numpy(*args)


BLOCK_PAIRS = 1 << 14  # products formed per block in the coordinate fast path (cache-sized)


class _CoordinateProducts:
    """``sgn(alpha_i) psi(x_i; w) psi(x; w)`` for coordinate features, where ``psi(x; w) = x[w]``:
    both gathers become one ``take`` from a flattened array at ``row * D + w``, and the sign is
    folded into the gathered training values. Every product equals the generic path's bit for
    bit (a sign is exact) and the draws are the same calls in the same order."""

    def __init__(self, fmap, train: np.ndarray, sgn: np.ndarray | None, X_eval: np.ndarray):
        self.fmap, self.d, self.train, self.sgn, self.X_eval = fmap, fmap.d, train, sgn, X_eval
        self.offsets = np.arange(len(train) // fmap.d if sgn is None else len(sgn)) * fmap.d

    @classmethod
    def make(cls, fmap, X_train, X_eval, sgn, pairs) -> _CoordinateProducts | None:
        """The fast path when it applies (coordinate map, C-contiguous inputs), else None."""
        if type(fmap) is not Coordinate or not (
            X_train.flags.c_contiguous and X_eval.flags.c_contiguous
        ):
            return None
        n = len(sgn)
        if n * fmap.d <= pairs:  # a signed copy of the stored rows: cheaper than signing products
            return cls(fmap, (X_train[:n] * sgn[:, None]).reshape(-1), None, X_eval)
        return cls(fmap, X_train.reshape(-1), sgn, X_eval)

    def products(self, rng, counts: np.ndarray, a: int, b: int, m: int) -> np.ndarray:
        """The ``(b - a) * m`` products of eval rows ``a..b-1`` (draw order: ``counts`` was drawn
        by the caller, then one call draws every ``w`` of the chunk, as in the generic path).
        The gathers run over blocks of rows that stay in cache."""
        W = self.fmap.sample(rng, (b - a) * m).reshape(b - a, m)
        prod = np.empty((b - a, m))
        rows = max(1, BLOCK_PAIRS // m)
        tiled = np.tile(self.offsets, rows)
        for r0 in range(0, b - a, rows):
            r1 = min(b - a, r0 + rows)
            cnt = counts[r0:r1].ravel()
            key = np.repeat(tiled if r1 - r0 == rows else tiled[: cnt.size], cnt)
            key += W[r0:r1].ravel()  # flat index of (x_i, w) in the stored rows
            p = self.train.take(key)
            if self.sgn is not None:
                p *= np.repeat(np.tile(self.sgn, r1 - r0), cnt)
            e = W[r0:r1] + (np.arange(a + r0, a + r1) * self.d)[:, None]  # (x, w) in X_eval
            p *= self.X_eval.reshape(-1).take(e.ravel())
            prod[r0:r1] = p.reshape(r1 - r0, m)
        return prod.ravel()


@dataclass
class FeatureExpansion:
    """``f(x) = sum_j c_j psi(x; w_j)`` over stored feature parameters (Dai et al. Algorithm 2;
    Fixed-Random's ``beta . z(x)`` with ``c = beta / sqrt(r)``).

    ``costs`` counts what :meth:`predict` spends: ``len(W)`` evaluations a point, feature
    evaluations ``psi`` — or closed-form kernel values where the "features" are kernel columns
    (a map with ``kernel_valued = True``: Nyström's landmarks)."""

    W: np.ndarray
    coef: np.ndarray
    fmap: FeatureMap
    costs: dict = field(default_factory=new_costs, repr=False, compare=False)

    def predict(self, X: np.ndarray) -> np.ndarray:
        kind = "kernel" if getattr(self.fmap, "kernel_valued", False) else "psi"
        self.costs[kind] += len(X) * self.evals_per_point()
        return self.fmap.expansion(X, self.W, self.coef)

    def evals_per_point(self) -> int:
        return len(self.W)


@dataclass
class FitResult:
    """One learner's online pass.

    ``losses[t] = 0.5 (yhat_t - y_t)^2`` for the rounds played (shorter than ``T`` if the pass
    stopped on divergence or on its time limit); ``counters`` holds ``train_evals``,
    ``features_sampled``, ``kernel_evals`` and ``shrinks`` counted inside the learner's loop.

    ``final``: a pass run with ``average`` may also keep the final iterate's predictor, the one
    it returns without ``average`` (the same pass: ``average`` chooses the predictor, not the
    draws or the rounds; :data:`SEED_FREE`); :meth:`without_average` is then the result of the
    ``average: false`` pass, so that a run evaluates both settings from one pass
    (:func:`ilnrun.cell.run_cells`). ``None`` where the pass does not keep it.
    """

    predictor: KernelExpansion | FeatureExpansion
    losses: np.ndarray
    counters: dict[str, int]
    diverged: bool = False
    timed_out: bool = False
    averaged: KernelExpansion | None = None
    extras: dict = field(default_factory=dict)
    final: KernelExpansion | FeatureExpansion | None = None

    def without_average(self) -> FitResult:
        """The result of the same pass without ``average`` (its predictor :attr:`final`), with
        predictors of its own (their ``costs`` count its own predictions) and its own counters
        and extras; ``ValueError`` where the pass kept no final predictor."""
        if self.final is None:
            raise ValueError("the pass kept no final predictor")
        averaged = self.averaged
        if averaged is not None:
            averaged = dataclasses.replace(averaged, costs=new_costs())
        return dataclasses.replace(
            self,
            predictor=dataclasses.replace(self.final, costs=new_costs()),
            counters=dict(self.counters),
            averaged=averaged,
            extras=dict(self.extras),
            final=None,
        )


def new_counters() -> dict[str, int]:
    return {"train_evals": 0, "features_sampled": 0, "kernel_evals": 0, "shrinks": 0}


# Seconds of one flop of level-3 BLAS and LAPACK (matrix products, Cholesky factorizations,
# triangular solves, the SVD) with one thread, as a cell runs: the batch references' ``seconds``
# hooks count their flops and multiply by this one rate. Calibrated on one core of the project's
# 2-core AMD EPYC build machine against the fits that ``bench/batch_references.py`` measured
# (kernel ridge at T = 2 000 / 6 000 / 12 000, Nyström at (T, rank) = (5 000, 500) /
# (20 000, 1 000) / (40 000, 2 000), relu, d = 8: the table ``BATCH_FITS_MEASURED`` in
# tests/test_estimates.py): every estimate within x1.4 of it (kernel ridge x0.73-0.81, Nyström
# x1.25-1.38; the test asks for x2). 2e-11 s is 50 Gflop/s, one core's FMA peak in gemm.
SECONDS_PER_LAPACK_FLOP = 2e-11


# ----------------------------------------------------------------------------------------------
# the learner spec: everything the pipeline knows about a learner, declared in its own module

ROLES = ("proposed", "competitor", "reference")

# The parameters every learner shares (step size and its schedule). ``key_omit`` is the frozen
# value under which a parameter is left out of a cell's key (see :class:`ilnrun.params.Param`).
ETA = Param(
    "eta", "float", 0.1, "step size (Dai et al.'s gamma)", min=0, min_exclusive=True, key_omit=0.1
)
SCHEDULE = Param(
    "schedule", "str", "constant", "step-size schedule", choices=SCHEDULES, key_omit="constant"
)
DECAY = Param(
    "decay",
    "float",
    1.0,
    "lambda of the 'inv' schedule eta/(1+lambda t)",
    min=0,
    min_exclusive=True,
    key_omit=1.0,
)
STEP_PARAMS = (ETA, SCHEDULE, DECAY)


def step_unused(h: dict) -> set[str]:
    """Step parameters a setting does not use: ``decay`` outside the ``inv`` schedule."""
    return set() if h.get("schedule") == "inv" else {"decay"}


# ``average`` of every online learner (docs/algorithms.md §0.5): the pass returns the averaged
# iterate ``fbar = (1/T) sum_{t=1..T} f_t`` (Corollary 1 of the ILN paper; f_t the predictor of
# round t, f_1 = 0) instead of the final one. The online pass, its losses and the support of the
# predictor are unchanged. ``false`` counts as unused (:func:`average_unused`), so that a setting
# without it keeps its cell, ``setting`` label and columns.
AVERAGE = Param(
    "average",
    "bool",
    False,
    "return the averaged iterate fbar = (1/T) sum_t f_t (the predictors of rounds 1..T; "
    "Corollary 1) instead of the final predictor",
    key_omit=False,
)


# Parameters that choose which predictor a pass returns, not what it draws: left out of a cell's
# seed (``Cell.seed_key``), so that the twin settings make the same pass.
SEED_FREE = frozenset({AVERAGE.name})


def average_unused(h: dict) -> set[str]:
    """``{"average"}`` when a setting does not average (so that it reads as before the key)."""
    return set() if h.get("average") else {"average"}


# ----------------------------------------------------------------------------------------------
# a learner's pass settings: its parameters stated once, in its spec's ``params``

# ``fit`` keywords that are not ``methods.<name>`` keys of the learner's own: its loss (the
# experiment's ``loss`` or ``methods.<name>.loss``, resolved by the config; absent for the
# square loss) and how a pass runs (``implements.CONTROLS``: the cell's time limit, threads).
LOSS = Param("loss", "str", DEFAULT_LOSS, "the loss the pass steps along (ilnrun.losses)")
DEADLINE = Param(
    "deadline", "float", None, "time.perf_counter() deadline of the pass", special=(None,)
)
THREADS = Param("threads", "int", None, "threads of a compiled pass", special=(None,))

_TYPES = {"int": "int", "float": "float", "bool": "bool", "str": "str"}


class PassSettings:
    """The settings of one pass of a learner, built by :func:`pass_settings`: a frozen
    dataclass with one field per ``fit`` keyword, its default the declared :class:`Param`'s.

    A learner states its parameters once — in its spec's ``params`` — and every pass (the
    public ``fit``, the numpy and compiled passes, the jax pass's ``static`` and ``inputs``)
    reads them from one object of this type instead of restating the keyword list and its
    defaults (docs/architecture.md §4). :meth:`keywords` is every setting, defaults included:
    what ``fit`` hands to :func:`ilnrun.learners.compiled.implemented`, so that no keyword
    escapes a pass's declaration."""

    PARAMS: tuple[Param, ...] = ()
    SIZE: str | None = None

    def keywords(self) -> dict[str, Any]:
        """Every setting by name (the ``fit`` keywords, defaults included)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def of(cls, args: Mapping[str, Any]):
        """The settings of the ``fit`` keywords ``args`` (``spec.fit_arguments``): the declared
        default for each keyword not given; an undeclared keyword is a ``TypeError``."""
        return cls(**args)

    @classmethod
    def signature(cls) -> inspect.Signature:
        """``(X, y, fmap, rng, *, <every setting>)``: the signature of a pass that takes them
        as keywords (what ``inspect.signature(spec.fit)`` reads)."""
        head = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in _FIT_HEAD]
        kw = inspect.Parameter.KEYWORD_ONLY
        return inspect.Signature(
            head
            + [
                inspect.Parameter(
                    f.name,
                    kw,
                    default=(
                        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
                    ),
                    annotation=f.type,
                )
                for f in dataclasses.fields(cls)
            ],
            return_annotation="FitResult",
        )

    @classmethod
    def takes(cls, run: Callable[..., FitResult]) -> Callable[..., FitResult]:
        """Decorate a pass ``run(X, y, fmap, rng, s)`` of these settings ``s``: it may then be
        called with a settings object (``run(X, y, fmap, rng, s)``, the passes among
        themselves) or with the ``fit`` keywords (``run(X, y, fmap, rng, eta=0.1, k=4)``: the
        public contract ``fit(X, y, fmap, rng, **hyper)``), each checked and defaulted by this
        type. Its signature lists the keywords (:meth:`signature`)."""

        @functools.wraps(run)
        def call(X, y, fmap, rng, settings=None, /, **keywords) -> FitResult:
            if settings is None:
                settings = cls(**keywords)
            elif keywords:
                settings = dataclasses.replace(settings, **keywords)
            return run(X, y, fmap, rng, settings)

        del call.__wrapped__  # its signature is the keywords', not the settings object's
        call.__signature__ = cls.signature()
        call.Settings = cls
        return call


_FIT_HEAD = ("X", "y", "fmap", "rng")


def pass_settings(
    name: str,
    params: Iterable[Param],
    *,
    size: str | None = None,
    resolved: Iterable[str] = (),
    extra: Iterable[Param] = (),
) -> type[PassSettings]:
    """The :class:`PassSettings` type of a learner's passes, derived from its ``params``.

    Its fields, in order: the budget ``size`` (``m``, ``k``, ``r``: required, an int), every
    parameter of ``params`` but those in ``resolved`` (config keys that the spec's
    ``arguments`` hook turns into other keywords before any pass, e.g. a preset and its
    constants), the ``extra`` keywords the passes take that are not config keys of the learner
    (:data:`LOSS`, a research switch), and :data:`DEADLINE`. Each default is its
    :class:`Param`'s ``default``, so a pass called without a key runs as a config that leaves
    it out. ``name`` names the type (``<name>.Settings`` in messages)."""
    skip = set(resolved)
    chosen = [p for p in params if p.name not in skip]
    unknown = skip - {p.name for p in params}
    if unknown:
        raise ValueError(f"{name}: resolved keys {sorted(unknown)} are not among its params")
    chosen += [p for p in extra if p.name != DEADLINE.name]
    chosen.append(DEADLINE)
    fields: list[tuple] = []
    if size is not None:
        fields.append((size, "int"))
    for p in chosen:
        kind = _TYPES.get(p.type, "Any")
        kind += " | None" if None in p.special or p.default is None else ""
        fields.append((p.name, kind, dataclasses.field(default=p.default)))
    names = [f[0] for f in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"{name}: a keyword declared twice in {names}")
    cls = dataclasses.make_dataclass(
        "Settings", fields, bases=(PassSettings,), frozen=True, kw_only=True
    )
    cls.__qualname__ = f"{name}.Settings"
    cls.__module__ = __name__
    cls.PARAMS, cls.SIZE = tuple(chosen), size
    return cls


@dataclass(frozen=True)
class BudgetSize:
    """How a budgeted learner spends the matched budget (docs/budgets.md §4).

    ``name`` is the size the learner takes (``m``, ``k``, ``r``: the keyword of its ``fit``);
    ``cost(match, T, n_eval)`` what one unit of that size spends over a pass of ``T`` rounds, in
    the unit of the convention ``match`` (``evaluations``, ``samples``, or ``total``: the pass
    and its kernel-free predictions on ``n_eval`` validation and test points), so the size is
    the budget target divided by the cost, rounded (:func:`ilnrun.budget.derive`);
    ``expected(size, T)`` the counters the learner must report for that size.

    ``setting_cost(match, T, n_eval, h)``, where a setting's parameters change what a unit of
    its size spends (Doubly SGD's ``batch``; Shrinking Gradient's expected Taylor copies with a
    non-square loss): that cost for grid setting ``h`` (an integer, or a
    :class:`~fractions.Fraction` for a cost in expectation), ``None`` where it is ``cost``'s;
    the size of such a setting is derived from the same target by the same rule
    (:func:`ilnrun.budget.setting_size`). ``setting_expected(size, T, h)``: the counters of such
    a setting (in expectation, rounded, where the pass draws a random number of evaluations),
    ``None`` where they are ``expected``'s (:meth:`expected_for`); ``setting_doc``: what the
    report says where a setting's size is its own.

    ``setting_params`` names the setting parameters that change the size a setting takes
    (those ``setting_cost`` reads, and those by which the spec's ``uses_budget`` lets a setting
    fix its size instead of taking the budget's: Doubly SGD's ``batch`` and ``block``); the
    report's table of derived sizes gives the size of each of their values in a grid that sets
    them (docs/budgets.md §4).
    """

    name: str
    cost: Callable[..., int]
    expected: Callable[[int, int], dict[str, int]]
    doc: str = ""
    default: int = 1  # the size of the learner's estimator when none is given (ilnrun.estimators)
    setting_cost: Callable[[str, int, int, Mapping], int | Fraction | None] | None = None
    setting_expected: Callable[[int, int, Mapping], dict[str, int] | None] | None = None
    setting_doc: str = ""
    setting_params: tuple[str, ...] = ()

    def expected_for(self, size: int, T: int, h: Mapping) -> dict[str, int]:
        """The counters of setting ``h`` (a grid setting or its ``fit`` keywords) at ``size``:
        ``setting_expected``'s where it has its own, else ``expected(size, T)``."""
        if self.setting_expected is not None:
            own = self.setting_expected(size, T, h)
            if own is not None:
                return own
        return self.expected(size, T)

    def unit_cost(self, match: str, T: int, n_eval: int = 0) -> int | None:
        """``cost(match, T, n_eval)``; a ``cost(match, T)`` of two parameters (a learner
        declared before ``total`` existed) serves every convention but ``total`` (``None``:
        the learner cannot be matched under it)."""
        if self.counts_scoring:
            return self.cost(match, T, n_eval)
        return None if match == "total" else self.cost(match, T)

    @cached_property
    def counts_scoring(self) -> bool:
        """Whether ``cost`` takes the points scored (``cost(match, T, n_eval)``; read once:
        every budget derived asks it of every budgeted learner)."""
        return len(inspect.signature(self.cost).parameters) >= 3


# ``methods.<learner>.eta_scale``: the unit of ``eta`` (docs/protocol.md §5.3), a key of every
# learner that has ``eta``. Never in the resolved config at its default, and left out of cell
# keys there (``key_omit``), so configs without it keep their cells.
ETA_SCALE = Param(
    "eta_scale",
    "str",
    "none",
    "the unit of eta: none (eta is the step size) or sqrt_T (eta is in units of 1/sqrt(T): the "
    "pass uses eta / sqrt(T), so one grid stays meaningful across a T sweep)",
    choices=("none", "sqrt_T"),
    listable=False,
    key_omit="none",
)


def scaled_eta(h: dict, T: int) -> dict:
    """``h`` without ``eta_scale``; under ``eta_scale: sqrt_T`` its ``eta`` becomes
    ``eta / sqrt(T)`` (``T`` the rounds of the pass)."""
    if "eta_scale" not in h:
        return h
    out = {k: v for k, v in h.items() if k != "eta_scale"}
    if h["eta_scale"] == "sqrt_T" and out.get("eta") is not None:
        out["eta"] = out["eta"] / math.sqrt(T)
    return out


@dataclass(frozen=True)
class LearnerSpec:
    """Everything the pipeline needs to know about one learner.

    - ``fit(X, y, fmap, rng, **hyper) -> FitResult``: one online pass (the algorithm).
    - ``params``: its config keys (``methods.<name>.<key>``), also the keyword arguments of
      ``fit`` (a contract test checks the signature against them); a learner with several
      passes derives the settings they share from them (:func:`pass_settings`), so that its
      parameters are stated once.
    - ``budget``: the size it takes from the matched budget, or ``None`` (not budget-limited).
    - ``role``: ``proposed`` (the learner under test: the report compares it with every
      competitor), ``competitor`` (budgeted baselines) or ``reference`` (drawn for scale).
    - ``batch``: the learner fits all ``T`` examples at once (no online pass; its per-round
      losses are not a learning curve): figures draw it as a level, reports state every online
      learner's gap to it.
    - ``needs_kernel``: runs only with a feature map that has a closed-form kernel.
    - ``estimated_validation``: its rows carry ``val_loss_estimated``, the validation loss of
      its kernel-expansion predictor by Algorithm 2 (``evaluation.select_on: estimated`` then
      selects its settings on it; docs/protocol.md §5.2).
    - hooks for special cases: ``unused(h)`` hyperparameters a setting does not use;
      ``arguments(h, size, T)`` the ``fit`` keywords of a setting (default: ``h`` without
      ``None`` plus the budget size); ``uses_budget(h)`` whether a setting takes the budget
      size; ``diagnostics(res, args, T)`` extra columns of a row; ``exact_online_loss(res, K,
      y)`` the pass's online loss with every prediction evaluated exactly, ``K`` the training
      kernel (:class:`ilnrun.theory.TrainKernel`: matrix or primal; for the regret of
      Theorem 1; learners without it get no regret); ``notes(settings, Ts)`` lines for
      ``ilnrun validate``; ``curve(res, t)`` extra learning-curve columns; ``memory(size, T,
      w)`` bytes of its working arrays for a size, ``T`` rounds and ``w`` numbers per drawn
      feature parameter (the estimate ``ilnrun validate`` checks against the machine; a fourth
      parameter, if the hook has one, gets the cell's ``fit`` keywords: :meth:`memory_bytes`).
    - ``kernel_blocks``: its predictor is a kernel expansion, evaluated exactly through the
      kernel blocks ``k(X_val, X_train)`` and ``k(X_test, X_train)`` (memory estimates;
      ``False`` for a predictor that evaluates itself, e.g. a feature expansion).
    - ``seconds(size, T, w, args, kernel_value)``: rough seconds of one numpy pass for a size,
      ``T`` rounds, ``w`` numbers per drawn parameter, the ``fit`` keywords and the seconds of
      one kernel value of the map (``ilnrun validate``'s estimate; constants measured on one
      core of the project's 2-core x86-64 build machine; ``None``: a generic rate).
    - ``estimated_test``: its pass also returns an averaged kernel expansion whose test loss
      Algorithm 2 estimates (``test_loss_estimated``; memory and time estimates).
    - ``estimator_defaults``: the defaults of its scikit-learn estimator (:mod:`ilnrun.estimators`)
      where they differ from the config's: a config key's default is frozen by the committed
      runs' numbers, while an estimator fitted with no tuning needs settings that learn in one
      pass over a few hundred rows (scikit-learn's own checks fit 200).
    - ``check(section)``: problems of a resolved ``methods.<name>`` section that its keys'
      declared ranges cannot state, as ``(key, message)`` (``key`` relative to the section,
      ``theta_nu[1]`` for the second value of a list); ``ilnrun validate`` and ``run`` refuse
      them (exit 2), the estimators raise them.
    - ``check_settings(settings, engine)``: the problems ``(key, message)`` of a grid's
      expanded settings on ``engine`` (``numpy`` or ``jax``), for combinations of values that
      one parameter's range cannot express: ``ilnrun validate`` and ``run`` refuse them (exit
      status 2, the key named). ``skip(h)``: a setting of the grid the learner leaves out, so
      that one grid can serve settings that need different values (``check_settings`` sees
      them).
    - ``engines``: other implementations of the same pass, by engine name: the module (a
      sibling of the learner's, relative to this package, e.g. ``{"jax": ".kernel_ogd_jax"}``)
      imported only when that engine runs (:meth:`engine`); see :mod:`ilnrun.engines`.
    - ``implements``: what each pass other than the numpy ``fit`` implements, by pass
      (``compiled``: the numba pass ``fit`` chooses where it applies; ``jax``: the module of
      ``engines["jax"]``), an :class:`~ilnrun.learners.implements.Implements` over the ``fit``
      keywords. A keyword a pass does not name is not implemented: the compiled pass leaves
      such a setting to the numpy code (noted), the jax engine refuses it at validation (exit
      status 2). A pass with no entry implements nothing (:mod:`ilnrun.learners.implements`).
    - ``losses``: the losses it learns with (:mod:`ilnrun.losses`; ``"every"``, i.e.
      :data:`ilnrun.losses.EVERY`, for a pass that steps along any loss's derivative). A learner
      with more than the square loss takes the ``fit`` keyword ``loss`` (the loss's name; absent
      for the square loss, so every square-loss setting keeps its keywords, cells and
      declarations); ``ilnrun validate`` refuses a loss it does not list (exit status 2).
    """

    name: str
    label: str
    short: str
    summary: str
    fit: Callable[..., FitResult]
    params: tuple[Param, ...]
    budget: BudgetSize | None = None
    role: str = "competitor"
    needs_kernel: bool = False
    estimated_validation: bool = False
    unused: Callable[[dict], set[str]] = step_unused
    uses_budget: Callable[[dict], bool] | None = None
    arguments: Callable[[dict, int | None, int], dict] | None = None
    diagnostics: Callable[[FitResult, dict, int], dict] | None = None
    exact_online_loss: Callable[[FitResult, Any, np.ndarray], float] | None = None
    notes: Callable[[list[dict], list[int]], list[str]] | None = None
    curve: Callable[[FitResult, np.ndarray], dict] | None = None
    memory: Callable[..., int] | None = None
    choices: tuple[str, ...] = ()  # what the report says about this learner's protocol
    engines: dict[str, str] = field(default_factory=dict)
    batch: bool = False
    kernel_blocks: bool = True
    estimated_test: bool = False
    seconds: Callable[..., float] | None = None
    estimator_defaults: dict[str, Any] = field(default_factory=dict)
    check: Callable[[dict], list[tuple[str, str]]] | None = None
    check_settings: Callable[[list[dict], str], list[tuple[str, str]]] | None = None
    skip: Callable[[dict], bool] | None = None
    implements: dict[str, Implements] = field(default_factory=dict)
    losses: tuple[str, ...] | str | Callable[[], tuple[str, ...]] = (DEFAULT_LOSS,)
    why_not_loss: Callable[[str], str] | None = None

    @property
    def supported_losses(self) -> tuple[str, ...]:
        """The losses it learns with (``losses``; :data:`ilnrun.losses.EVERY`: every registered
        loss, those registered after it included; a callable: its answer when asked, so that
        it may choose among the losses registered then, e.g. those with an analytic ``l'``).
        ``why_not_loss(name)``, where given, says why it refuses loss ``name`` (``ilnrun
        validate`` adds it to the refusal)."""
        if callable(self.losses):
            return tuple(self.losses())
        return tuple(LOSSES) if self.losses == EVERY else tuple(self.losses)

    def engine(self, name: str):
        """The module implementing this learner on engine ``name`` (imported on first use), or
        ``None`` when the learner has none for that engine."""
        import importlib

        module = self.engines.get(name)
        return None if module is None else importlib.import_module(module, __package__)

    def unimplemented(self, pass_name: str, args: dict) -> list[tuple[str, Any]]:
        """The ``(key, value)`` of the ``fit`` keywords ``args`` that pass ``pass_name``
        (``compiled``, ``jax``) does not implement (every one where it declares nothing)."""
        return self.implements.get(pass_name, NOTHING).missing(args)

    def setting_arguments(self, h: dict, T: int) -> dict:
        """The ``fit`` keywords of grid setting ``h`` at ``T`` rounds, with a budget size of 1
        where it takes one: what ``ilnrun validate`` checks the passes' declarations on (no
        pass declares a size or a step size by value)."""
        return self.fit_arguments(h, 1 if self.takes_budget(h) else None, T)

    def not_implemented(self, pass_name: str, settings: list[dict], Ts: list[int]) -> dict:
        """Each ``fit`` keyword of the grid ``settings`` (at every ``T`` of ``Ts``) that pass
        ``pass_name`` does not implement, with its distinct values."""
        declared = self.implements.get(pass_name, NOTHING)
        return unimplemented(declared, [self.setting_arguments(h, T) for h in settings for T in Ts])

    def memory_bytes(self, size: int | None, T: int, w: int, args: dict) -> int:
        """The ``memory`` hook's estimate for a cell with ``fit`` keywords ``args`` (0 without a
        hook). A hook with a fourth parameter also gets ``args``, for learners whose memory
        depends on a grid parameter rather than on a budget size (Nyström's ``rank``)."""
        if self.memory is None:
            return 0
        if self._memory_takes_args:
            return self.memory(size or 0, T, w, args)
        return self.memory(size or 0, T, w)

    @cached_property
    def _memory_takes_args(self) -> bool:
        """Whether the ``memory`` hook has a fourth parameter (read once: ``ilnrun validate``
        asks for every cell's estimate)."""
        return len(inspect.signature(self.memory).parameters) >= 4

    @property
    def config_params(self) -> tuple[Param, ...]:
        """Every key of ``methods.<name>``: its ``params``, and ``eta_scale``
        (:data:`ETA_SCALE`) for a learner with ``eta``."""
        has_eta = any(p.name == "eta" for p in self.params)
        return (*self.params, ETA_SCALE) if has_eta else self.params

    def takes_budget(self, h: dict) -> bool:
        """Whether setting ``h`` takes its size from the matched budget."""
        if self.budget is None:
            return False
        return True if self.uses_budget is None else self.uses_budget(h)

    def fit_arguments(self, h: dict, size: int | None, T: int) -> dict:
        """The keyword arguments of ``fit`` for setting ``h`` (``None`` entries are unused).

        A setting with ``eta_scale: sqrt_T`` states ``eta`` in units of ``1/sqrt(T)``: the pass
        gets ``eta / sqrt(T)`` (docs/protocol.md §5.3, :func:`scaled_eta`)."""
        h = scaled_eta(h, T)
        if self.arguments is not None:
            return self.arguments(h, size, T)
        out = {k: v for k, v in h.items() if v is not None}
        if size is not None and self.budget is not None:
            out[self.budget.name] = size
        return out
