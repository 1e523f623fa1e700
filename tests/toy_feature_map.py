"""A toy feature map, written as a new contributor would: one class, registered in a test with
one line (``FEATURE_MAPS["toy_sign"] = ToySign``).

Sign features: ``w ~ N(0, I_d)``, ``psi(x; w) = gain * sign(w . x)``. Its kernel is the
arc-cosine kernel of order 0 scaled by ``gain^2``: ``k(x, x') = gain^2 (1 - 2 theta / pi)``
with ``theta`` the angle between ``x`` and ``x'`` (``P(sign(w.x) = sign(w.x')) = 1 - theta/pi``
for a Gaussian ``w``). One config parameter, ``gain``; no jax twin.
"""

from __future__ import annotations

import numpy as np

from ilnrun.features import FeatureMap
from ilnrun.params import Param


class ToySign(FeatureMap):
    name = "toy_sign"
    params = (Param("gain", "float", 1.0, "output scale of every feature", min=0),)
    choices = "Features: `ψ(x; w) = gain · sign(w·x)`, `w ~ N(0, I)`; arc-cosine kernel of order 0."

    def __init__(self, d: int, gain: float = 1.0) -> None:
        super().__init__(d)
        self.gain = float(gain)

    @classmethod
    def from_config(cls, spec: dict, X_train: np.ndarray) -> ToySign:
        return cls(X_train.shape[1], spec.get("gain", 1.0))

    def describe(self) -> dict:
        return {"kind": self.name, "gain": self.gain}

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.d))

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        return self.gain * np.sign(np.einsum("ij,ij->i", X[rows], W))

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return self.gain * np.sign(X @ W.T)

    def kernel(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(X1, axis=1)[:, None] * np.linalg.norm(X2, axis=1)[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where(norms > 0, (X1 @ X2.T) / norms, 1.0)
        theta = np.arccos(np.clip(cos, -1.0, 1.0))
        return self.gain**2 * (1.0 - 2.0 * theta / np.pi)
