"""Feature maps: a distribution ``mu`` over parameters ``w`` and a function ``psi(x; w)``.

The kernel of a feature map is ``k(x, x') = E_{w~mu}[psi(x; w) psi(x'; w)]`` (docs/algorithms.md
§0; ILN paper Section 2, Eq. 1-2). Learners may only *sample* ``w`` and *evaluate* ``psi``; the
closed-form kernel is used only by the kernel-OGD oracle and by exact evaluation of a learned
predictor.

Parameters ``W`` for ``n`` draws are an ndarray whose first axis has length ``n``:
``coordinate`` -> int indices ``(n,)``; ``relu`` -> ``(n, d)``; ``fourier`` -> ``(n, d + 1)`` with
the phase ``b`` in the last column; ``random_net`` -> ``(n, h d + h)``: the hidden layer ``W``
row-major, then the output weights ``v``.

Each map is one class that also declares its config parameters (``params``), how it is built
from a resolved ``feature_map`` section (``from_config``), the problems a dataset can cause it
(``check_data``) and the sentence the report prints about it (``choices``). ``FEATURE_MAPS`` is
the registry (docs/architecture.md §5).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from .params import Param

SQRT2 = math.sqrt(2.0)


class FeatureMap(ABC):
    """A random-feature map ``(mu, psi)`` over inputs in ``R^d``."""

    name: str = ""
    has_kernel: bool = True
    # result-sized blocks alive at once while :meth:`kernel` forms a block (memory estimates;
    # measured peak RSS: coordinate 1, fourier 3, relu 6)
    kernel_copies: int = 6
    # rough seconds of one evaluation's elementwise function beyond its w.x product, for the
    # time estimates of `ilnrun validate` (Fourier: one libm cosine)
    eval_seconds: float = 0.0
    params: tuple[Param, ...] = ()
    choices: str = ""  # what the report says about this map

    def __init__(self, d: int) -> None:
        self.d = int(d)

    @classmethod
    def from_config(cls, spec: dict, X_train: np.ndarray) -> FeatureMap:
        """The map of a resolved ``feature_map`` section for inputs like ``X_train``."""
        return cls(X_train.shape[1])

    @classmethod
    def check_data(cls, spec: dict, X_train: np.ndarray) -> str | None:
        """A problem the data cause this map (``None`` if none): checked before any cell."""
        return None

    @classmethod
    def param_floats(cls, d: int, spec: dict | None = None) -> int:
        """Numbers stored per drawn parameter ``w`` for inputs in ``R^d`` (memory estimates);
        ``spec``: the resolved ``feature_map`` section (``None``: the parameters' defaults)."""
        return d

    @classmethod
    def hidden_width(cls, spec: dict | None = None) -> int:
        """Numbers formed per evaluation besides the input's (a hidden layer: its width; 1 for
        one unit): the blocks of :meth:`expansion`, :meth:`kernel_estimate` and the Algorithm-2
        estimates hold this many times fewer evaluations. ``spec`` as in :meth:`param_floats`."""
        return 1

    @property
    def depth(self) -> int:
        """:meth:`hidden_width` of this instance."""
        return self.hidden_width(self.describe())

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` iid parameters ``w ~ mu``."""

    def sample_bits(self, bits: np.ndarray) -> np.ndarray | None:
        """``len(bits)`` iid parameters ``w ~ mu`` made from as many independent uniform 32-bit
        numbers ``bits`` (uint64 below ``2^32``), each ``w`` from its own, for a map whose ``mu``
        is that cheap (the Algorithm-2 stream ``inverse_cdf_v2``); ``None`` (the default): the
        map draws with :meth:`sample`."""
        return None

    @abstractmethod
    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Paired evaluation ``v[j] = psi(X[rows[j]]; W[j])`` (shape ``(len(W),)``), a new array
        the caller may modify in place."""

    def point(self, x: np.ndarray, W: np.ndarray) -> np.ndarray:
        """``v[j] = psi(x; W[j])`` for one input ``x`` (shape ``(len(W),)``), a new array the
        caller may modify in place (the learners scale it without a copy)."""
        return self.matrix(x[None, :], W)[0]

    @abstractmethod
    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        """``Psi[a, j] = psi(X[a]; W[j])`` (shape ``(len(X), len(W))``)."""

    def expansion(self, X: np.ndarray, W: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``f(X[a]) = sum_j coef[j] psi(X[a]; W[j])``, in row blocks of bounded memory."""
        rows = max(1, (1 << 22) // max(1, len(W) * self.depth))
        out = np.empty(len(X))
        for a in range(0, len(X), rows):
            out[a : a + rows] = self.matrix(X[a : a + rows], W) @ coef
        return out

    def kernel(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Closed-form ``K[a, b] = k(X1[a], X2[b])``; raises if the map has none."""
        raise NotImplementedError(f"feature map {self.name!r} has no closed-form kernel")

    def kernel_estimate(
        self, X1: np.ndarray, X2: np.ndarray, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """The Monte-Carlo kernel over ``n`` fresh draws ``w_j ~ mu`` and its standard error:
        ``K[a, b] = (1/n) sum_j psi(X1[a]; w_j) psi(X2[b]; w_j)`` (an unbiased estimate of
        ``k(X1[a], X2[b])``, ILN paper Eq. 1) and ``stderr[a, b] = s_ab / sqrt(n)`` with
        ``s_ab`` the sample standard deviation (ddof 1) of the ``n`` products. The draws are
        made in blocks (:meth:`sample` of a block, then the next), so that memory stays about
        ``2^22`` numbers beyond the two ``len(X1) x len(X2)`` sums; the products' mean and
        second moment are accumulated by matrix products."""
        n = int(n)
        if n < 2:
            raise ValueError(f"kernel_estimate needs n >= 2 draws, got {n}")
        per_draw = (len(X1) + len(X2)) * self.depth + self.param_floats(self.d, self.describe())
        block = max(1, (1 << 22) // max(1, per_draw))
        S = np.zeros((len(X1), len(X2)))
        S2 = np.zeros((len(X1), len(X2)))
        for lo in range(0, n, block):
            W = self.sample(rng, min(block, n - lo))
            P1, P2 = self.matrix(X1, W), self.matrix(X2, W)
            S += P1 @ P2.T
            S2 += (P1 * P1) @ (P2 * P2).T
        K = S / n
        var = np.maximum(S2 / n - K * K, 0.0) * (n / (n - 1))
        return K, np.sqrt(var / n)

    @classmethod
    def primal_dim(cls, d: int) -> int | None:
        """Dimension ``p`` of an exact finite primal of the kernel for inputs in ``R^d``
        (:meth:`primal`), or ``None`` when the kernel has none (docs/algorithms.md §1.6)."""
        return None

    def primal(self, X: np.ndarray) -> tuple[np.ndarray, float] | None:
        """An exact finite-dimensional primal of the kernel: ``(Phi, c)`` with ``Phi`` of shape
        ``(len(X), p)`` and ``k(X[a], X[b]) = c * Phi[a] . Phi[b]`` exactly (not a random-feature
        approximation), or ``None`` when the kernel has none. ``Phi`` may be ``X`` itself (no copy);
        callers never modify it."""
        return None

    def describe(self) -> dict:
        """Parameters that define this map (written to the resolved config / report)."""
        return {"kind": self.name}

    # --- jax twin (the jax engine, ilnrun.engines.jax_runner) -----------------------------------
    # The same mu and psi on jax arrays, for inputs zero-padded to ``width >= d`` columns so that
    # data of different dimensions share one compiled program. ``p`` holds this instance's
    # numbers (:meth:`jax_params`), traced: ``p["d"]`` the true dimension, plus map parameters.
    # ``X`` in :meth:`jax_pairs` is the stack of every instance's padded training inputs
    # ``(instances, T, width)``, indexed without copying a cell's rows.

    def jax_params(self) -> dict[str, float]:
        """This instance's traced numbers for the jax twin: the true dimension ``d``."""
        return {"d": self.d}

    @classmethod
    def jax_sample(cls, key, n: int, width: int, p: dict):
        """``n`` iid draws ``w ~ mu`` for inputs padded to ``width`` columns (jax)."""
        raise NotImplementedError(f"feature map {cls.name!r} has no jax twin")

    @classmethod
    def jax_point(cls, x, W):
        """``v[j] = psi(x; W[j])`` (jax)."""
        raise NotImplementedError(f"feature map {cls.name!r} has no jax twin")

    @classmethod
    def jax_pairs(cls, X, inst, rows, W):
        """``v[j] = psi(X[inst, rows[j]]; W[j])`` (jax)."""
        raise NotImplementedError(f"feature map {cls.name!r} has no jax twin")

    def from_jax(self, W: np.ndarray) -> np.ndarray:
        """Parameters drawn by :meth:`jax_sample` in this map's numpy layout (padding removed)."""
        return W[:, : self.d]


class Coordinate(FeatureMap):
    """Coordinate sampling (ILN paper Section 6): ``w ~ Uniform{0..D-1}``, ``psi(x; w) = x[w]``.

    Kernel: ``k(x, x') = (1/D) sum_w x[w] x'[w] = x . x' / D``.
    """

    name = "coordinate"
    kernel_copies = 2
    choices = (
        "Features: `ψ(x; w) = x[w]`, `w ~ Uniform{0..D−1}`, kernel `k(x, x') = x·x'/D` (so "
        "`k(x, x) ≈ 1/2` on clipped-Gaussian data and `|ψ| ≤ 1` is not enforced; no √D scaling, "
        "so step sizes are comparable across D)."
    )

    @classmethod
    def param_floats(cls, d: int, spec: dict | None = None) -> int:
        return 1

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(0, self.d, size=n)

    def sample_bits(self, bits: np.ndarray) -> np.ndarray | None:
        """``w = floor(b D / 2^32)`` (int64) for 32-bit ``b``: every ``P(w = v)`` within
        ``2^-32`` of ``1 / D`` (``None`` for ``D >= 2^32``)."""
        if self.d >= 1 << 32:
            return None
        return ((bits * np.uint64(self.d)) >> np.uint64(32)).astype(np.int64)

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        return X[rows, W]

    def point(self, x: np.ndarray, W: np.ndarray) -> np.ndarray:
        return x[W]

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return X[:, W]

    def expansion(self, X: np.ndarray, W: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``sum_j coef[j] x[w_j] = x . v`` with ``v = bincount(W, coef)`` (exact)."""
        return X @ np.bincount(W, weights=coef, minlength=self.d)

    def kernel(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        return (X1 @ X2.T) / self.d

    @classmethod
    def primal_dim(cls, d: int) -> int | None:
        return d

    def primal(self, X: np.ndarray) -> tuple[np.ndarray, float] | None:
        """``k(x, x') = x . x' / D``: ``Phi = X`` (no copy), ``c = 1 / D``."""
        return X, 1.0 / self.d

    @classmethod
    def jax_sample(cls, key, n: int, width: int, p: dict):
        import jax

        return jax.random.randint(key, (n,), 0, p["d"])

    @classmethod
    def jax_point(cls, x, W):
        return x[W]

    @classmethod
    def jax_pairs(cls, X, inst, rows, W):
        return X[inst, rows, W]

    def from_jax(self, W: np.ndarray) -> np.ndarray:
        return np.asarray(W, dtype=np.int64)


class ReLU(FeatureMap):
    """An infinite layer of ReLU units: ``w ~ N(0, I_d)``, ``psi(x; w) = sqrt(2) max(0, w . x)``.

    Kernel (arc-cosine kernel of order 1, Cho & Saul 2009):
    ``k(x, x') = |x||x'| (sin t + (pi - t) cos t) / pi`` with ``t`` the angle between x and x'.
    """

    name = "relu"
    choices = "Features: `ψ(x; w) = √2 max(0, w·x)`, `w ~ N(0, I)`; arc-cosine kernel of order 1."

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.d))

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        return SQRT2 * np.maximum(np.einsum("ij,ij->i", X[rows], W), 0.0)

    def point(self, x: np.ndarray, W: np.ndarray) -> np.ndarray:
        return SQRT2 * np.maximum(W @ x, 0.0)

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return SQRT2 * np.maximum(X @ W.T, 0.0)

    def kernel(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        n1 = np.linalg.norm(X1, axis=1)[:, None]
        n2 = np.linalg.norm(X2, axis=1)[None, :]
        norms = n1 * n2
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where(norms > 0, (X1 @ X2.T) / norms, 1.0)
        theta = np.arccos(np.clip(cos, -1.0, 1.0))
        return norms * (np.sin(theta) + (np.pi - theta) * np.cos(theta)) / np.pi

    @classmethod
    def jax_sample(cls, key, n: int, width: int, p: dict):
        """``N(0, I_d)`` in the first ``d`` columns, zero in the padding."""
        import jax
        import jax.numpy as jnp

        return jax.random.normal(key, (n, width)) * (jnp.arange(width) < p["d"])

    @classmethod
    def jax_point(cls, x, W):
        import jax.numpy as jnp

        from .jax_ops import tree_dot

        return SQRT2 * jnp.maximum(tree_dot(W, x), 0.0)

    @classmethod
    def jax_pairs(cls, X, inst, rows, W):
        import jax.numpy as jnp

        from .jax_ops import tree_dot

        return SQRT2 * jnp.maximum(tree_dot(X[inst, rows], W), 0.0)


class Fourier(FeatureMap):
    """Random Fourier features (Rahimi & Recht 2007) for the Gaussian RBF kernel.

    ``w ~ N(0, sigma^-2 I_d)``, ``b ~ U[0, 2 pi)``, ``psi(x; w, b) = sqrt(2) cos(w . x + b)``;
    kernel ``k(x, x') = exp(-|x - x'|^2 / (2 sigma^2))``.
    """

    name = "fourier"
    kernel_copies = 3
    eval_seconds = 2e-8
    params = (
        Param(
            "sigma",
            "float",
            "median",
            "RBF bandwidth, or 'median' (median pairwise distance "
            "of the first 1000 training points)",
            min=0,
            min_exclusive=True,
            listable=False,
            special=("median",),
        ),
    )
    choices = (
        "Features: `ψ(x; w, b) = √2 cos(w·x + b)`, `w ~ N(0, σ⁻² I)`, `b ~ U[0, 2π)`; "
        "Gaussian RBF kernel."
    )
    # smallest bandwidth relative to the data's scale for which cos(w.x + b) is not numerically
    # noise (w = N(0, 1) / sigma: a tiny sigma makes every feature a pseudo-random sign)
    MIN_SIGMA = 1e-8

    @classmethod
    def param_floats(cls, d: int, spec: dict | None = None) -> int:
        return d + 1

    def __init__(self, d: int, sigma: float, rule: str = "given") -> None:
        super().__init__(d)
        self.sigma = float(sigma)
        self.sigma_rule = rule

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        W = np.empty((n, self.d + 1))
        W[:, : self.d] = rng.standard_normal((n, self.d)) / self.sigma
        W[:, self.d] = rng.uniform(0.0, 2.0 * np.pi, size=n)
        return W

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        return SQRT2 * np.cos(np.einsum("ij,ij->i", X[rows], W[:, :-1]) + W[:, -1])

    def point(self, x: np.ndarray, W: np.ndarray) -> np.ndarray:
        return SQRT2 * np.cos(W[:, :-1] @ x + W[:, -1])

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return SQRT2 * np.cos(X @ W[:, :-1].T + W[:, -1])

    def kernel(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        sq = np.sum(X1**2, axis=1)[:, None] + np.sum(X2**2, axis=1)[None, :] - 2.0 * (X1 @ X2.T)
        return np.exp(-np.maximum(sq, 0.0) / (2.0 * self.sigma**2))

    def describe(self) -> dict:
        return {"kind": self.name, "sigma": self.sigma, "sigma_rule": self.sigma_rule}

    def jax_params(self) -> dict[str, float]:
        return {"d": self.d, "sigma": self.sigma}

    @classmethod
    def jax_sample(cls, key, n: int, width: int, p: dict):
        """``(n, width + 1)``: ``N(0, sigma^-2 I_d)`` in the first ``d`` columns (zero in the
        padding), the phase ``b ~ U[0, 2 pi)`` in the last."""
        import jax
        import jax.numpy as jnp

        kw, kb = jax.random.split(key)
        w = jax.random.normal(kw, (n, width)) / p["sigma"] * (jnp.arange(width) < p["d"])
        b = jax.random.uniform(kb, (n, 1), minval=0.0, maxval=2.0 * np.pi)
        return jnp.concatenate([w, b], axis=1)

    @classmethod
    def jax_point(cls, x, W):
        import jax.numpy as jnp

        from .jax_ops import tree_dot

        return SQRT2 * jnp.cos(tree_dot(W[:, :-1], x) + W[:, -1])

    @classmethod
    def jax_pairs(cls, X, inst, rows, W):
        import jax.numpy as jnp

        from .jax_ops import tree_dot

        return SQRT2 * jnp.cos(tree_dot(X[inst, rows], W[:, :-1]) + W[:, -1])

    def from_jax(self, W: np.ndarray) -> np.ndarray:
        return np.concatenate([W[:, : self.d], W[:, -1:]], axis=1)

    @classmethod
    def from_config(cls, spec: dict, X_train: np.ndarray) -> Fourier:
        """``sigma`` as given, or the median heuristic on ``X_train`` (``sigma: median``)."""
        sigma = spec.get("sigma", "median")
        if sigma == "median":
            return cls(X_train.shape[1], median_distance(X_train), rule="median")
        return cls(X_train.shape[1], float(sigma), rule="given")

    @classmethod
    def check_data(cls, spec: dict, X_train: np.ndarray) -> str | None:
        """The bandwidth must be a positive number at the data's scale: the median heuristic
        fails on data whose training points coincide (e.g. all zero)."""
        sigma = cls.from_config(spec, X_train).sigma
        scale = float(np.max(np.abs(X_train))) if X_train.size else 0.0
        if not np.isfinite(sigma) or sigma <= cls.MIN_SIGMA * max(scale, 1.0):
            what = (
                "the median pairwise distance of the training points"
                if spec.get("sigma", "median") == "median"
                else "sigma"
            )
            return (
                f"the fourier bandwidth ({what}) is {sigma:.3g}, too small for inputs of scale "
                f"{scale:.3g}: the features would be numerical noise; give a larger sigma"
            )
        return None


class RandomNet(FeatureMap):
    """One random unit of a network with two random layers, hidden width ``h`` (the case the
    ILN paper is written for: a kernel that is an expectation over random units, Section 1):
    ``w = (W, v)``, ``W in R^{h x d}`` and ``v in R^h`` with iid ``N(0, 1)`` entries,

        psi(x; w) = 2 relu(v . relu(W x) / sqrt(h)).

    Scale: given ``W``, ``v . relu(W x) / sqrt(h) ~ N(0, |relu(W x)|^2 / h)``, so
    ``E psi(x; w)^2 = 4 E|relu(W x)|^2 / (2 h) = 2 E relu(w_1 . x)^2 = |x|^2``: ``k(x, x) = |x|^2``
    for every ``h``, as for the ``relu`` map. The kernel ``k(x, x') = E_w psi(x; w) psi(x'; w)``
    has no closed form at finite ``h`` (``has_kernel = False``; as ``h -> infinity`` it tends to
    the arc-cosine kernel composed with itself, which is only a limit): learners reach it only
    through draws; :meth:`kernel_estimate` is its Monte-Carlo estimate.

    A draw is a row of ``h d + h`` numbers: ``W`` row-major, then ``v``; :meth:`sample` draws
    them as one ``standard_normal((n, h d + h))`` (per row: ``W``'s entries, then ``v``'s).
    Sums are formed in orders the compiled passes reproduce bit for bit
    (``shrinking_gradient_kernels``): ``pairs`` forms each ``w_l . x`` and ``v . relu(W x)`` by
    ``einsum('ij,ij->i')``; ``point`` forms ``W x`` for every draw by one matrix-vector product
    and ``v . relu(W x)`` by ``einsum('ij,ij->i')``.
    """

    name = "random_net"
    has_kernel = False
    kernel_copies = 3  # (no kernel blocks: kernel_estimate's sums and products)
    # beyond the h d + h multiply-adds counted by param_floats: h relus, the einsum's set-up
    eval_seconds = 3e-8
    params = (
        Param(
            "h",
            "int",
            16,
            "hidden width of the random unit psi(x; W, v) = 2 relu(v . relu(Wx) / sqrt(h))",
            min=1,
            listable=False,
        ),
    )
    choices = (
        "Features: `ψ(x; W, v) = 2 relu(v·relu(Wx)/√h)`, `W ~ N(0, I_{h×D})`, `v ~ N(0, I_h)`: "
        "one random unit of a two-random-layer network of hidden width `h`, scaled so that "
        "`k(x, x) = |x|²`; its kernel has **no closed form**, so learners that need one and "
        "`regret_B` are refused, kernel expansions are evaluated by Algorithm 2, and a `teacher` "
        "target uses a Monte-Carlo kernel (`kernel_samples` draws)."
    )

    def __init__(self, d: int, h: int = 16) -> None:
        super().__init__(d)
        self.h = int(h)
        self.root_h = math.sqrt(self.h)

    @classmethod
    def hidden_width(cls, spec: dict | None = None) -> int:
        return int((spec or {}).get("h", cls.params[0].default))

    @classmethod
    def param_floats(cls, d: int, spec: dict | None = None) -> int:
        h = cls.hidden_width(spec)
        return h * d + h

    @classmethod
    def from_config(cls, spec: dict, X_train: np.ndarray) -> RandomNet:
        return cls(X_train.shape[1], int(spec.get("h", cls.params[0].default)))

    def describe(self) -> dict:
        return {"kind": self.name, "h": self.h}

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.h * self.d + self.h))

    def _out(self, V: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """``2 relu(v_j . hidden_j / sqrt(h))`` for every row (``einsum('ij,ij->i')``)."""
        z = np.einsum("ij,ij->i", V, hidden)
        z /= self.root_h
        np.maximum(z, 0.0, out=z)
        z *= 2.0
        return z

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        h, hd = self.h, self.h * self.d
        Wm = np.ascontiguousarray(W[:, :hd]).reshape(len(W) * h, self.d)
        Xr = np.repeat(np.ascontiguousarray(X[rows], dtype=float), h, axis=0)
        hidden = np.maximum(np.einsum("ij,ij->i", Wm, Xr), 0.0).reshape(len(W), h)
        return self._out(W[:, hd:], hidden)

    def point(self, x: np.ndarray, W: np.ndarray) -> np.ndarray:
        h, hd = self.h, self.h * self.d
        Wm = np.ascontiguousarray(W[:, :hd]).reshape(len(W) * h, self.d)
        hidden = np.maximum(Wm @ x, 0.0).reshape(len(W), h)
        return self._out(W[:, hd:], hidden)

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        h, hd = self.h, self.h * self.d
        Wm = np.ascontiguousarray(W[:, :hd]).reshape(len(W) * h, self.d)
        hidden = X @ Wm.T
        np.maximum(hidden, 0.0, out=hidden)
        z = np.einsum("anh,nh->an", hidden.reshape(len(X), len(W), h), W[:, hd:])
        z /= self.root_h
        np.maximum(z, 0.0, out=z)
        z *= 2.0
        return z


FEATURE_MAPS: dict[str, type[FeatureMap]] = {
    c.name: c for c in (Coordinate, ReLU, Fourier, RandomNet)
}
DEFAULT_FEATURE_MAP = Coordinate.name  # the paper's Section 6 map


def median_distance(X: np.ndarray, max_points: int = 1000) -> float:
    """Median heuristic: the median pairwise Euclidean distance among (the first
    ``max_points``) rows of ``X``; deterministic given ``X``."""
    Z = X[:max_points]
    sq = np.sum(Z**2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (Z @ Z.T), 0.0)
    iu = np.triu_indices(len(Z), k=1)
    return float(np.sqrt(np.median(d2[iu])))


def build_feature_map(spec: dict, X_train: np.ndarray) -> FeatureMap:
    """Instantiate the feature map described by a resolved ``feature_map`` config section."""
    if spec["kind"] not in FEATURE_MAPS:
        raise ValueError(f"unknown feature map {spec['kind']!r}")
    return FEATURE_MAPS[spec["kind"]].from_config(spec, X_train)
