"""Fixed-Random features — Rahimi & Recht (2007, 2009), as compared in ILN paper Section 6.

Sample ``r`` parameters once; ``z(x) = [psi(x; w_1) ... psi(x; w_r)] / sqrt(r)``; fit
``f(x) = beta . z(x)`` in one pass over the ``T`` training points (docs/algorithms.md §3).

``solver: sgd`` (the default): one online pass of SGD on the setting's ``loss``
(:mod:`ilnrun.losses`; the square loss by default, ``l'(yhat, y) = yhat - y``),

    yhat_t = beta_t . z(x_t)
    beta_{t+1} = beta_t - eta_t (l'(yhat_t, y_t) z(x_t) + lam beta_t)

(the compiled and jax passes: the square loss only; other losses run in numpy).

With ``average: true`` the returned predictor is the averaged iterate
``beta_bar = (1/T) sum_{t=1..T} beta_t``, the mean of the iterates that predicted
``x_1 .. x_T`` (``beta_1 = 0``): Shrinking Gradient's averaged predictor ``fbar`` (ILN paper
Corollary 1; learners/shrinking_gradient.py), over the rounds played.

``solver: ridge``: the same ``r`` features (the same draws) fitted by ridge regression,

    beta = argmin_beta (1/T) sum_{t=1..T} (beta . z(x_t) - y_t)^2 + lam |beta|^2
         = (Z^T Z + T lam I)^-1 Z^T y,

computed as one-pass recursive least squares: the online prediction of round ``t`` is
prequential, ``yhat_t = beta_{t-1} . z(x_t)`` with ``beta_{t-1}`` the minimiser of the same
objective over the points before ``t`` (``(1/T) sum_{s<t} (...)^2 + lam |beta|^2``, the penalty
``T lam`` fixed), and after ``T`` rounds ``beta`` is the ridge solution above. Primal when
``r <= T`` (the Cholesky factor of ``T lam I + Z^T Z``, a rank-one update a round: ``O(r^2)``),
dual when ``r > T`` (the Cholesky factor of ``T lam I + Z Z^T``, grown by a row a round:
``O(r t + t^2)``): ``O(min(r, T)^2 max(r, T))`` in all. ``lam > 0`` is required: with
``lam = 0`` the system is singular whenever ``t < r`` or features repeat, so a grid's ``lam = 0``
runs under SGD only (``ilnrun validate`` refuses ridge without a positive ``lam``, and with a
loss other than the square loss). ``eta``,
``schedule``, ``decay`` and ``average`` are not used.

Each round evaluates the ``r`` features on ``x_t``: a pass spends ``r T`` evaluations (either
solver); a prediction ``r``.
"""

from __future__ import annotations

import math

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
    pass_settings,
    step_unused,
)
from .compiled import RF_CHECKS, implemented
from .compiled import available as compiled_available
from .implements import ANY, Implements

SOLVERS = ("sgd", "ridge")


PARAMS = (
    *STEP_PARAMS,
    Param("lam", "float", 0.0, "l2 regularization lambda", min=0, key_omit=0.0),
    Param(
        "solver",
        "str",
        "sgd",
        "sgd (one online pass) or ridge (recursive least squares on the same features: the "
        "ridge solution, prequential online losses; needs lam > 0; eta, schedule, decay, "
        "average not used)",
        choices=SOLVERS,
        key_omit="sgd",
    ),
    AVERAGE,
)

# The passes' settings (fit, fit_compiled, fit_numpy, ridge_numpy and the jax pass), derived from
# PARAMS: r (the budget's size), every parameter, and the loss.
Settings = pass_settings("fixed_random", PARAMS, size="r", extra=(LOSS,))


@Settings.takes
def fit(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """One pass over ``(X, y)`` with ``r`` fixed random features: SGD or ridge (``solver``).

    Runs the compiled pass (:func:`fit_compiled`) where it applies (a ``np.random.Generator``,
    a setting it implements, :data:`COMPILED`, and a feature map the kernels know; ridge also
    :func:`ridge_compiled`), else the numpy code (:func:`fit_numpy`): the same draws and the
    same numbers, bit for bit (docs/algorithms.md §2.6)."""
    from . import random_feature_kernels as kernels  # numba: imported where a pass runs

    if (
        type(rng) is np.random.Generator
        and implemented("fixed_random", COMPILED, hp.keywords(), kernels.sgk.note)
        and (
            ridge_compiled(fmap)
            if hp.solver == "ridge"
            else kernels.use_compiled(fmap, "fixed_random")
        )
    ):
        return fit_compiled(X, y, fmap, rng, hp)
    return fit_numpy(X, y, fmap, rng, hp)


def _checked(solver: str, eta: float | None, lam: float, loss: str = "square") -> None:
    """Refuse what a pass cannot run (``ilnrun validate`` refuses it first:
    :func:`_check_settings`)."""
    if solver == "ridge" and loss != "square":
        raise ValueError(f"solver ridge fits the square loss only, got loss={loss!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    if solver == "ridge" and not lam > 0:
        raise ValueError(f"solver ridge needs lam > 0, got lam={lam!r}")
    if solver == "sgd" and eta is None:
        raise ValueError("solver sgd needs eta")


# What the compiled pass (fit_compiled: SGD and ridge) and the jax pass (fixed_random_jax: SGD,
# the final iterate) implement, by ``fit`` keyword (ilnrun.learners.implements).
COMPILED = Implements(
    dict(
        r=ANY, eta=ANY, lam=ANY, schedule=ANY, decay=ANY, solver=SOLVERS, average=ANY,
        loss=("square",),
    )
)  # fmt: skip
JAX = Implements({**COMPILED.values, "solver": ("sgd",), "average": (False,)})


@Settings.takes
def fit_compiled(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """:func:`fit_numpy` compiled (``random_feature_kernels.fr_rounds``, ``ridge_rounds``): the
    parameters drawn by ``fmap.sample`` as there, then the same pass and arithmetic; the
    deadline is looked at after round 1 (as :func:`fit_numpy` does), then between calls of a
    few million evaluations."""
    from . import random_feature_kernels as kernels

    _checked(hp.solver, hp.eta, hp.lam)
    if hp.loss != "square":
        raise ValueError(
            f"the compiled Fixed-Random pass has the square loss only, got {hp.loss!r}"
        )
    T = len(y)
    X = np.ascontiguousarray(X, dtype=float)
    yv = np.ascontiguousarray(y, dtype=float)
    kind = kernels.kind_of(fmap)
    W = fmap.sample(rng, hp.r)
    final = None
    Ws, b = kernels.split(W, kind, fmap)
    inv_sqrt_r = 1.0 / math.sqrt(hp.r)
    z, losses = np.empty(hp.r), np.empty(T)
    state = np.array([2.0])  # the exponent of the loss
    counts = np.zeros(2, dtype=np.int64)  # train_evals, diverged
    if hp.solver == "ridge":
        rls = _RidgeState(hp.r, T, hp.lam)
        t, timed_out = compiled_rounds(
            T, hp.deadline, lambda t: hp.r * (min(hp.r, t + 1) + 1),
            lambda t, t1: kernels.ridge_rounds(
                t, t1, X, yv, Ws, b, inv_sqrt_r, rls.Tlam, rls.U, rls.c, rls.Z, z, rls.v,
                rls.x, losses, state, counts,
            ),
            lambda: bool(counts[1]),
        )  # fmt: skip
        beta = rls.beta(t - int(counts[1]), compiled=True)  # the points added
    else:
        etas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
        beta = np.zeros(hp.r)
        bsum = np.zeros(hp.r if hp.average else 0)
        t, timed_out = compiled_rounds(
            T, hp.deadline, lambda t: hp.r,
            lambda t, t1: kernels.fr_rounds(
                t, t1, X, yv, etas, Ws, b, inv_sqrt_r, float(hp.lam), beta, z, losses,
                state, counts, bsum,
            ),
            lambda: bool(counts[1]),
        )  # fmt: skip
        if hp.average:  # the final predictor kept too (FitResult.final)
            final = FeatureExpansion(W, beta * inv_sqrt_r, fmap)
            beta = bsum / t
    counters = new_counters()
    counters.update(train_evals=int(counts[0]), features_sampled=len(W))
    predictor = FeatureExpansion(W, beta * inv_sqrt_r, fmap)
    return FitResult(predictor, losses[:t], counters, bool(counts[1]), timed_out, final=final)


class _RidgeState:
    """The recursive least squares state of :func:`fit_numpy` and :func:`fit_compiled`
    (``random_feature_kernels``' ``rls_*`` functions): primal for ``r <= T`` (``U`` the
    ``r x r`` upper factor of ``T lam I + Z^T Z``, ``c = U^-T Z^T y``, ``Z`` empty), dual for
    ``r > T`` (``U`` the ``T x T`` factor of ``T lam I + Z Z^T``, ``c = U^-T y``, ``Z`` the
    points' features); ``v``, ``x`` work space."""

    def __init__(self, r: int, T: int, lam: float) -> None:
        self.r, self.Tlam = r, T * float(lam)
        self.dual = r > T
        n = T if self.dual else r
        self.U = np.zeros((n, n))
        if not self.dual:
            np.fill_diagonal(self.U, math.sqrt(self.Tlam))
        self.c = np.zeros(n)
        self.Z = np.zeros((T, r)) if self.dual else np.zeros((0, r))
        self.v, self.x = np.zeros(n), np.zeros(n)

    def beta(self, n: int, compiled: bool) -> np.ndarray:
        """The ridge coefficients on the first ``n`` points (``rls_beta``: compiled, or its
        plain Python)."""
        from . import random_feature_kernels as kernels

        rls_beta = kernels.rls_beta if compiled else kernels.python(kernels.rls_beta)
        beta = np.zeros(self.r)
        rls_beta(self.U, self.c, n if self.dual else self.r, self.Z, self.x, beta)
        return beta


@Settings.takes
def fit_numpy(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """One pass with ``r`` fixed random features, in numpy (the reference): SGD (averaged with
    ``average``) or, with ``solver="ridge"``, recursive least squares (:func:`ridge_numpy`)."""
    _checked(hp.solver, hp.eta, hp.lam, hp.loss)
    if hp.solver == "ridge":
        return ridge_numpy(X, y, fmap, rng, hp)
    run = OnlinePass(y, hp.eta, hp.schedule, hp.decay, hp.deadline, hp.loss)
    etas = run.etas
    W = fmap.sample(rng, hp.r)
    features_sampled = len(W)
    train_evals = 0  # counted in the loop (docs/budgets.md)
    inv_sqrt_r = 1.0 / math.sqrt(hp.r)
    beta = np.zeros(hp.r)
    bsum = np.zeros(hp.r) if hp.average else None
    point = fmap.point
    for t in run.rounds():
        z = point(X[t], W)
        z *= inv_sqrt_r
        train_evals += z.size
        yhat = float(beta @ z)
        diverged = run.diverges(t, yhat)
        if hp.average:
            bsum += beta  # the iterate that predicted x_t
        if diverged:
            break
        if hp.lam:
            beta *= 1.0 - etas[t] * hp.lam
        z *= etas[t] * run.gradient(t, yhat)  # l'(yhat, y_t): yhat - y_t for the square loss
        beta -= z
    final = None
    if hp.average:  # the final predictor kept too (FitResult.final)
        final = FeatureExpansion(W, beta * inv_sqrt_r, fmap)
        beta = bsum / len(run.losses)
    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled)
    return run.result(FeatureExpansion(W, beta * inv_sqrt_r, fmap), counters, final=final)


@Settings.takes
def ridge_numpy(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """Recursive least squares on ``r`` fixed random features, in numpy: the plain Python of
    ``random_feature_kernels``' ``rls_*`` functions, which :func:`fit_compiled` runs compiled
    (the same operations: the same numbers, bit for bit)."""
    from . import random_feature_kernels as kernels

    py = kernels.python
    run = OnlinePass(y, 1.0, "constant", None, hp.deadline)  # eta unused: the bookkeeping only
    T = len(y)
    W = fmap.sample(rng, hp.r)
    inv_sqrt_r = 1.0 / math.sqrt(hp.r)
    rls = _RidgeState(hp.r, T, hp.lam)
    U, c, Z, v, x = rls.U, rls.c, rls.Z, rls.v, rls.x
    point, predict = fmap.point, py(kernels.rls_predict)
    played = 0
    for t in run.rounds():
        z = point(X[t], W)
        z *= inv_sqrt_r
        if rls.dual:
            Z[t] = z
            if t:
                v[:t] = Z[:t] @ z  # k = Z z over the points before t
            yhat = float(predict(U, c, t, v))
        else:
            v[:] = z
            yhat = float(predict(U, c, hp.r, v))
        played = t + 1
        if run.diverges(t, yhat):
            played = t
            break
        if rls.dual:
            py(kernels.rls_dual_update)(U, c, t, np.dot(z, z), rls.Tlam, v, run.y[t], yhat)
        else:
            py(kernels.rls_primal_update)(U, c, z, run.y[t], x)
    counters = new_counters()
    counters.update(train_evals=hp.r * len(run.losses), features_sampled=len(W))
    beta = rls.beta(played, compiled=False)
    return run.result(FeatureExpansion(W, beta * inv_sqrt_r, fmap), counters)


def _probe_data(kind: int):
    """The self-checks' data: 60 points in 19 dimensions and a map of ``kind``."""
    from . import random_feature_kernels as kernels

    probe = np.random.default_rng(20261124)
    D = 19
    X = probe.standard_normal((60, D)) / 3.0
    return X, np.tanh(X[:, 0] + X[:, 1]), kernels.probe_map(kind, D)


def _same(X, y, fmap, **kw) -> bool:
    """The numpy and compiled passes of ``kw`` give the same losses and coefficients."""
    r0 = fit_numpy(X, y, fmap, np.random.default_rng(1), **kw)
    r1 = fit_compiled(X, y, fmap, np.random.default_rng(1), **kw)
    return np.array_equal(r0.losses, r1.losses) and np.array_equal(
        r0.predictor.coef, r1.predictor.coef
    )


def _agrees(kind: int) -> bool:
    """Small SGD passes, compiled and numpy, equal bit for bit: one feature and many, with and
    without ``lam``, averaged (this build's BLAS ``ddot`` / ``gemv`` and cosine)."""
    X, y, fmap = _probe_data(kind)
    cases = ((1, 0.0, "constant", False), (300, 0.2, "inv_sqrt", False), (5, 0.0, "inv", True))
    return all(
        _same(X, y, fmap, eta=0.4, r=r, lam=lam, schedule=schedule, average=average)
        for r, lam, schedule, average in cases
    )


RF_CHECKS.append(_agrees)
_RIDGE_AGREES: dict[int, bool] = {}


def ridge_compiled(fmap: FeatureMap) -> bool:
    """Whether the ridge solver runs compiled for ``fmap``: the SGD passes do
    (``random_feature_kernels.use_compiled``) and small ridge passes, primal and dual, equal
    the numpy ones bit for bit (checked once per process and map, where ridge first runs)."""
    from . import random_feature_kernels as kernels

    if not kernels.use_compiled(fmap, "fixed_random"):
        return False
    kind = kernels.kind_of(fmap)
    if kind not in _RIDGE_AGREES:
        X, y, probe = _probe_data(kind)
        _RIDGE_AGREES[kind] = all(
            _same(X, y, probe, r=r, lam=lam, solver="ridge") for r, lam in ((7, 0.01), (90, 1e-4))
        )
        if not _RIDGE_AGREES[kind]:
            kernels.sgk.note(
                f"the compiled Fixed-Random ridge solver does not reproduce this numpy build's "
                f"numbers for {type(fmap).name} features: the numpy code runs instead"
            )
    return _RIDGE_AGREES[kind]


def _ridge_seconds(r: int, T: int) -> float:
    """Rough seconds of the ridge solver's algebra beyond the features, at rates measured on one
    core (coordinate features, T = 200: r = 101 primal 5.4 ms compiled, 137 ms numpy;
    r = 1 608 dual 6.7 ms, 42 ms): primal ``3 r^2 T`` elementwise flops (~1 ns each compiled,
    ~25 ns in numpy's small slices); dual ``r T^2 / 2`` (``Z z``, BLAS, ~0.15 ns) and
    ``T^2 / 2`` steps of the solves (``~T`` flops each compiled, ~2 us each in numpy)."""
    fast = compiled_available()
    if r <= T:
        return (1e-9 if fast else 2.5e-8) * 3.0 * r * r * T
    return 1.5e-10 * r * T * T / 2 + (1e-9 * T if fast else 2e-6) * T * T / 2


def _ridge_bytes(r: int, T: int, args: dict | None) -> int:
    """The ridge solver's arrays: the factor (``r x r`` primal, ``T x T`` dual) and, dual, the
    ``T`` points' features."""
    if not args or args.get("solver") != "ridge":
        return 0
    return 8 * (min(r, T) ** 2 + (T * r if r > T else 0) + 3 * max(r, T))


def _unused(h: dict) -> set[str]:
    """Under ``solver: ridge`` the step parameters and ``average``; under SGD ``solver`` and
    ``average: false`` themselves (an SGD setting reads as it did before they existed: the same
    ``setting`` string and cells)."""
    if h.get("solver") == "ridge":
        return {"eta", "schedule", "decay", "average"}
    return step_unused(h) | {"solver"} | average_unused(h)


def _arguments(h: dict, r: int | None, T: int) -> dict:
    """``fit`` keywords: the setting's used values, ``solver`` and (SGD) ``average`` always
    (their columns then read ``sgd`` and ``False`` rather than empty), and ``r``."""
    out = {k: v for k, v in h.items() if v is not None}
    out["solver"] = h.get("solver") or "sgd"
    if out["solver"] == "sgd":
        out["average"] = bool(h.get("average"))
    if r is not None:
        out["r"] = r
    return out


def _notes(hypers: list[dict], Ts: list[int]) -> list[str]:
    """``ilnrun validate``: how many settings each solver has, and the ridge's ``lam``."""
    ridge = [h for h in hypers if h.get("solver") == "ridge"]
    if not ridge:
        return []
    sgd = len(hypers) - len(ridge)
    averaged = sum(1 for h in hypers if h.get("average"))
    lams = ", ".join(f"{h['lam']:g}" for h in ridge)
    head = f"{sgd} sgd settings ({averaged} averaged), " if sgd else ""
    return [
        f"fixed_random: {head}{len(ridge)} ridge settings (lam = {lams}: a lam of 0 runs under "
        "sgd only; eta, schedule, decay and average not used; recursive least squares, primal "
        "where r <= T, dual where r > T)"
    ]


def _skip(h: dict) -> bool:
    """Ridge with ``lam = 0`` is left out of the grid (singular whenever features repeat or
    ``r`` exceeds the points seen): one ``lam`` grid serves both solvers, ``0`` SGD only."""
    return h.get("solver") == "ridge" and not (h.get("lam") or 0.0) > 0


def _check_settings(hypers: list[dict], engine: str) -> list[tuple[str, str]]:
    """What ``ilnrun validate`` refuses on every engine: ``solver: ridge`` without a positive
    ``lam`` in the grid (nothing to run). (What the jax engine's pass does not implement, ridge
    and ``average``, its declaration :data:`JAX` refuses.)"""
    out = []
    ridge = [h for h in hypers if h.get("solver") == "ridge"]
    losses = sorted({h["loss"] for h in ridge if h.get("loss") not in (None, "square")})
    if losses:
        out.append(
            (
                "solver",
                f"solver ridge fits the square loss only (least squares), got loss "
                f"{', '.join(losses)}; use solver: sgd for it",
            )
        )
    if ridge and all(_skip(h) for h in ridge):
        out.append(
            (
                "lam",
                "solver ridge needs lam > 0 (with lam = 0 the least squares system is singular "
                "whenever features repeat or r exceeds the points seen); give positive values "
                "(a lam of 0 in the grid then runs under sgd only)",
            )
        )
    return out


SPEC = LearnerSpec(
    name="fixed_random",
    label="Fixed-Random",
    short="FR",
    summary="Rahimi & Recht random features, one SGD pass or ridge on them",
    fit=fit,
    params=PARAMS,
    unused=_unused,
    arguments=_arguments,
    check_settings=_check_settings,
    skip=_skip,
    notes=_notes,
    budget=BudgetSize(
        "r",
        # total: and the r features on every validation and test point
        cost=lambda match, T, n: {"evaluations": T, "total": T + n}.get(match, 1),
        expected=lambda r, T: {"train_evals": r * T, "features_sampled": r},
        doc="random features drawn once, each evaluated on every x_t",
        default=100,
    ),
    # (the jax engine, which runs SGD only, calls it without the fit keywords)
    memory=lambda r, T, w, args=None: 8 * (r * (w + 3) + 2 * T) + _ridge_bytes(r, T, args),
    # FixedRandomRegressor(): one pass at a config's eta = 0.1 with r = 100 random Fourier features
    # reaches R^2 < 0.5 on scikit-learn's 200-row check_regressors_train; 0.3 passes it
    estimator_defaults={"eta": 0.3},
    engines={"jax": ".fixed_random_jax"},  # the same pass on the jax engine (SGD only)
    implements={"compiled": COMPILED, "jax": JAX},
    losses=EVERY,  # SGD with any loss's derivative (numpy pass); ridge: the square loss only
    kernel_blocks=False,  # a feature expansion evaluates itself
    # ~2 ns per evaluation and number of w (T = 4 000, r = 2 000: 0.1 s coordinate, 0.15 s relu)
    # per feature, round and number of w: compiled ~3e-10 s, numpy ~6e-10 s (diamonds relu cells)
    seconds=lambda r, T, w, args, kv: (
        1e-5 * T
        + (3e-10 if compiled_available() else 6e-10) * r * T * (4 + w)
        + (_ridge_seconds(r, T) if args.get("solver") == "ridge" else 0.0)
    ),
)
