"""Kernel online gradient descent — the exact-kernel oracle (docs/algorithms.md §4; Zinkevich 2003).

The "kernel trick" reference of the ILN paper: the same online gradient descent as Shrinking
Gradient, with exact kernel values and no budget:

    yhat_t  = sum_{i<t} alpha_i k(x_i, x_t)
    alpha_t = eta_t (y_t - yhat_t)          (square loss; any loss: -eta_t l'(yhat_t, y_t))

Like-for-like with Shrinking Gradient (theorem1's control, docs/algorithms.md §4):
``preset: theory`` takes SG's step of Theorem 1, ``eta = B / sqrt(T)`` (constant; paper Eq. 15
with the same ``B``), and ``shrink: true`` SG's Algorithm 1 rule with the exact prediction in
place of the estimate ``E_t``:

    if |yhat_t| < 16 B:  alpha_t = eta_t (y_t - yhat_t)
    else:                alpha   = alpha / 4          (no step; counted in ``shrinks``)

Only for feature maps with a closed-form kernel. It evaluates no random feature; it counts the
kernel values it uses (``kernel_evals``). Past ``T`` = 20 000 rounds, for a map with an exact
finite primal ``k(x, x') = c phi(x) . phi(x')`` (coordinate), the same predictions are made as
``yhat_t = c v . phi(x_t)`` with ``v = sum_{i<t} alpha_i phi(x_i)``: O(T D) instead of the kernel
rows' O(T^2 D), equal to rounding; ``kernel_evals`` still counts the ``t`` kernel values each
prediction stands for (docs/protocol.md §3.1).
"""

from __future__ import annotations

import math

import numpy as np

from ..features import FeatureMap
from ..losses import EVERY
from ..params import Param
from ..theory import primal_evaluation
from .base import (
    AVERAGE,
    LOSS,
    STEP_PARAMS,
    FitResult,
    KernelExpansion,
    LearnerSpec,
    OnlinePass,
    average_unused,
    new_counters,
    pass_settings,
    step_unused,
)
from .implements import ANY, Implements
from .shrinking_gradient import SHRINK_BOUND, iterate_weights, theorem1_eta

BLOCK = 512  # kernel rows computed at once: memory O(BLOCK * T)
MEMO_BYTES = 1 << 23  # the most a kept first block and its inputs take (first_block)
_MEMO: list = [None]  # the last first block: (map type, its description, X0, K), read whole


def first_block(fmap: FeatureMap, X0: np.ndarray) -> np.ndarray:
    """``fmap.kernel(X0, X0)`` with ``X0 = X[:BLOCK]``, the first block of kernel rows of a
    pass (read-only), kept (one block, with its inputs at most :data:`MEMO_BYTES`) and returned
    again to the next pass that asks for it with the same map and the same inputs, compared bit
    for bit: the cells of a dataset instance share their training inputs, so they share its
    first block (all of the kernel up to ``T`` = ``BLOCK``) instead of each computing it again.
    The same numbers: the kept block is the map's own, for the same inputs."""
    desc = fmap.describe()
    kept = _MEMO[0]  # (one read: another thread may replace the entry meanwhile)
    if kept is not None and kept[0] is type(fmap) and kept[1] == desc and _same_bits(kept[2], X0):
        return kept[3]
    K = fmap.kernel(X0, X0)
    K.setflags(write=False)
    small = X0.nbytes + K.nbytes <= MEMO_BYTES
    _MEMO[0] = (type(fmap), desc, X0.copy(), K) if small else None
    return K


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` hold the same numbers bit for bit: the same shape, type and
    bytes (``-0.0`` is not ``0.0`` here, and a NaN equals itself)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    bits = np.dtype(f"u{a.itemsize}") if a.itemsize in (1, 2, 4, 8) else np.dtype(np.uint8)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return bool(np.array_equal(a.view(bits), b.view(bits)))


PARAMS = (
    *STEP_PARAMS,
    Param(
        "preset",
        "str",
        "grid",
        "'grid': eta and schedule from the config; 'theory': Shrinking Gradient's step of "
        "Theorem 1, eta = B/sqrt(T), constant (like-for-like with its theory preset)",
        choices=("grid", "theory"),
        key_omit="grid",
    ),
    Param(
        "B",
        "float",
        1.0,
        "norm bound, as Shrinking Gradient's: the theory preset's eta = B/sqrt(T); the shrink "
        "rule's threshold 16 B",
        min=0,
        min_exclusive=True,
        key_omit=1.0,
    ),
    Param(
        "shrink",
        "bool",
        False,
        "Shrinking Gradient's rule (Algorithm 1) on the exact prediction: if |yhat_t| >= 16 B, "
        "alpha <- alpha/4 and no step",
        key_omit=False,
    ),
    AVERAGE,
)

# The pass's settings (fit and the jax pass), derived from PARAMS: every parameter but the preset
# (turned into eta and schedule by the spec: _arguments), and the loss.
Settings = pass_settings("kernel_ogd", PARAMS, resolved=("preset",), extra=(LOSS,))


@Settings.takes
def fit(
    X: np.ndarray, y: np.ndarray, fmap: FeatureMap, rng: np.random.Generator, hp: Settings
) -> FitResult:
    """One online pass of kernel OGD (keywords: :data:`Settings`') on the loss ``loss``
    (:mod:`ilnrun.losses`; the square loss by default: ``alpha_t = eta_t (y_t - yhat_t)``, in
    general ``alpha_t = -eta_t l'(yhat_t, y_t)``); with ``shrink``, SG's rule: a round
    whose prediction has ``|yhat_t| >= 16 B`` divides ``alpha`` by 4 and takes no step. With
    ``average``, the predictor returned is the averaged iterate ``fbar = (1/n) sum_{t<n} f_t``
    over the ``n`` rounds played (Shrinking Gradient's, Corollary 1): ``alpha_t`` as appended
    times :func:`~ilnrun.learners.shrinking_gradient.iterate_weights` of the rounds' factors
    (1, or 1/4 in a round that shrinks)."""
    run = OnlinePass(y, hp.eta, hp.schedule, hp.decay, hp.deadline, hp.loss)
    T, etas = run.T, run.etas
    threshold = SHRINK_BOUND * hp.B if hp.shrink else math.inf
    alpha = np.zeros(T)
    appended = np.zeros(T)  # alpha_t as appended at round t (the averaged iterate)
    factors = np.ones(T)  # what round t multiplies the earlier alpha by (1/4 if it shrinks)
    counters = new_counters()
    K = None
    primal = fmap.primal(X) if primal_evaluation(fmap, T) else None
    v = np.zeros(primal[0].shape[1]) if primal is not None else None
    for t in run.rounds():
        if primal is not None:  # the same prediction in the primal
            if t:
                v += alpha[t - 1] * primal[0][t - 1]
            counters["kernel_evals"] += t
            yhat = primal[1] * float(primal[0][t] @ v)
        else:
            if t == 0:
                K = first_block(fmap, X[:BLOCK])  # = fmap.kernel(X[:BLOCK], X[:BLOCK])
            elif t % BLOCK == 0:
                K = fmap.kernel(X[t : t + BLOCK], X[: t + BLOCK])
            k_t = K[t % BLOCK, :t]
            counters["kernel_evals"] += k_t.size
            yhat = float(k_t @ alpha[:t])
        if run.diverges(t, yhat):
            break
        if abs(yhat) < threshold:
            if run.square:
                alpha[t] = etas[t] * (run.y[t] - yhat)
            else:
                alpha[t] = -etas[t] * run.gradient(t, yhat)
            appended[t] = alpha[t]
        else:  # shrink: alpha <- alpha / 4 (exact in floating point), no step
            alpha[:t] /= 4.0
            factors[t] = 0.25
            if v is not None:
                v /= 4.0
            counters["shrinks"] += 1
    n = len(run.losses)
    if hp.average and n:  # the final predictor kept too (FitResult.final)
        final = KernelExpansion(alpha[:n])
        alpha = appended[:n] * iterate_weights(factors[: n - 1])
        return run.result(KernelExpansion(alpha[:n]), counters, final=final)
    return run.result(KernelExpansion(alpha[:n]), counters)


# What the jax pass (kernel_ogd_jax) implements, by ``fit`` keyword
# (ilnrun.learners.implements): the final predictor and the square loss only. No compiled pass.
JAX = Implements(
    dict(eta=ANY, schedule=ANY, decay=ANY, B=ANY, shrink=ANY, average=(False,), loss=("square",))
)


def _unused(h: dict) -> set[str]:
    """Under the ``theory`` preset ``eta``/``schedule``/``decay`` are set by Theorem 1; ``B``
    is used only by the preset and the shrink rule. ``preset: grid`` and ``shrink: false`` (the
    plain pass) count as unused too, and so does ``average: false``, so that a plain setting's
    ``setting`` label and table columns read as they did before these keys existed."""
    out = step_unused(h)
    if h.get("preset") == "theory":
        out |= {"eta", "schedule", "decay"}
    else:
        out.add("preset")
        if not h.get("shrink"):
            out.add("B")
    if not h.get("shrink"):
        out.add("shrink")
    return out | average_unused(h)


def _arguments(h: dict, size: int | None, T: int) -> dict:
    """``fit`` keywords: the setting, with Theorem 1's constant ``eta = B / sqrt(T)`` under the
    ``theory`` preset."""
    out = {k: v for k, v in h.items() if k != "preset" and v is not None}
    if h.get("preset") == "theory":
        out["eta"], out["schedule"] = theorem1_eta(h["B"], T), "constant"
    return out


def _notes(hypers: list[dict], Ts: list[int]) -> list[str]:
    """``ilnrun validate``: the theory preset's eta per T."""
    Bs = sorted({h["B"] for h in hypers if h.get("preset") == "theory"})
    return [
        f"kernel_ogd theory preset (B={B}; eta = B/√T, Shrinking Gradient's): "
        + "; ".join(f"T={T}: eta={theorem1_eta(B, T):.4g}" for T in Ts)
        for B in Bs
    ]


SPEC = LearnerSpec(
    name="kernel_ogd",
    label="Kernel OGD (exact kernel, no budget)",
    short="KOGD",
    summary="exact-kernel OGD oracle (not budget-limited)",
    fit=fit,
    params=PARAMS,
    role="reference",
    choices=(
        "Kernel OGD uses the exact kernel and no feature budget; it is a reference, not a "
        "competitor.",
    ),
    needs_kernel=True,
    unused=_unused,
    arguments=_arguments,
    notes=_notes,
    # its online predictions are exact: the regret uses the pass's own losses
    exact_online_loss=lambda res, K, y: float(np.sum(res.losses)),
    # a block of BLOCK kernel rows and the map's temporaries while it is formed (measured peak
    # RSS with relu: 7.1 blocks at T = 40 000)
    memory=lambda size, T, w: 8 * (7 * BLOCK * T + 5 * T),
    engines={"jax": ".kernel_ogd_jax"},  # the same pass on the jax engine
    implements={"jax": JAX},
    losses=EVERY,  # alpha_t = -eta_t l'(yhat_t, y_t) for any loss (numpy pass)
    seconds=lambda size, T, w, args, kv: 2e-5 * T + T * (T - 1) // 2 * kv,
)
