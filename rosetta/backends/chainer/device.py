"""Devices and run-time configuration of the Chainer backend: NumPy on the CPU, CuPy on CUDA.

Chainer runs on whatever array module holds the data: NumPy arrays on the CPU, CuPy arrays on a
GPU (``chainer.get_device('@cupy:0')``), where convolutions, BatchNorm and ``n_step_gru`` go
through cuDNN. CuPy is optional (not part of the CPU pins); asking for CUDA without it, or
without a visible GPU, is one clear ``BackendError``.

Every step runs inside ``step_config``. The timed face turns Chainer's ``type_check`` off: it
re-validates every function's input types and shapes on every call, in Python. That is safe here
because the graph is fixed at build and the NumPy face (the equivalence gate, which runs before
any timed step on the same graph) keeps the checks on. On a GPU: cuDNN always, with autotune
(cuDNN picks the fastest convolution algorithm per shape on first use).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from rosetta.backends.chainer import compat
from rosetta.errors import BackendError

chainer = compat.load()


@dataclass(frozen=True)
class Placement:
    """Where the model runs: Chainer's device object and how the manifest names it."""

    kind: str  # "cpu" | "cuda"
    device: object  # a chainer.backend.Device
    name: str  # e.g. "cpu (NumPy)" or "cuda:0 (NVIDIA H100 ...)"


def cuda_available() -> bool:
    """Whether CuPy imports and sees at least one CUDA GPU."""
    try:
        from chainer.backends import cuda

        if not cuda.available:
            return False
        return cuda.cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # CuPy present but no driver, broken install, ...
        return False


def place(device: str) -> Placement:
    """``"cpu"`` or ``"cuda"`` -> the Chainer device; a clear error where CUDA cannot be had."""
    if device == "cpu":
        return Placement("cpu", chainer.get_device("@numpy"), "cpu (NumPy)")
    if device != "cuda":
        raise BackendError(f"backend 'chainer' runs on cpu or cuda, not {device!r}")
    from chainer.backends import cuda

    if not cuda.available:
        raise BackendError(
            "backend 'chainer' on cuda needs CuPy (pip install cupy-cuda12x, matching your CUDA); "
            "it is not importable here"
        )
    if not cuda_available():
        raise BackendError("backend 'chainer' on cuda: CuPy imports but sees no CUDA GPU")
    dev = chainer.get_device("@cupy:0")
    props = cuda.cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return Placement("cuda", dev, f"cuda:0 ({name})")


@contextlib.contextmanager
def step_config(
    placement: Placement, *, train: bool, backprop: bool = True, type_check: bool = False
) -> Iterator[None]:
    """Chainer's configuration for one step: mode, type checks, cuDNN + autotune on a GPU."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(chainer.using_config("train", train))
        stack.enter_context(chainer.using_config("type_check", type_check))
        stack.enter_context(chainer.using_config("enable_backprop", backprop))
        if placement.kind == "cuda":
            stack.enter_context(chainer.using_config("use_cudnn", "always"))
            stack.enter_context(chainer.using_config("autotune", True))
        yield
