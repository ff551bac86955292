"""The backend contract, v2: the names every backend module exposes (the Keras 3 lesson).

A backend module ``rosetta.backends.<name>`` defines (``CONTRACT`` lists them; the
conformance suite fails a module that lacks one, naming it):

- ``NAME: str`` and capability constants ``DEVICES`` (e.g. ``("cpu", "cuda")``) and ``DTYPES``;
- ``available() -> tuple[bool, str]``: whether its framework imports here, and why not;
- ``versions() -> dict[str, str]``: framework versions, for the environment manifest;
- ``cuda_available() -> bool``: whether the framework sees a CUDA GPU (``--device auto``);
- ``build(workload, params, *, dtype, device, seed) -> Model``;
- ``run_op(op, x, *, dtype, device, seed, training) -> np.ndarray``: one parameter-free op of
  the spec (relu, maxpool2d, dropout, flatten, global_avgpool) through the backend's own
  lowering table, NumPy in and out: the op-level conformance tests and the dropout check.

A ``Model`` has two faces.

**The timed face** speaks the framework's own values. ``loader(x, y, order, batch_size)`` is
built on the framework's input machinery (``DataLoader``, ``tf.data``, a device-prefetching
iterator, Chainer's iterators) and yields *native batches*: tuples ``(x, y)`` (or ``(x,)``
without labels) already on the device and in the backend's layout, taking the samples of
``order`` in that order, complete batches only. ``train_step(batch)`` returns the loss as a
native scalar (nothing is read back to the host), ``predict(batch)`` returns native outputs,
``sync(value=None)`` waits for queued device work (on ``value`` where the framework needs an
array to block on), and ``to_numpy(value)`` is the one explicit way back to NumPy.

**The NumPy face** serves the equivalence gate and the tests, always in canonical names and
layouts: ``set_params``/``get_params`` (which is exact: a round trip returns the same bits),
``loss_and_grads(x, y)`` and ``deterministic_steps(x, y, k)`` (k optimiser steps on one batch
with dropout off), both with dropout off, and ``batch_to_numpy(batch)`` (a native batch back in
canonical layout). ``set_params`` also resets the optimiser state: loading weights starts
training afresh. ``manifest()`` says which fast path ran (``MANIFEST_KEYS``).

Layout conversions (NCHW/NHWC, OIHW/HWIO, the rows of a dense layer after an NHWC flatten, GRU
gate order) happen in ``set_params``/``get_params`` and the loader, nowhere else. An op a backend
cannot lower raises ``rosetta.errors.BackendError`` naming the backend and the op.

Why these names: ``loader``/``train_step``/``predict`` are what a user of any framework writes
(Keras' ``predict``, PyTorch's ``DataLoader``), ``to_numpy`` is explicit about the one costly
crossing, and every NumPy-face method says NumPy in its signature so that nothing timed can
accidentally use it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from rosetta.errors import BackendError
from rosetta.spec import ops

Params = dict[str, np.ndarray]
Batch = tuple[Any, ...]  # a native batch: (x, y) or (x,), framework arrays on the device

#: module-level names every backend defines
CONTRACT = (
    "NAME",
    "DEVICES",
    "DTYPES",
    "available",
    "versions",
    "cuda_available",
    "build",
    "run_op",
)
#: keys every ``Model.manifest()`` has (values may be "n/a" where a key does not apply)
MANIFEST_KEYS = (
    "backend",
    "device",  # "cpu" | "cuda" (+ device name where known)
    "dtype",
    "layout",  # e.g. "NCHW", "NHWC", "TNC" (time-major), "NTC"
    "threads",  # intra-op threads in use
    "compile",  # eager | jit | tf.function | tf.function+xla | torch.compile ...
    "autotune",  # cuDNN autotune on/off, or "n/a" on CPU
    "fused_rnn",  # whether the GRU runs the framework's fused kernel ("n/a" without a GRU)
    "loader",  # the input machinery that feeds the timed face
    "optimizer",  # the optimiser implementation and any deviation from the framework default
)
#: the ops ``run_op`` must accept (they own no parameters)
PARAM_FREE_OPS = (ops.ReLU, ops.MaxPool2D, ops.Dropout, ops.Flatten, ops.GlobalAvgPool)
DEVICE_CHOICES = ("cpu", "cuda", "auto")
THREADS_ENV = "ROSETTA_THREADS"  # the runner's single thread setting, read by every backend


class Model(ABC):
    """A workload built by one backend (see the module docstring for the two faces)."""

    backend: str
    dtype: str
    device: str

    # -- the timed face: native values ---------------------------------------------------------
    @abstractmethod
    def loader(
        self, x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int
    ) -> Iterable[Batch]:
        """Native batches of ``x[order]`` (and ``y[order]``), complete batches only, in order.

        ``x`` is in canonical layout (images ``(N, C, H, W)`` float32, token ids ``(N, T)``
        int32), ``y`` integer labels ``(N,)`` or ``None``. Each batch is on the model's device
        and in its layout, ready for ``train_step``/``predict``."""

    @abstractmethod
    def train_step(self, batch: Batch) -> Any:
        """One optimiser step in training mode (dropout on); returns the loss, a native scalar."""

    @abstractmethod
    def predict(self, batch: Batch) -> Any:
        """Forward pass on ``batch[0]`` in evaluation mode; native outputs ``(N, ...)``."""

    def sync(self, value: Any = None) -> None:
        """Block until queued device work (or the computation of ``value``) is done."""
        return None  # synchronous CPU backends

    @abstractmethod
    def to_numpy(self, value: Any) -> np.ndarray:
        """A native value (loss, outputs) as a NumPy array: the one explicit host crossing."""

    # -- the NumPy face: canonical names and layouts ------------------------------------------
    @abstractmethod
    def set_params(self, params: Params) -> None:
        """Load canonical-named NumPy arrays (parameters and buffers); resets optimiser state."""

    @abstractmethod
    def get_params(self) -> Params:
        """Every parameter and buffer as canonical-named NumPy arrays."""

    @abstractmethod
    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Loss and the gradient of every trainable parameter by canonical name, dropout off."""

    @abstractmethod
    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        """``k`` optimiser steps on batch ``(x, y)`` with dropout off, continuing from the current
        parameters and optimiser state; returns ``get_params()`` afterwards."""

    @abstractmethod
    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """A native batch back in canonical layout (for the loader conformance test)."""

    @abstractmethod
    def manifest(self) -> dict:
        """The fast path this model runs: at least ``MANIFEST_KEYS``."""

    def summary(self) -> str:
        """The native model as the framework shows it (``print(model)``, ``model.summary()``,
        the jitted step's structure): what the notebook displays."""
        return repr(self)

    # -- helpers every backend inherits -----------------------------------------------------
    def predict_numpy(self, x: np.ndarray) -> np.ndarray:
        """Evaluation-mode outputs for a canonical NumPy batch, through the native loader."""
        batch = next(iter(self.loader(x, None, np.arange(len(x)), len(x))))
        return self.to_numpy(self.predict(batch))


def check_contract(module: ModuleType) -> None:
    """Raise ``BackendError`` naming the first contract name ``module`` lacks."""
    for name in CONTRACT:
        if not hasattr(module, name):
            raise BackendError(
                f"backend module {module.__name__} lacks contract name {name!r} "
                f"(see rosetta/backends/base.py)"
            )


def threads_setting() -> int | None:
    """The runner's thread count (``$ROSETTA_THREADS``), or ``None`` for the framework default."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise BackendError(f"${THREADS_ENV} must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise BackendError(f"${THREADS_ENV} must be a positive integer, got {raw!r}")
    return n


def resolve_device(module: ModuleType, device: str) -> str:
    """``cpu``/``cuda``/``auto`` -> the device this backend will use, or one clear error."""
    if device not in DEVICE_CHOICES:
        raise BackendError(f"unknown device {device!r}; valid: {', '.join(DEVICE_CHOICES)}")
    has_cuda = "cuda" in module.DEVICES and bool(module.cuda_available())
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        why = (
            "it runs on the CPU only"
            if "cuda" not in module.DEVICES
            else "no CUDA GPU is visible to it"
        )
        raise BackendError(
            f"--device cuda asked for, but backend {module.NAME!r} cannot use CUDA here: {why}; "
            f"use --device cpu or auto"
        )
    return device


def unsupported(backend: str, op: object) -> BackendError:
    """The error for an op a backend cannot lower (names backend and op)."""
    return BackendError(f"backend {backend!r} cannot lower op {type(op).__name__}")
