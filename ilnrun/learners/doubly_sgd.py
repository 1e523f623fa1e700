"""Doubly Stochastic Gradient Descent — Dai et al. (2014) Algorithms 1 and 2, any loss.

Round t (``gamma_t`` is the config's ``eta`` under its schedule):

    f(x_t) = sum_{i<t} sum_j alpha_{i,j} psi(x_t; omega_{i,j})     # Algorithm 2: every earlier
                                                                   # feature evaluated on x_t
    sample omega_{t,1..k} ~ mu
    alpha_{t,j} = -gamma_t l'(f(x_t), y_t) psi(x_t; omega_{t,j}) / k  # Algorithm 1, line 5
    alpha_{i,.} <- (1 - gamma_t nu) alpha_{i,.}  for i < t           # Algorithm 1, line 6

The ``dai`` preset (docs/algorithms.md §2.5) is the ILN paper's reading of Dai et al. (its
Section 4): for a target excess risk ``epsilon`` over the best ``f`` with ``|f|_H <= B``, the
regularisation ``nu = epsilon / B^2`` and Dai's step sizes ``gamma_t = theta / t`` with
``theta nu = theta_nu`` in ``(1, 2)`` (Theorem 4 only) or a positive integer (Theorems 4, 5
and 6; anything else is refused, :func:`theta_nu_problem`), i.e. ``theta = theta_nu / nu``; with
``cap`` set, ``gamma_t = theta / (t + theta / cap)`` (at most ``cap``: the ``inv`` schedule with
``eta = cap`` and ``decay = cap / theta``), the same ``theta / t`` for ``t >> theta / cap``.

Round t spends ``k (t - 1)`` evaluations on earlier features plus ``k`` on its own, so a pass
spends ``k T (T + 1) / 2``. The decay is a global scale (``alpha = s * c``), not a loop, and the
earlier features are evaluated on ``x_t`` in one vectorized gather.

``l'`` is the derivative of the setting's ``loss`` (:mod:`ilnrun.losses`; ``f(x_t) - y_t``
for the square loss, the default). The compiled and jax passes implement the square loss; the
numpy pass every loss.

``average=True`` returns the averaged iterate ``fbar = (1/T) sum_{t=1..T} f_t`` on the same
``k T`` features (:func:`averaged_coef`); the pass itself is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..features import FeatureMap
from ..losses import EVERY
from ..params import Param
from ..schedules import step_sizes
from .base import (
    AVERAGE,
    LOSS,
    STEP_PARAMS,
    BudgetSize,
    FeatureExpansion,
    FitResult,
    LearnerSpec,
    OnlinePass,
    average_unused,
    compiled_rounds,
    new_counters,
    out_of_time,
    pass_settings,
    step_unused,
)
from .compiled import RF_CHECKS, implemented
from .compiled import available as compiled_available
from .implements import ANY, Implements
from .shrinking_gradient import iterate_weights

RESCALE_BELOW = 1e-150


PRESETS = ("grid", "dai")
DAI_ONLY = ("epsilon", "B", "theta_nu", "cap")

PARAMS = (
    *STEP_PARAMS,
    Param("nu", "float", 0.0, "l2 regularization nu (decay 1 - gamma_t nu)", min=0, key_omit=0.0),
    Param(
        "preset",
        "str",
        "grid",
        "'grid': eta, schedule and nu from the grid; 'dai': the ILN paper's reading of Dai et "
        "al. for a target excess risk epsilon: nu = epsilon/B^2, gamma_t = theta/t with "
        "theta = theta_nu/nu (or theta/(t + theta/cap) with cap set)",
        choices=PRESETS,
        key_omit="grid",
    ),
    Param(
        "epsilon",
        "float",
        0.01,
        "dai preset: the target excess risk (nu = epsilon/B^2)",
        min=0,
        min_exclusive=True,
        key_omit=0.01,
    ),
    Param(
        "B",
        "float",
        1.0,
        "dai preset: radius of the comparator ball |f|_H <= B",
        min=0,
        min_exclusive=True,
        key_omit=1.0,
    ),
    Param(
        "theta_nu",
        "float",
        1.5,
        "dai preset: theta nu, in (1, 2) (Dai et al. Theorem 4 only) or a positive integer "
        "(Theorems 4, 5 and 6)",
        min=1,
        key_omit=1.5,
    ),
    Param(
        "cap",
        "float",
        None,
        "dai preset: the largest step, gamma_t = theta/(t + theta/cap) (null: theta/t)",
        min=0,
        min_exclusive=True,
        special=(None,),
        key_omit=None,
    ),
    AVERAGE,
    Param(
        "batch",
        "int",
        1,
        "points per step (Dai et al. Section 7: 2^10): each step predicts its points with the "
        "current f and steps along their average gradient (1: one point per round)",
        min=1,
        key_omit=1,
    ),
    Param(
        "block",
        "int",
        None,
        "features drawn per step (Dai et al.'s feature block, Section 7: 2^8); null: the "
        "budget's size k, derived for the batch so that the pass spends the matched budget; "
        "set: a fixed block, and the setting takes no budget",
        min=1,
        special=(None,),
        key_omit=None,
    ),
)


# The passes' settings (fit, fit_compiled, fit_numpy, fit_batched and the jax pass), derived
# from PARAMS: k (the budget's size, or a setting's block), every parameter but the preset's
# and block (turned into eta, schedule, decay, nu and k by the spec: _arguments), and the loss.
Settings = pass_settings(
    "doubly_sgd", PARAMS, size="k", resolved=("preset", *DAI_ONLY, "block"), extra=(LOSS,)
)


@Settings.takes
def fit(X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings):
    """One online pass of Doubly SGD with ``k`` random features per step and ``batch`` points per
    step (one point per step by default: a round); the keywords are :data:`Settings`' (its
    ``PARAMS``' defaults).

    Runs the compiled pass (:func:`fit_compiled`) where it applies (a ``np.random.Generator``,
    a setting it implements, :data:`COMPILED`, and a feature map the kernels know), else the
    numpy code (:func:`fit_numpy`): the same draws and the same numbers, bit for bit
    (docs/algorithms.md §2.6)."""
    from . import random_feature_kernels as kernels  # numba: imported where a pass runs

    if (
        type(rng) is np.random.Generator
        and implemented("doubly_sgd", COMPILED, hp.keywords(), kernels.sgk.note)
        and kernels.use_compiled(fmap, "doubly_sgd")
    ):
        return fit_compiled(X, y, fmap, rng, hp)
    return fit_numpy(X, y, fmap, rng, hp)


# What the compiled pass (fit_compiled) and the jax pass (doubly_sgd_jax) implement, by ``fit``
# keyword (ilnrun.learners.implements): the square loss only (other losses run in numpy) and one
# point per step (mini-batches run in numpy); the jax pass returns the final predictor only.
COMPILED = Implements(
    dict(eta=ANY, k=ANY, nu=ANY, schedule=ANY, decay=ANY, average=ANY, loss=("square",), batch=(1,))
)
JAX = Implements({**COMPILED.values, "average": (False,)})


@Settings.takes
def fit_compiled(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """:func:`fit_numpy` compiled (``random_feature_kernels.dsgd_rounds``): the same pass, draws
    and arithmetic; the deadline is looked at after round 1 (as :func:`fit_numpy` does), then
    between calls of a few million evaluations. The square loss and one point per step only
    (:data:`COMPILED`)."""
    from . import random_feature_kernels as kernels

    if hp.loss != "square":
        raise ValueError(f"the compiled Doubly SGD pass has the square loss only, got {hp.loss!r}")
    if hp.batch != 1:
        raise ValueError(f"the compiled Doubly SGD pass takes one point per step, got {hp.batch!r}")
    T = len(y)
    X = np.ascontiguousarray(X, dtype=float)
    etas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
    yv = np.ascontiguousarray(y, dtype=float)
    kind = kernels.kind_of(fmap)
    W, b = kernels.stored(fmap, kind, hp.k * T)
    c, appended = np.zeros(hp.k * T), np.zeros(hp.k * T)
    psi, losses = np.empty(hp.k * T), np.empty(T)
    state = np.array([1.0, 2.0])  # s, the exponent of the loss
    counts = np.zeros(3, dtype=np.int64)  # train_evals, features_sampled, diverged
    sigma = float(getattr(fmap, "sigma", 1.0))
    # coordinate draws from the generator's PCG64 state (None: the generator's own calls)
    stream = kernels.sgk.own_stream(rng, kind, X.shape[1])
    jt = None if stream is None else kernels.pcg.jump_table(stream[2], stream[3])

    def rounds(t: int, t1: int) -> int:
        t = kernels.dsgd_rounds(
            t, t1, X, yv, etas, sigma, hp.k, float(hp.nu), RESCALE_BELOW,
            rng if stream is None else None, stream, jt, W, b, c, appended, psi, losses, state,
            counts,
        )  # fmt: skip
        if stream is not None:
            kernels.pcg.put_state(rng, stream)
        return t

    # round t costs about k (t + 1) evaluations
    t, timed_out = compiled_rounds(
        T, hp.deadline, lambda t: hp.k * (t + 1), rounds, lambda: bool(counts[2])
    )
    diverged = bool(counts[2])
    counters = new_counters()
    counters.update(train_evals=int(counts[0]), features_sampled=int(counts[1]))
    n_feat = hp.k * (t - diverged)
    coef = float(state[0]) * c[:n_feat]
    W = kernels.joined(W, b, kind, n_feat)
    final = None
    if hp.average:  # the final predictor kept too (FitResult.final)
        final = FeatureExpansion(W, coef, fmap)
        coef = averaged_coef(appended[:n_feat], etas, hp.nu, hp.k, t)
    predictor = FeatureExpansion(W, coef, fmap)
    return FitResult(predictor, losses[:t], counters, diverged, timed_out, final=final)


@Settings.takes
def fit_numpy(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """One online pass of Doubly SGD with ``k`` random features per round, in numpy (the
    reference); with ``batch > 1``, :func:`fit_batched`."""
    if hp.batch != 1:
        return fit_batched(X, y, fmap, rng, hp)
    run = OnlinePass(y, hp.eta, hp.schedule, hp.decay, hp.deadline, hp.loss)
    T, gammas = run.T, run.etas
    W = None  # stored omegas, allocated on the first draw (shape depends on the map)
    c = np.zeros(hp.k * T)  # alpha = s * c
    appended = np.zeros(hp.k * T)  # alpha_{t,j} as appended at round t (the averaged iterate)
    s = 1.0
    train_evals = features_sampled = 0  # counted in the loop (docs/budgets.md)
    point, sample = fmap.point, fmap.sample

    for t in run.rounds():
        x_t = X[t]
        n_old = hp.k * t
        if n_old:
            psi_old = point(x_t, W[:n_old])
            train_evals += psi_old.size
            f_t = s * float(c[:n_old] @ psi_old)
        else:
            f_t = 0.0
        if run.diverges(t, f_t):
            break
        omega = sample(rng, hp.k)
        features_sampled += len(omega)
        if W is None:
            W = np.empty((hp.k * T,) + omega.shape[1:], dtype=omega.dtype)
        W[n_old : n_old + hp.k] = omega
        psi_new = point(x_t, omega)
        train_evals += psi_new.size
        # alpha_{t,.} = -gamma_t l'(f_t, y_t) psi_new / k, stored as c = alpha / s (in place);
        # l'(f_t, y_t) = f_t - y_t for the square loss
        psi_new *= -gammas[t] * run.gradient(t, f_t)
        if hp.k != 1:  # (x / 1 is x exactly: skipping it changes no bit)
            psi_new /= hp.k
        appended[n_old : n_old + hp.k] = psi_new
        factor = 1.0 - gammas[t] * hp.nu
        if factor > 0.0:
            s *= factor
        else:  # a step so large that the decay factor is not positive: apply it directly
            c[:n_old] *= factor
        if s == 1.0:  # always when nu = 0
            c[n_old : n_old + hp.k] = psi_new
        else:
            np.divide(psi_new, s, out=c[n_old : n_old + hp.k])
        if s < RESCALE_BELOW:
            c[: n_old + hp.k] *= s
            s = 1.0

    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled)
    n_feat = hp.k * (len(run.losses) - run.diverged)
    coef = s * c[:n_feat]
    if hp.average:  # the final predictor kept too (FitResult.final)
        final = FeatureExpansion(W[:n_feat], coef, fmap)
        coef = averaged_coef(appended[:n_feat], gammas, hp.nu, hp.k, len(run.losses))
        return run.result(FeatureExpansion(W[:n_feat], coef, fmap), counters, final=final)
    return run.result(FeatureExpansion(W[:n_feat], coef, fmap), counters)


def steps(T: int, batch: int) -> int:
    """Steps of a pass over ``T`` points taken ``batch`` at a time: ``ceil(T / batch)`` (the last
    step takes the ``T - batch (S - 1)`` points left)."""
    return -(-T // batch)


def step_evaluations(T: int, batch: int) -> int:
    """Evaluations per feature drawn per step over a pass: step ``s = 1..S`` evaluates the
    ``s`` blocks drawn so far (its own included) on each of its ``b_s`` points, so
    ``sum_s s b_s = b S (S - 1) / 2 + S (T - b (S - 1))`` (``T (T + 1) / 2`` for ``batch = 1``;
    docs/budgets.md §2)."""
    S = steps(T, batch)
    return batch * S * (S - 1) // 2 + S * (T - batch * (S - 1))


def batch_cost(match: str, T: int, n_eval: int, h: dict) -> int | None:
    """What one feature per step costs over a pass of setting ``h`` with ``batch > 1``, in the
    unit of ``match`` (``None`` for one point per step: the budget's own cost of ``k``):
    :func:`step_evaluations` evaluations, ``S`` draws, and under ``total`` the ``S`` features
    evaluated on each of the ``n_eval`` scored points as well (docs/budgets.md §4)."""
    b = h.get("batch") or 1
    if b == 1:
        return None
    S, evals = steps(T, b), step_evaluations(T, b)
    return {"evaluations": evals, "samples": S, "total": evals + n_eval * S}[match]


def expected_batched(k: int, T: int, batch: int) -> dict[str, int]:
    """The counters of a full pass with ``k`` features and ``batch`` points per step."""
    return {"train_evals": k * step_evaluations(T, batch), "features_sampled": k * steps(T, batch)}


def _setting_expected(k: int, T: int, h: Mapping) -> dict[str, int] | None:
    """The counters of setting ``h`` at ``k`` where it takes ``batch > 1`` points a step
    (:func:`expected_batched`); ``None`` for one point a step (the budget's ``expected``)."""
    batch = h.get("batch") or 1
    return expected_batched(k, T, batch) if batch > 1 else None


@Settings.takes
def fit_batched(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """Doubly SGD with mini-batches of ``batch`` points and feature blocks of ``k`` features per
    step, as Dai et al. run it (their Section 4: "a mini-batch of points and random features at
    each step"; Section 7: batches of 2^10 points, blocks of 2^8 features), in numpy.

    Step ``s = 1..S`` (``S = ceil(T / b)``) takes the points ``P_s`` (``b`` of them, the last
    step the rest, ``b_s``) in order, predicts every one with the current ``f_s`` (Algorithm 2:
    each is scored on that prediction, before its label is used), draws ``omega_{s,1..k} ~ mu``
    and steps along the mini-batch average of the doubly stochastic gradient (Dai et al. eq. 4)

        zeta_s(.) = (1/b_s) sum_{l in P_s} l'(f_s(x_l), y_l) (1/k) sum_j psi(x_l; omega_{s,j})
                    psi(.; omega_{s,j}),

    ``f_{s+1} = f_s - gamma_s (zeta_s + nu f_s)`` (eq. 6), i.e. Algorithm 1, lines 5-6:

        alpha_{s,j} = -gamma_s / (b_s k) sum_{l in P_s} l'(f_s(x_l), y_l) psi(x_l; omega_{s,j})
        alpha_{i,.} <- (1 - gamma_s nu) alpha_{i,.}  for i < s.

    ``gamma_s`` is the schedule's step ``s`` (the schedule counts steps, as Dai's ``gamma_t``
    counts iterations). Step ``s`` evaluates ``k s`` features on each of its ``b_s`` points:
    ``k sum_s s b_s`` evaluations (:func:`step_evaluations`) and ``k S`` draws in a full pass.
    ``average`` averages the iterates ``f_1..f_S`` over the steps (:func:`averaged_coef`). The
    losses are per point; a divergent prediction stops the pass after that point, the deadline
    is looked at between steps."""
    T, b = len(y), int(hp.batch)
    S = steps(T, b)
    run = OnlinePass(
        y, hp.eta, hp.schedule, hp.decay, hp.deadline, hp.loss
    )  # per-point losses and l'
    gammas = step_sizes(hp.schedule, hp.eta, S, hp.decay).tolist()  # one step size per step
    W = None  # stored omegas, allocated on the first draw (shape depends on the map)
    c, appended = np.zeros(hp.k * S), np.zeros(hp.k * S)  # alpha = scale * c; alpha as appended
    scale = 1.0
    train_evals = features_sampled = played = 0  # played: steps run (a divergent one too)
    for step in range(S):
        t0, t1 = step * b, min(T, (step + 1) * b)
        if t0 and out_of_time(hp.deadline):
            run.timed_out, run.losses = True, run.losses[:t0]
            break
        Xs, n_old = X[t0:t1], hp.k * step
        if n_old:
            psi_old = fmap.matrix(Xs, W[:n_old])
            train_evals += psi_old.size
            f = scale * (psi_old @ c[:n_old])
        else:
            f = np.zeros(t1 - t0)
        played = step + 1
        if any(run.diverges(t, float(f[t - t0])) for t in range(t0, t1)):
            break
        g = np.array([run.gradient(t, float(f[t - t0])) for t in range(t0, t1)])
        omega = fmap.sample(rng, hp.k)
        features_sampled += len(omega)
        if W is None:
            W = np.empty((hp.k * S,) + omega.shape[1:], dtype=omega.dtype)
        W[n_old : n_old + hp.k] = omega
        psi_new = fmap.matrix(Xs, omega)
        train_evals += psi_new.size
        alpha = (-gammas[step] / ((t1 - t0) * hp.k)) * (g @ psi_new)
        appended[n_old : n_old + hp.k] = alpha
        factor = 1.0 - gammas[step] * hp.nu
        if factor > 0.0:
            scale *= factor
        else:  # a step so large that the decay factor is not positive: apply it directly
            c[:n_old] *= factor
        c[n_old : n_old + hp.k] = alpha / scale
        if scale < RESCALE_BELOW:
            c[: n_old + hp.k] *= scale
            scale = 1.0

    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled)
    n_feat = hp.k * (played - run.diverged)
    coef = scale * c[:n_feat]
    if hp.average:  # the final predictor kept too (FitResult.final)
        final = FeatureExpansion(W[:n_feat], coef, fmap)
        coef = averaged_coef(appended[:n_feat], gammas, hp.nu, hp.k, played)
        return run.result(FeatureExpansion(W[:n_feat], coef, fmap), counters, final=final)
    return run.result(FeatureExpansion(W[:n_feat], coef, fmap), counters)


def averaged_coef(
    appended: np.ndarray, gammas: np.ndarray, nu: float, k: int, n: int
) -> np.ndarray:
    """The coefficients of the averaged iterate ``fbar = (1/n) sum_{r<n} f_r`` over the ``n``
    rounds played (``f_r`` the predictor of round r, ``f_0 = 0``; Shrinking Gradient's
    definition, Corollary 1 of the ILN paper), on the same features as the final predictor.

    Round r appends ``alpha_{r,.}`` (``appended``, as computed in its round) and multiplies the
    earlier coefficients by ``1 - gamma_r nu`` (Algorithm 1, line 6), so
    ``f_{r+1} = (1 - gamma_r nu) f_r + sum_j alpha_{r,j} psi(.; omega_{r,j})`` and ``fbar``'s
    coefficient of ``omega_{i,j}`` is ``alpha_{i,j} g_i`` with the weights ``g_i`` of
    :func:`~ilnrun.learners.shrinking_gradient.iterate_weights` (built from the factors, never
    divided by their products: a factor may be <= 0 in early rounds of the ``dai`` preset,
    ``gamma_1 nu = theta_nu``)."""
    if n == 0:
        return appended
    g = iterate_weights(1.0 - np.asarray(gammas[: n - 1], dtype=float) * nu)
    return appended * np.repeat(g[: len(appended) // k], k)


def _agrees(kind: int) -> bool:
    """Small passes, compiled and numpy, equal bit for bit: one and three features a round,
    with and without the decay, final and averaged (this build's BLAS ``ddot`` / ``gemv`` and
    cosine)."""
    from . import random_feature_kernels as kernels

    probe = np.random.default_rng(20261123)
    D = 19
    X = probe.standard_normal((90, D)) / 3.0
    y = np.tanh(X[:, 0] + X[:, 1])
    fmap = kernels.probe_map(kind, D)
    cases = ((1, 0.0, "constant", False), (3, 0.3, "inv_sqrt", False), (3, 0.3, "inv_sqrt", True))
    for k, nu, schedule, average in cases:
        kw = dict(eta=0.4, k=k, nu=nu, schedule=schedule, average=average)
        r0 = fit_numpy(X, y, fmap, np.random.default_rng(1), **kw)
        r1 = fit_compiled(X, y, fmap, np.random.default_rng(1), **kw)
        if not (
            np.array_equal(r0.losses, r1.losses)
            and np.array_equal(r0.predictor.coef, r1.predictor.coef)
            and np.array_equal(r0.predictor.W, r1.predictor.W)
        ):
            return False
    return True


RF_CHECKS.append(_agrees)


def theta_nu_problem(theta_nu: float) -> str | None:
    """Why ``theta_nu`` lies outside Dai et al.'s theorems, or ``None``: Theorem 4 (convergence
    in expectation) asks for ``theta nu in (1, 2) u Z+``, Theorem 5 (with high probability) for
    ``theta nu in Z+``, and Theorem 6 (generalization) uses Theorem 5's constants."""
    if 1.0 < theta_nu < 2.0 or (theta_nu >= 1.0 and float(theta_nu).is_integer()):
        return None
    return (
        f"must be in (1, 2) (Dai et al. Theorem 4 allows theta nu in (1, 2) u Z+) or a positive "
        f"integer (Theorems 5 and 6 need theta nu in Z+), got {theta_nu!r}"
    )


def _check(section: dict) -> list[tuple[str, str]]:
    """``theta_nu`` (each value of a list) must be one Dai et al.'s theorems allow
    (:func:`theta_nu_problem`)."""
    v = section.get("theta_nu")
    values = v if isinstance(v, list) else [v]
    out = []
    for i, x in enumerate(values):
        why = None if x is None else theta_nu_problem(x)
        if why is not None:
            out.append((f"theta_nu[{i}]" if isinstance(v, list) else "theta_nu", why))
    return out


def dai_steps(epsilon: float, B: float, theta_nu: float, cap: float | None) -> dict:
    """``fit`` keywords of the ``dai`` preset: ``nu = epsilon / B^2``, ``theta = theta_nu / nu``,
    and ``gamma_t = theta / t`` (schedule ``inv_t``, ``eta = theta``) or, with ``cap``,
    ``gamma_t = cap / (1 + (cap / theta) t) = theta / (t + theta / cap)`` (schedule ``inv``)."""
    nu = epsilon / B**2
    theta = theta_nu / nu
    if cap is None:
        return {"nu": nu, "eta": theta, "schedule": "inv_t"}
    return {"nu": nu, "eta": cap, "schedule": "inv", "decay": cap / theta}


def _unused(h: dict) -> set[str]:
    """Under ``dai`` the step parameters and ``nu`` are derived; otherwise the preset's own
    parameters are unused, and so is ``preset`` itself (a ``grid`` setting reads as it did
    before the preset existed: same ``setting`` string and columns); ``average: false`` too, and
    so are ``batch: 1`` and ``block: null`` (one point and the budget's ``k`` per round)."""
    batching = ({"batch"} if (h.get("batch") or 1) == 1 else set()) | (
        {"block"} if h.get("block") is None else set()
    )
    if h.get("preset") == "dai":
        return {"eta", "schedule", "decay", "nu"} | average_unused(h) | batching
    return step_unused(h) | set(DAI_ONLY) | {"preset"} | average_unused(h) | batching


def _uses_budget(h: dict) -> bool:
    """A setting takes its features per step from the matched budget unless it fixes ``block``."""
    return h.get("block") is None


def _arguments(h: dict, k: int | None, T: int) -> dict:
    """``fit`` keywords: the setting and ``k`` (the budget's size, or the setting's ``block``),
    or the ``dai`` preset's ``nu`` and steps; ``batch`` only where it is not 1 (so every setting
    of one point per round keeps its keywords)."""
    out = {
        key: v
        for key, v in h.items()
        if key not in ("preset", *DAI_ONLY, "block") and v is not None
    }
    if out.get("batch") == 1:
        del out["batch"]
    if h.get("block") is not None:
        k = h["block"]
    if h.get("preset") == "dai":
        out.update(
            dai_steps(h["epsilon"], h.get("B") or 1.0, h.get("theta_nu") or 1.5, h.get("cap"))
        )
    if k is not None:
        out["k"] = k
    return out


def _notes(hypers: list[dict], Ts: list[int]) -> list[str]:
    """``ilnrun validate``: the ``dai`` preset's ``nu``, ``theta`` and first step, once per
    distinct setting."""
    seen = []
    for h in hypers:
        if h.get("preset") != "dai":
            continue
        key = (h["epsilon"], h.get("B") or 1.0, h.get("theta_nu") or 1.5, h.get("cap"))
        if key not in seen:
            seen.append(key)
    out = []
    for epsilon, B, theta_nu, cap in seen:
        a = dai_steps(epsilon, B, theta_nu, cap)
        gamma1 = step_sizes(a["schedule"], a["eta"], 1, a.get("decay"))[0]
        out.append(
            f"doubly_sgd dai preset (epsilon={epsilon}, B={B}, theta_nu={theta_nu}, cap={cap}): "
            f"nu = {a['nu']:.4g}, theta = {theta_nu / a['nu']:.4g}, gamma_1 = {gamma1:.4g}"
        )
    return out


SPEC = LearnerSpec(
    name="doubly_sgd",
    label="Doubly SGD",
    short="DSGD",
    summary="Dai et al. (2014) Algorithms 1-2, k features per round (or per mini-batch)",
    fit=fit,
    params=PARAMS,
    unused=_unused,
    uses_budget=_uses_budget,
    arguments=_arguments,
    notes=_notes,
    check=_check,
    budget=BudgetSize(
        "k",
        # round t evaluates the k (t - 1) earlier features and its k new ones on x_t
        # total: and all k T features on every validation and test point
        cost=lambda match, T, n: {
            "evaluations": T * (T + 1) // 2,
            "total": T * (T + 1) // 2 + n * T,
        }.get(match, T),
        expected=lambda k, T: {"train_evals": k * T * (T + 1) // 2, "features_sampled": k * T},
        doc="random features drawn per round (per step with a batch)",
        # with batch > 1, what one feature per step costs (the size is derived for the batch)
        setting_cost=batch_cost,
        setting_expected=_setting_expected,
        setting_params=("batch", "block"),  # a batch's k is its own; a block fixes k
    ),
    # every drawn feature is kept: k S parameters, coefficients and coefficients as appended
    # (S = T steps of one point)
    memory=lambda k, T, w, args: 8 * (k * steps(T, args.get("batch", 1)) * (w + 3) + 2 * T),
    engines={"jax": ".doubly_sgd_jax"},  # the same pass on the jax engine
    implements={"compiled": COMPILED, "jax": JAX},
    losses=EVERY,  # Dai et al. Algorithm 1 with any loss's derivative (numpy pass)
    kernel_blocks=False,  # a feature expansion evaluates itself
    # ~16 ns per evaluation and number of w (T = 4 000, k = 4: 3.0 s coordinate, 7.5 s relu)
    # per evaluation and number of w: compiled ~2e-10 s, numpy ~5e-10 s (bench/random_features.py)
    seconds=lambda k, T, w, args, kv: (
        1e-5 * T
        + (2e-10 if compiled_available() else 5e-10)
        * (k * step_evaluations(T, args.get("batch", 1)))
        * (4 + w)
    ),
)
