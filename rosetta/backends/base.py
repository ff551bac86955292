"""The backend contract: the names every backend module exposes (the Keras 3 lesson).

A backend module ``rosetta.backends.<name>`` defines:

- ``NAME: str`` and capability constants (``DEVICES``, ``DTYPES``);
- ``available() -> tuple[bool, str]``: whether its framework imports here, and why not;
- ``versions() -> dict[str, str]``: framework versions, for the environment manifest;
- ``build(workload, params, *, dtype="float32", device="cpu", seed=0) -> Model``.

Parameters cross the boundary only as NumPy arrays under canonical names and layouts (see
``rosetta.spec.ops``): a backend converts layouts (NCHW/NHWC, OIHW/HWIO, gate order) inside
``set_params``/``get_params`` and nowhere else. An op a backend cannot lower raises
``rosetta.errors.BackendError`` naming the backend and the op.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

Params = dict[str, np.ndarray]


class Model(ABC):
    """A workload built by one backend. Inputs and labels are NumPy arrays in canonical layout
    (images ``(N, C, H, W)`` float, token ids ``(N, T)`` int32, labels ``(N,)`` int)."""

    backend: str
    dtype: str

    @abstractmethod
    def set_params(self, params: Params) -> None:
        """Load canonical-named NumPy arrays (parameters and buffers) into the model."""

    @abstractmethod
    def get_params(self) -> Params:
        """Return every parameter and buffer as canonical-named NumPy arrays."""

    @abstractmethod
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Forward pass in evaluation mode (dropout off, BatchNorm on running statistics)."""

    @abstractmethod
    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Loss and gradients by canonical name, dropout off: the equivalence gate's view."""

    @abstractmethod
    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One optimiser step in training mode (dropout on); returns the batch loss."""

    def sync(self) -> None:
        """Block until queued device work is done (the clock is read only after this)."""
        return None  # CPU-only backends compute synchronously
