"""Shrinking Gradient — ILN paper (Livni, Carmon, Globerson) Algorithms 1 and 2.

Algorithm 1, round t (``E_t`` from Algorithm 2, EST_SCALAR_PROD, is also the online prediction):

    E_t = EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m)
    if |E_t| < 16 B:  alpha_t = eta_t (y_t - E_t)        # gradient DESCENT step (see erratum)
    else:             alpha   = alpha / 4                # shrink

Algorithm 2: ``E = 0`` if ``alpha = 0``; else draw ``m`` iid pairs ``(i, w)`` with
``i ~ q(i) = |alpha_i| / |alpha|_1`` and ``w ~ mu`` and return
``E = |alpha|_1 / m * sum_k sgn(alpha_i) psi(x_i; w) psi(x_t; w)``.

**Erratum.** The paper prints ``alpha_t = -eta (y_t - E_t)``, which is gradient *ascent* on the
squared loss. Its own analysis (Section 5: ``f_{t+1} = f_t - eta grad_t`` with
``grad_t = (E_t - y_t) Phi(x_t)``) gives ``alpha_t = eta (y_t - E_t)``, implemented here.
``printed_sign=True`` reproduces the printed rule; ``tests/test_shrinking_gradient.py`` shows it
diverges.

Cost per round is O(m log t), independent of the number of stored examples (docs/algorithms.md
§1):

- ``alpha = s * a`` with a global scale ``s``: a shrink is ``s <- s / 4`` (O(1));
- ``|a|`` only grows by appends, so its cumulative sum ``cum`` is append-only and the ``m`` draws
  of ``i`` are one vectorized ``searchsorted(cum, u * cum[-1])``; for ``m`` and ``t`` of a few
  hundred and more the keys are searched in sorted order (an ``argsort`` of ``u``, then the
  indices are put back in draw order): the same indices, about twice as fast, because a binary
  search over random keys mispredicts its branches (:func:`draw_indices`); the features of the
  stored ``x_i`` are then read in that ascending row order too and put back in draw order
  (:func:`gather_pairs`), so the estimate is the same, bit for bit;
- the averaged predictor ``fbar = (1/T) sum_{t=1..T} f_t`` (Corollary 1) needs only the appended
  ``alpha_t`` and the shrink count before each round (O(1) per round); its weights come from one
  backward recursion at the end (:func:`average_weights`, :func:`iterate_weights`: the same
  recursion averages Doubly SGD's and kernel OGD's iterates). With ``average=True`` it is the
  predictor the pass returns (``FitResult.predictor``); ``FitResult.averaged`` holds it either
  way (``test_loss_avg``).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from ..features import Coordinate, FeatureMap, Fourier, RandomNet, ReLU
from ..losses import LOSSES
from ..params import Param
from ..schedules import step_sizes
from ..theory import TrainKernel, lemma5_ratio
from ..threads import threads_per_cell
from .base import (
    AVERAGE,
    LOSS,
    STEP_PARAMS,
    THREADS,
    BudgetSize,
    FitResult,
    KernelExpansion,
    LearnerSpec,
    OnlinePass,
    average_unused,
    compiled_rounds,
    new_counters,
    pass_settings,
    step_unused,
)
from .compiled import SG_CHECKS, SG_ESTIMATE_CHECKS, implemented
from .compiled import available as compiled_available
from .implements import ANY, Implements
from .taylor import P_DEFAULT, ZEROTH, ZEROTH_DEFAULT, copies_mean, estimate_derivative

SAMPLERS = ("iid", "systematic")
# Algorithm 1 shrinks when |E_t| >= SHRINK_BOUND * B (the paper's 16 B)
SHRINK_BOUND = 16.0

# When the global scale falls below this, fold it into the coefficients (O(t), happens at most
# once every ~250 consecutive shrinks) so that ``a = alpha / s`` stays in floating-point range.
RESCALE_BELOW = 1e-150

# Search the m keys in sorted order once both m and t reach this (measured crossover on x86-64:
# below it numpy's plain searchsorted is faster, above it the sorted search wins up to ~2.5x).
SORTED_SEARCH_FROM = 512


def draw_indices(
    cum: np.ndarray, keys: np.ndarray, keys_sorted: bool = False
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``i = cum.searchsorted(keys, side="right")`` in the order of ``keys``, searching the keys
    in sorted order when that is faster; then also returns ``order`` (``keys[order]`` sorted)
    and ``i[order]`` (ascending), else ``None, None``."""
    if keys_sorted or len(keys) < SORTED_SEARCH_FROM or len(cum) < SORTED_SEARCH_FROM:
        return cum.searchsorted(keys, side="right"), None, None
    order = keys.argsort()
    i_sorted = cum.searchsorted(keys.take(order), side="right")
    i = np.empty(len(keys), dtype=np.intp)
    i[order] = i_sorted
    return i, order, i_sorted


def gather_pairs(pairs, X: np.ndarray, i: np.ndarray, w: np.ndarray, order, i_sorted):
    """``pairs(X, i, w)``: with ``order`` given, evaluated in ascending row order (the rows of a
    large ``X`` are then read nearly sequentially instead of at random) and put back in draw
    order — the same values, element for element, so the estimate is unchanged."""
    if order is None:
        return pairs(X, i, w)
    out = np.empty(len(i))
    out[order] = pairs(X, i_sorted, w.take(order, axis=0))
    return out


C_DEFAULT = 1.0  # the default of the theory preset's constant c (PARAMS' "c")


def theorem1_eta(B: float, T: int) -> float:
    """Theorem 1's step size ``eta = B / sqrt(T)`` (paper Eq. 15; also kernel OGD's theory
    preset)."""
    return B / math.sqrt(T)


def theory_preset(B: float, T: int, c: float) -> tuple[float, int]:
    """Theorem 1's setting: ``eta = B / sqrt(T)``, ``m = ceil(c B^4 T log(B T))``."""
    return theorem1_eta(B, T), max(1, math.ceil(c * B**4 * T * math.log(max(B * T, math.e))))


PARAMS = (
    *STEP_PARAMS,
    Param(
        "B",
        "float",
        1.0,
        "norm bound; shrink when |E_t| >= 16 B",
        min=0,
        min_exclusive=True,
        key_omit=1.0,
    ),
    Param("sampler", "str", "iid", "draws of i in Algorithm 2", choices=SAMPLERS, key_omit="iid"),
    Param(
        "preset",
        "str",
        "budget",
        "'budget': m from the matched budget, eta from the grid; 'theory': Theorem 1's "
        "eta = B/sqrt(T), m = ceil(c B^4 T log(BT)) (no budget matching)",
        choices=("budget", "theory"),
        key_omit="budget",
    ),
    Param(
        "c",
        "float",
        C_DEFAULT,
        "constant of the theory preset's m",
        min=0,
        min_exclusive=True,
        key_omit=1.0,
    ),
    AVERAGE,
    # paper 003's unbiased gradient of a non-square loss (docs/algorithms.md §1.10)
    Param(
        "taylor_p",
        "float",
        P_DEFAULT,
        "non-square loss: paper 003's p, P(N = n) = (p-1)/p^(n+1) further Algorithm-2 "
        "estimates a step (1/(p-1) expected; larger p: fewer, and a larger variance)",
        min=1,
        min_exclusive=True,
        key_omit=P_DEFAULT,
    ),
    Param(
        "taylor_cap",
        "int",
        None,
        "non-square loss: the most further estimates a step draws (N > cap: the series stops; "
        "BIASED by its remainder); null: no cap, unbiased",
        min=0,
        special=(None,),
        key_omit=None,
    ),
    Param(
        "taylor_zeroth",
        "str",
        ZEROTH_DEFAULT,
        "non-square loss: 'exact': l'(E_t) always in the step, only the higher Taylor terms "
        "drawn (a variance that vanishes as m grows); 'sampled': paper 003 Lemma 1's estimator "
        "as printed, every term drawn by N (a variance >= l'(E_t)^2/(p-1) at any m)",
        choices=ZEROTH,
        key_omit=ZEROTH_DEFAULT,
    ),
)

# ``printed_sign=True``: the shrink-free step with the sign of the paper's printed Algorithm 1
# (a ``fit`` keyword for tests and research, not a config key; see the module docstring)
PRINTED_SIGN = Param(
    "printed_sign", "bool", False, "the step's sign as the paper prints Algorithm 1"
)

# The passes' settings (fit, fit_compiled, fit_numpy and the jax pass), derived from PARAMS: m
# (the budget's size), every parameter but the theory preset's (turned into eta and m by the
# spec: _arguments), the loss, the printed sign and the compiled pass's threads.
Settings = pass_settings(
    "shrinking_gradient",
    PARAMS,
    size="m",
    resolved=("preset", "c"),
    extra=(PRINTED_SIGN, LOSS, THREADS),
)


@Settings.takes
def fit(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """One online pass of Algorithm 1 over ``(X, y)``; returns final and averaged predictors.

    Runs the compiled pass (:func:`fit_compiled`) where it applies (a ``np.random.Generator``,
    a setting it implements, :data:`COMPILED`, and a feature map the kernels know), else the
    numpy code
    (:func:`fit_numpy`): the same draws and the same numbers, bit for bit. ``threads > 1`` lets
    a big pass (``m >= PARALLEL_FROM`` samples a round) search and gather in parallel (compiled
    path only): the same numbers for any number of threads. ``None``: the environment variable
    ``ILNRUN_THREADS`` (default 1), so that ``ilnrun run`` cells can use it (docs/algorithms.md
    §1.9)."""
    from . import shrinking_gradient_kernels as kernels  # numba: imported where a pass runs

    if hp.threads is None:
        hp = dataclasses.replace(hp, threads=threads_per_cell())
    if (
        type(rng) is np.random.Generator
        and implemented("shrinking_gradient", COMPILED, hp.keywords(), kernels.note)
        and kernels.use_compiled(fmap)
    ):
        return fit_compiled(X, y, fmap, rng, hp)
    return fit_numpy(X, y, fmap, rng, hp)


# What the compiled pass (fit_compiled) and the jax pass (shrinking_gradient_jax) implement, by
# ``fit`` keyword (ilnrun.learners.implements): the jax pass returns the final predictor only.
COMPILED = Implements(
    dict(eta=ANY, m=ANY, B=ANY, schedule=ANY, decay=ANY, sampler=SAMPLERS, printed_sign=ANY,
         average=ANY, loss=("square",), taylor_p=(P_DEFAULT,), taylor_cap=(None,),
         taylor_zeroth=(ZEROTH_DEFAULT,))
)  # fmt: skip
# (the square loss only: the taylor_* keywords of another loss's gradient at their defaults, which
# the square loss does not use; a config never hands them to a square-loss pass, _unused)
JAX = Implements({**COMPILED.values, "average": (False,)})

# a round searches and gathers in parallel (threads > 1) from this many samples: below it the
# cost of starting the threads exceeds the gain
PARALLEL_FROM = 4096


@Settings.takes
def fit_compiled(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """:func:`fit_numpy` compiled (``shrinking_gradient_kernels.sg_rounds``): the same pass,
    draws and arithmetic; the deadline is looked at after round 1 (as :func:`fit_numpy` does),
    then between calls of a few million samples. The square loss only (:data:`COMPILED`; the
    ``taylor_*`` keywords of another loss's gradient are not used)."""
    run = CompiledPass(X, y, fmap, rng, hp)
    n, timed_out = compiled_rounds(
        run.T, hp.deadline, lambda t: max(1, hp.m), run.rounds, lambda: bool(run.counts[3])
    )
    c = new_counters()
    c.update(
        train_evals=int(run.counts[2]),
        features_sampled=int(run.counts[1]),
        shrinks=int(run.counts[0]),
    )
    s = float(run.state[0])
    return _result(s * run.a[:n], run.losses[:n], c, bool(run.counts[3]), timed_out,
                   run.alpha_new[:n], run.shrinks_before[:n], run.alpha_l1[:n], hp.average,
                   compiled=True)  # fmt: skip


class CompiledPass:
    """The compiled pass over ``(X, y)``: the arrays it carries between its calls of
    ``shrinking_gradient_kernels.sg_rounds`` (:meth:`rounds`), which :func:`fit_compiled` makes
    and the benchmarks play windows of rounds with (``bench/sg_windows.py``).

    A coordinate pass on numpy's PCG64 makes the generator's numbers in the kernels
    (``stream``: its state goes in, and is put back into ``rng`` after every call). With
    ``threads > 1`` and ``m >= PARALLEL_FROM`` each round runs in blocks in parallel: a
    coordinate pass on PCG64 on ``threads - 1`` threads started for each call
    (``kernels.sg_worker``) and this one, draws included; another on numba's threads."""

    def __init__(
        self, X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator,
        hp: Settings,
    ) -> None:  # fmt: skip
        from . import shrinking_gradient_kernels as kernels

        if hp.loss != "square":
            raise ValueError("the compiled Shrinking Gradient pass implements the square loss only")
        self.kernels, self.rng, self.hp = kernels, rng, hp
        T = self.T = len(y)
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y = np.ascontiguousarray(y, dtype=float)
        self.etas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
        self.a, self.sgn = np.zeros(T), np.zeros(T)
        # prefix sums, then +inf (kernels.guided_search reads past them)
        self.cum = np.full(T + 4, np.inf)
        self.alpha_new, self.alpha_l1, self.losses = np.zeros(T), np.zeros(T), np.empty(T)
        self.shrinks_before = np.zeros(T, dtype=np.int64)
        self.state = np.array([1.0, 0.0, 2.0, 0.0])  # s, total, the loss's exponent, guide scale
        self.counts = np.zeros(4, dtype=np.int64)  # shrinks, features_sampled, train_evals, div.
        # the guide of the index search (kernels.guide_update): buckets, [U, top, covered]
        self.G = np.empty(2 * max(T, 64) + 2, dtype=np.int64)
        self.guide = np.array([0, -1, T + 1])
        self.kind, self.param = kernels.kind_of(fmap), kernels.map_param(fmap)
        self.net = kernels.map_net(fmap)  # (None but for random-net maps)
        self.coord = kernels.map_coord(fmap)  # (None but for coordinate maps)
        self.stream = kernels.own_stream(rng, self.kind, self.X.shape[1])
        self.blocks, self.work = None, None  # one thread: the serial pass
        self.threads = min(hp.threads or 1, kernels.max_threads())  # None: one thread
        if self.threads > 1 and hp.m >= PARALLEL_FROM:
            if self.stream is not None:
                self.blocks = kernels.BLOCKS_PER_THREAD * self.threads
                self.work = kernels.threaded_work(hp.m, self.blocks, self.stream)
                self.work[8][kernels.STOP] = 1  # compiled (or loaded) here: returns at once
                self._worker()
            else:
                self.blocks = kernels.set_threads(self.threads)

    def _worker(self) -> None:
        """One thread's part of a threaded pass (``kernels.sg_worker``)."""
        self.kernels.sg_worker(
            self.work, self.X, self.cum, self.sgn, self.G, self.hp.m, self.blocks,
            self.hp.sampler == "systematic",
        )  # fmt: skip

    def rounds(self, t: int, t1: int) -> int:
        """Play rounds ``t .. t1 - 1``; the round it stopped at (``t1``, or after a divergent
        estimate)."""
        kernels, hp, workers = self.kernels, self.hp, []
        try:
            if self.work is not None:
                ctl = self.work[8]
                ctl[kernels.STOP], ctl[kernels.NEXT] = 0, self.blocks
                workers = [
                    threading.Thread(target=self._worker, daemon=True)
                    for _ in range(self.threads - 1)
                ]
                for w in workers:
                    w.start()
            return kernels.sg_rounds(
                t, t1, self.X, self.y, self.etas, self.kind, self.param, self.net, self.coord,
                hp.m, SHRINK_BOUND * hp.B, -1.0 if hp.printed_sign else 1.0,
                hp.sampler == "systematic", RESCALE_BELOW, self.blocks,
                None if self.stream is not None else self.rng, self.stream, self.work, self.G,
                self.guide, self.a, self.sgn, self.cum, self.alpha_new, self.shrinks_before,
                self.alpha_l1, self.losses, self.state, self.counts,
            )  # fmt: skip
        finally:
            if self.work is not None:
                self.work[8][kernels.STOP] = 1
                for w in workers:
                    w.join()
            if self.stream is not None:
                kernels.pcg.put_state(self.rng, self.stream)


@Settings.takes
def fit_numpy(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """One online pass of Algorithm 1 over ``(X, y)`` in numpy (the reference).

    With the square loss (the default) the step is ``eta_t (y_t - E_t)``, as always. With
    another loss it is ``-eta_t g_t``, ``g_t`` paper 003's unbiased estimate of ``l'(<f_t,
    phi(x_t)>, y_t)`` (:func:`ilnrun.learners.taylor.estimate_derivative`): its Taylor series
    around the pilot ``E_t`` (the round's own Algorithm-2 estimate, also its prediction) over
    ``N`` further Algorithm-2 estimates of ``m`` samples each, ``P(N = n) = (p − 1) / p^{n+1}``
    with ``p = taylor_p``; ``taylor_cap`` caps ``N`` (biased), ``taylor_zeroth`` keeps the first
    term out of the lottery (docs/algorithms.md §1.10). Every copy's ``2 m`` evaluations are
    counted in ``train_evals`` and ``features_sampled``, the copies in ``taylor_copies``; a
    matched budget sizes ``m`` for their expected number (:func:`estimates_per_round`)."""
    run = OnlinePass(y, hp.eta, hp.schedule, hp.decay, hp.deadline, hp.loss)
    T, etas = run.T, run.etas
    series = run.loss.derivative_series
    if not run.square and series is None:
        raise ValueError(
            f"Shrinking Gradient needs an analytic loss derivative: {hp.loss!r} has no "
            f"derivative_series ({run.loss.no_series or 'none given'})"
        )
    copies = 0  # copies of Algorithm 2 drawn for the unbiased gradient (a non-square loss)
    sign = -1.0 if hp.printed_sign else 1.0
    threshold = SHRINK_BOUND * hp.B
    a = np.zeros(T)  # alpha = s * a
    sgn = np.zeros(T)  # sgn[i] = np.sign(a[i]), kept in step with a (one gather instead of two)
    cum = np.zeros(T)  # cum[i] = sum_{j <= i} |a_j|   (append-only)
    alpha_new = np.zeros(T)  # alpha_t as appended at round t (0 after a shrink)
    shrinks_before = np.zeros(T, dtype=np.int64)  # K_t: shrinks before round t
    alpha_l1 = np.zeros(T)  # |alpha^(t+1)|_1 after round t (Lemma 5: <= (16B + 1) eta t)
    s = 1.0
    total = 0.0  # = cum[t - 1]: |alpha|_1 = s * total
    # counted in the loop as the features are drawn and evaluated (docs/budgets.md)
    train_evals = features_sampled = shrinks = 0
    offsets = np.arange(hp.m) / hp.m if hp.sampler == "systematic" else None
    point = fmap.point
    pairs = fmap.pairs
    sample = fmap.sample

    def estimate() -> float:
        """Algorithm 2, EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m), for the current round ``t``
        and ``alpha = s a`` (``total > 0``): one unbiased estimate of ``<f_t, phi(x_t)>``, its
        ``2 m`` evaluations counted."""
        nonlocal train_evals, features_sampled
        u = rng.random(hp.m) if offsets is None else offsets + rng.random() / hp.m
        u *= total
        # searching the first t - 1 sums gives min(searchsorted(cum[:t], u), t - 1): an
        # index past the end (u * total rounded up to total) is clamped to the last example
        i, order, i_sorted = draw_indices(cum[: t - 1], u, keys_sorted=offsets is not None)
        w = sample(rng, hp.m)
        psi_i = gather_pairs(pairs, X, i, w, order, i_sorted)
        psi_t = point(X[t], w)
        features_sampled += len(w)
        train_evals += psi_i.size + psi_t.size
        signed = sgn.take(i)
        signed *= psi_i
        return s * total / hp.m * float(np.dot(signed, psi_t))

    for t in run.rounds():  # round t + 1 of the paper; examples 0..t-1 are stored
        shrinks_before[t] = shrinks
        y_t = run.y[t]
        # --- Algorithm 2: EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m) ---------------------------
        E = estimate() if total > 0.0 else 0.0
        if run.diverges(t, E):
            break
        # --- Algorithm 1: gradient step or shrink -------------------------------------------
        if abs(E) < threshold:
            if run.square:
                step = sign * etas[t] * (y_t - E)
            elif total > 0.0:  # paper 003's unbiased l'(<f_t, phi(x_t)>, y_t), around E_t
                g, n = estimate_derivative(
                    lambda x0, k, y_t=y_t: series(x0, y_t, k), E, estimate, rng,
                    p=hp.taylor_p, cap=hp.taylor_cap, zeroth=hp.taylor_zeroth,
                )  # fmt: skip
                copies += n
                step = -sign * etas[t] * g
            else:  # f_t = 0: <f_t, phi(x_t)> = 0 exactly, and so is its gradient's length
                step = -sign * etas[t] * run.gradient(t, 0.0)
            alpha_new[t] = step
            a_t = step / s
            a[t] = a_t
            sgn[t] = 1.0 if a_t > 0.0 else -1.0 if a_t < 0.0 else 0.0
            total = total + abs(a_t)
        else:
            s /= 4.0
            shrinks += 1
        cum[t] = total
        alpha_l1[t] = s * total
        if s < RESCALE_BELOW:  # fold the scale into a; rare, see RESCALE_BELOW
            a[: t + 1] *= s
            np.sign(a[: t + 1], out=sgn[: t + 1])
            np.cumsum(np.abs(a[: t + 1]), out=cum[: t + 1])
            total = float(cum[t])
            s = 1.0

    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled, shrinks=shrinks)
    if not run.square:
        counters["taylor_copies"] = copies
    n = len(run.losses)
    return _result(s * a[:n], run.losses, counters, run.diverged, run.timed_out, alpha_new[:n],
                   shrinks_before[:n], alpha_l1[:n], hp.average)  # fmt: skip


def _result(
    alpha, losses, counters, diverged, timed_out, alpha_new, shrinks_before, alpha_l1,
    average=False, compiled=False,
):  # fmt: skip
    """The pass's :class:`FitResult`: the final predictor ``alpha`` (with ``average``, the
    averaged one instead), the averaged one (:func:`average_weights`, its recursion compiled
    after a compiled pass) and, for diagnostics (Lemma 5, exact regret; not used by the
    algorithm), ``alpha_l1``, ``alpha_new`` and ``shrinks_before``. The returned averaged
    predictor is its own :class:`KernelExpansion` (the same coefficients as ``averaged``), so
    that the predictions of each are counted once (``costs``). With ``average`` the final
    predictor is kept as well (``FitResult.final``: the pass's result without ``average``)."""
    averaged = KernelExpansion(alpha_new * average_weights(shrinks_before, compiled))
    predictor = KernelExpansion(averaged.alpha if average else alpha)
    extras = {"alpha_l1": alpha_l1, "alpha_new": alpha_new, "shrinks_before": shrinks_before}
    final = KernelExpansion(alpha) if average else None
    return FitResult(predictor, losses, counters, diverged, timed_out, averaged, extras, final)


def average_weights(K: np.ndarray, compiled: bool = False) -> np.ndarray:
    """Weights ``g_i`` with ``fbar = (1/n) sum_{t<n} f_t = sum_i alpha_i g_i Phi(x_i)``.

    ``alpha_i`` (as appended at round i) is divided by 4 at every later shrink, so its weight in
    ``f_r`` (r > i) is ``4^-(K_r - K_i)`` with ``K_r`` the shrinks before round r: the iterates
    of :func:`iterate_weights` with the factors ``decay_r = 4^-(K_{r+1} - K_r)``.
    """
    if len(K) == 0:
        return np.zeros(0)
    return iterate_weights(0.25 ** np.diff(K).astype(float), compiled)  # 4^-(K_{r+1} - K_r)


def iterate_weights(decay: np.ndarray, compiled: bool = False) -> np.ndarray:
    """Weights ``g_i`` of the averaged iterate ``fbar = (1/n) sum_{r<n} f_r`` (Corollary 1) of a
    pass whose predictor evolves as ``f_0 = 0``, ``f_{r+1} = decay_r f_r + u_r`` (``u_r`` the
    terms appended at round r, ``n = len(decay) + 1`` rounds): ``fbar = sum_i g_i u_i``.

    ``u_i`` enters ``f_r`` (r > i) multiplied by ``prod_{i<q<r} decay_q``, so ``g_i = G_i / n``
    with ``G_i = sum_{i<r<n} prod_{i<q<r} decay_q``: the backward recursion ``G_{n-1} = 0``,
    ``G_{n-2} = 1``, ``G_i = 1 + decay_{i+1} G_{i+1}`` (O(n) once, at the end). It multiplies the
    factors as the pass applies them and never divides by their products, so it holds for any
    factor (a shrink's 1/4, exact to rounding however many occur; Doubly SGD's ``1 - gamma_t
    nu``, which may be <= 0 in early rounds). ``decay_0`` is not used (no term precedes round
    0). ``compiled``: the recursion as ``shrinking_gradient_kernels.average_recursion`` (the
    same operations; a Python loop costs about as much as a compiled Shrinking Gradient pass
    at T = 200)."""
    n = len(decay) + 1
    G = np.zeros(n)
    if compiled:
        from .shrinking_gradient_kernels import average_recursion

        average_recursion(decay, G)
        return G / n
    acc = 0.0
    for i in range(n - 2, -1, -1):
        acc = 1.0 + decay[i + 1] * acc if i + 1 < n - 1 else 1.0
        G[i] = acc
    return G / n


def _probe(kind: int) -> tuple:
    """The self-checks' data: 70 points in 19 dimensions (a pass on the first 50, estimates at
    the other 20) and a map of ``kind``."""
    from . import shrinking_gradient_kernels as kernels

    probe = np.random.default_rng(20261123)
    D = 19
    X = probe.standard_normal((70, D)) / 3.0
    y = np.tanh(X[:50, 0] + X[:50, 1])
    fmap = {
        kernels.COORDINATE: Coordinate,
        kernels.RELU: ReLU,
        kernels.RANDOM_NET: lambda d: RandomNet(d, 11),  # h = 11: a block of 8 and a rest
    }.get(kind, lambda d: Fourier(d, 1.7))(D)
    return X, y, fmap


def _probe_kw(sampler: str) -> dict:
    return dict(eta=0.5, m=23, B=1 / 8, sampler=sampler, schedule="inv_sqrt")


def _agrees(kind: int) -> bool:
    """One small pass, compiled and numpy, with every sampler: equal bit for bit (the same BLAS
    kernel and einsum order as this numpy build). Nothing else is compiled for the check."""
    X, y, fmap = _probe(kind)
    for sampler in ("iid", "systematic"):
        r0 = fit_numpy(X[:50], y, fmap, np.random.default_rng(1), **_probe_kw(sampler))
        r1 = fit_compiled(X[:50], y, fmap, np.random.default_rng(1), **_probe_kw(sampler))
        if not (
            np.array_equal(r0.losses, r1.losses)
            and np.array_equal(r0.predictor.alpha, r1.predictor.alpha)
        ):
            return False
    return True


def _estimates_agree(kind: int) -> bool:
    """The compiled Algorithm-2 test estimates of the numpy passes' predictors (every sampler)
    equal the numpy ones bit for bit (the same BLAS kernel, einsum order and pairwise sum as
    this numpy build); checked where estimates first run (``estimates_compiled``): nothing but
    the estimates is compiled for it."""
    X, y, fmap = _probe(kind)
    for sampler in ("iid", "systematic"):
        r0 = fit_numpy(X[:50], y, fmap, np.random.default_rng(1), **_probe_kw(sampler))
        e0 = r0.predictor.estimate_numpy(X[:50], X[50:], fmap, 31, np.random.default_rng(2), 90)
        e1 = r0.predictor.estimate_compiled(X[:50], X[50:], fmap, 31, np.random.default_rng(2), 90)
        if not np.array_equal(e0, e1):
            return False
    return True


SG_CHECKS.append(_agrees)
SG_ESTIMATE_CHECKS.append(_estimates_agree)


# ----------------------------------------------------------------------------------------------
# spec: what the pipeline knows about Shrinking Gradient

TAYLOR_KEYS = frozenset({"taylor_p", "taylor_cap", "taylor_zeroth"})


def _unused(h: dict) -> set[str]:
    """Under the ``theory`` preset ``eta``/``schedule``/``decay`` are set by Theorem 1; ``c``
    is used only by it; ``average: false`` reads as before the key; the ``taylor_*`` keys only
    with a loss other than the square loss (so that a square-loss setting keeps its cell)."""
    taylor = set() if h.get("loss") not in (None, "square") else set(TAYLOR_KEYS)
    if h.get("preset") == "theory":
        return step_unused(h) | average_unused(h) | taylor | {"eta", "schedule", "decay"}
    return step_unused(h) | average_unused(h) | taylor | {"c"}


def _arguments(h: dict, m: int | None, T: int) -> dict:
    """``fit`` keywords: the setting, ``m`` from the budget, or Theorem 1's ``eta`` and ``m``."""
    out = {k: v for k, v in h.items() if k not in ("preset", "c") and v is not None}
    if h.get("preset") == "theory":
        out["eta"], out["m"] = theory_preset(h["B"], T, h["c"])
        out["schedule"] = "constant"
    elif m is not None:
        out["m"] = m
    return out


def _diagnostics(res: FitResult, args: dict, T: int) -> dict:
    """Lemma 5's ratio ``max_t |alpha^(t+1)|_1 / ((16B + 1) sum_{s<=t} eta_s)`` (<= 1 iff the
    bound held all along the pass). Square loss only (NaN otherwise): the lemma's proof bounds
    each step's coefficient by ``|E_t - y_t| <= 16B + 1``, the square loss's derivative at a
    shrunk estimate; paper 003's Taylor estimate of another loss's derivative is unbiased but
    not bounded (its weight ``p^{N+1}/(p - 1)`` grows with the drawn order ``N``), so the lemma
    says nothing of those passes (docs/algorithms.md §1.10)."""
    if args.get("loss", "square") != "square":
        return {"lemma5_max_ratio": math.nan}
    etas = step_sizes(args["schedule"], args["eta"], T, args.get("decay"))
    return {"lemma5_max_ratio": lemma5_ratio(res.extras["alpha_l1"], etas, args["B"])}


def _exact_online_loss(res: FitResult, K: TrainKernel, y: np.ndarray) -> float:
    """``sum_t 0.5 (f_t(x_t) - y_t)^2`` with ``f_t`` evaluated exactly (not the estimate E_t):
    the replay of :meth:`ilnrun.theory.TrainKernel.sg_online_predictions` (primal or matrix)."""
    f = K.sg_online_predictions(res.extras["alpha_new"], res.extras["shrinks_before"])
    return float(0.5 * np.sum((f - y) ** 2))


def _curve(res: FitResult, t: np.ndarray) -> dict:
    """``|alpha^(t+1)|_1`` after round t."""
    return {"alpha_l1": res.extras["alpha_l1"][t - 1].tolist()}


def _notes(hypers: list[dict], Ts: list[int]) -> list[str]:
    """``ilnrun validate``: Theorem 1's eta and m per T for every theory-preset setting."""
    theory = sorted({(h["B"], h["c"]) for h in hypers if h.get("preset") == "theory"})
    return [
        f"shrinking_gradient theory preset (B={B}, c={c}; eta = B/√T, m = ⌈c B⁴ T log(BT)⌉): "
        + "; ".join("T={}: eta={:.4g}, m={:,}".format(T, *theory_preset(B, T, c)) for T in Ts)
        for B, c in theory
    ]


def _losses() -> tuple[str, ...]:
    """The square loss (Algorithm 1's affine gradient) and every registered loss whose spec
    gives the Taylor coefficients of an analytic ``l'`` (``derivative_series``: paper 003's
    unbiased gradient, :func:`fit_numpy`)."""
    return tuple(n for n, s in LOSSES.items() if n == "square" or s.derivative_series is not None)


def estimates_per_round(h: Mapping) -> Fraction:
    """The Algorithm-2 estimates of ``m`` samples a gradient round draws, in expectation, under
    setting ``h`` (a grid setting or its ``fit`` keywords): 1 with the square loss (``E_t``
    alone); with another loss ``1 + E[N']``, ``E_t`` and paper 003's Taylor copies
    (:func:`fit_numpy`: each copy is one more Algorithm-2 estimate of the same ``m``, the same
    ``2 m`` evaluations and ``m`` draws; ``E[N'] = 1/(p − 1)`` without a cap,
    :func:`ilnrun.learners.taylor.copies_mean` with one). Exact as the float ``E[N']`` is
    (``p = 2``: 2). The one place the budget learns of the copies (docs/budgets.md §4a)."""
    if h.get("loss") in (None, "square"):
        return Fraction(1)
    return 1 + Fraction(copies_mean(h.get("taylor_p") or P_DEFAULT, h.get("taylor_cap")))


def _setting_cost(match: str, T: int, n_eval: int, h: Mapping) -> Fraction | None:
    """What one sample of ``m`` spends over a pass of setting ``h`` in expectation, where it
    draws Taylor copies (a non-square loss; ``None``: the square loss, the budget's own cost):
    ``e = estimates_per_round(h)`` estimates in each of the rounds 2..T, ``2 e (T − 1)``
    evaluations, ``e (T − 1)`` draws, and under ``total`` ``2 n_eval`` more (its validation and
    test estimates, one Algorithm-2 estimate of the training ``m`` a point, draw no copy). A
    shrink round draws no copy, so a pass that shrinks spends a little less than this."""
    e = estimates_per_round(h)
    if e == 1:
        return None
    rounds = (T - 1) * e
    return {"evaluations": 2 * rounds, "samples": rounds, "total": 2 * rounds + 2 * n_eval}[match]


def _setting_expected(m: int, T: int, h: Mapping) -> dict[str, int] | None:
    """The counters of setting ``h`` at ``m`` in expectation, rounded (no shrink), where it
    draws Taylor copies (``None``: the square loss, :data:`SPEC`'s ``expected``)."""
    e = estimates_per_round(h)
    if e == 1:
        return None
    return {
        "train_evals": round(2 * m * (T - 1) * e),
        "features_sampled": round(m * (T - 1) * e),
    }


def _seconds(m: int, T: int, w: int, args: dict, kv: float) -> float:
    """Rough seconds of a pass: ~25 us a round and, per evaluation and number of ``w``,
    compiled ~2.5e-9 s, numpy ~6e-9 s (make bench, section 0; diamonds at T = 46 940: 37 s a
    relu cell at k = 1; T = 4 000: 1.4 s at m = 2 000); a non-square loss's Taylor copies in
    the evaluations (:func:`estimates_per_round`)."""
    copies = float(estimates_per_round(args))  # 1.0 for the square loss: x * 1.0 == x
    return 2.5e-5 * T + (2.5e-9 if compiled_available() else 6e-9) * 2 * m * (T - 1) * copies * (
        4 + w
    )


def _why_not_loss(name: str) -> str:
    """Why Shrinking Gradient refuses loss ``name``: it only sees unbiased estimates of
    ``<f_t, phi(x_t)>``, from which an unbiased ``l'`` needs an analytic ``l'``."""
    spec = LOSSES.get(name)
    if spec is None:
        return ""
    why = spec.no_series or "the loss gives no Taylor series of l' (LossSpec.derivative_series)"
    return (
        "its step needs an unbiased estimate of l'(<f_t, phi(x_t)>) from unbiased estimates of "
        f"<f_t, phi(x_t)> (paper 003 §III-C), and for {name} {why}"
    )


SPEC = LearnerSpec(
    name="shrinking_gradient",
    label="Shrinking Gradient",
    short="SG",
    summary="ILN paper Algorithms 1-2: kernel-expansion OGD with Algorithm-2 estimates and shrinks",
    fit=fit,
    params=PARAMS,
    budget=BudgetSize(
        "m",
        # total: the training m also estimates on every validation and test point (2 m each)
        cost=lambda match, T, n: {"evaluations": 2 * (T - 1), "total": 2 * (T - 1 + n)}.get(
            match, T - 1
        ),
        expected=lambda m, T: {"train_evals": 2 * m * (T - 1), "features_sampled": m * (T - 1)},
        doc="samples per round of Algorithm 2 (two evaluations each, none at round 1)",
        default=100,
        # a non-square loss: m sized for the expected Taylor copies (docs/budgets.md §4a)
        setting_cost=_setting_cost,
        setting_expected=_setting_expected,
        setting_params=("loss", "taylor_p", "taylor_cap"),  # what sets E[N'] (none: square)
        setting_doc=(
            "with a non-square loss `m` is sized so that its expected evaluations, the Taylor "
            "copies of its unbiased gradient included (`1 + E[N']` Algorithm-2 estimates a "
            "step), meet the target (docs/budgets.md §4a)"
        ),
    ),
    role="proposed",
    estimated_validation=True,
    choices=(
        "The online prediction of Shrinking Gradient is its Algorithm-2 estimate `E_t`.",
        "Shrinking Gradient uses the gradient-descent sign `α_t = η(y_t − E_t)` (the paper "
        "prints `−η(y_t − E_t)`, which is ascent; see docs/algorithms.md §1.3).",
        "Shrinking Gradient's `test_loss` evaluates `Σ α_i k(x_i, x)` exactly with the "
        "closed-form kernel; `test_loss_estimated` is what Algorithm 2 with `m_test` samples "
        "gives instead (what a user without the kernel gets); `test_loss_avg` is its averaged "
        "predictor (Corollary 1).",
    ),
    unused=_unused,
    uses_budget=lambda h: h.get("preset") != "theory",
    arguments=_arguments,
    diagnostics=_diagnostics,
    exact_online_loss=_exact_online_loss,
    notes=_notes,
    curve=_curve,
    # T-long arrays (the compiled pass's index-search guide: 2 T more), and per round m draws:
    # keys, indices, parameters and products, and the compiled pass's search order
    memory=lambda m, T, w: 8 * (10 * T + m * (w + 10)),
    engines={"jax": ".shrinking_gradient_jax"},  # the same pass on the jax engine
    implements={"compiled": COMPILED, "jax": JAX},
    losses=_losses,
    why_not_loss=_why_not_loss,
    estimated_test=True,  # test_loss_estimated: Algorithm 2 on the averaged predictor
    seconds=_seconds,
)
