"""Chainer's process settings: NumPy's BLAS threads, the device (NumPy or CuPy), no TF32.

**Threads.** Chainer has no thread setting of its own: on the CPU every convolution (im2col +
``tensordot``) and every linear layer is a NumPy matrix product, run by the BLAS NumPy was built
with (the OpenBLAS bundled in the NumPy wheel). ``set_threads`` sizes that pool through
threadpoolctl and reads the count back from the library itself, so the record says how many
threads OpenBLAS really uses. A cell's process also gets ``OPENBLAS_NUM_THREADS``/
``OMP_NUM_THREADS`` from ``rosetta.runtime.child_env`` before NumPy loads.

**Device.** Chainer runs on whatever array module holds the data: NumPy arrays on the CPU, CuPy
arrays on a GPU (``chainer.get_device('@cupy:0')``), where convolutions, BatchNorm and
``n_step_gru`` go through cuDNN. CuPy is optional (not part of the CPU pins). ``place`` turns the
resolved device into Chainer's device object; ``step_config`` is Chainer's configuration of every
step, timed or gated alike: ``type_check`` off (it re-validates every function's input types in
Python on every call, and the graph is fixed at build), cuDNN with autotune on a GPU.

**TF32.** Not applicable: CuPy's matmuls under Chainer run in the array's dtype (Chainer 7 has no
TF32 switch), so ``set_tf32`` always reports False.

Nothing here imports Chainer at module import: ``available()`` is the first to try.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from rosetta.errors import BackendError


def available() -> tuple[bool, str]:
    """Whether Chainer imports here (through the compatibility layer), and why not."""
    try:
        from rosetta.backends.chainer import compat

        compat.load()
    except Exception as exc:  # ImportError, or a NumPy incompatibility the layer does not cover
        return False, f"chainer does not import: {type(exc).__name__}: {exc}"
    return True, ""


def versions() -> dict[str, str]:
    """Chainer's version, NumPy's, and CuPy's where installed (package metadata, no import)."""
    out = {"chainer": importlib.metadata.version("chainer"), "numpy": np.__version__}
    for dist in ("cupy", "cupy-cuda12x", "cupy-cuda11x"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out["cupy"] = importlib.metadata.version(dist)
            break
    return out


def cuda_available() -> bool:
    """Whether CuPy imports and sees at least one CUDA GPU."""
    try:
        from rosetta.backends.chainer import compat

        compat.load()
        from chainer.backends import cuda

        return bool(cuda.available) and cuda.cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # CuPy present but no driver, broken install, ...
        return False


def blas_pools() -> list[dict]:
    """threadpoolctl's view of the BLAS libraries loaded in this process."""
    from threadpoolctl import threadpool_info

    return [p for p in threadpool_info() if p.get("user_api") == "blas"]


def set_threads(n: int) -> int:
    """Size NumPy's BLAS pool (Chainer's CPU compute) to ``n``; returns the threads in effect,
    read back from the library."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n, user_api="blas")
    return min((int(p["num_threads"]) for p in blas_pools()), default=1)


def set_tf32(enabled: bool, device: str) -> bool:
    """Chainer has no TF32 switch: always off (``configure`` refuses ``--tf32`` off CUDA, and on
    CUDA Chainer 7 computes fp32 as fp32)."""
    return False


def blas_manifest() -> str:
    """The BLAS kernel in use, e.g. ``openblas 0.3.31 (SkylakeX kernel, 2 threads)``."""
    parts = [
        f"{p.get('internal_api')} {p.get('version')} ({p.get('architecture')} kernel, "
        f"{p.get('num_threads')} threads)"
        for p in blas_pools()
    ]
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:
        parts.append(f"OPENBLAS_CORETYPE={core} set by the environment")
    return "; ".join(parts) or "no BLAS pool visible"


@dataclass(frozen=True)
class Placement:
    """Where the model runs: Chainer's device object and how the manifest names it."""

    kind: str  # "cpu" | "cuda"
    device: object  # a chainer.backend.Device
    name: str  # e.g. "cpu (NumPy)" or "cuda:0 (NVIDIA H100 ...)"


def place(device: str) -> Placement:
    """The resolved device (``cpu``/``cuda``) as Chainer's device; one clear error without CuPy."""
    from rosetta.backends.chainer import compat

    chainer = compat.load()
    if device == "cpu":
        return Placement("cpu", chainer.get_device("@numpy"), "cpu (NumPy)")
    if device != "cuda":
        raise BackendError(f"backend 'chainer' runs on cpu or cuda, not {device!r}")
    if not cuda_available():
        raise BackendError(
            "backend 'chainer' on cuda needs CuPy seeing a GPU (pip install cupy-cuda12x, "
            "matching your CUDA); use --device cpu"
        )
    # written, not run (no GPU here): CuPy device 0 and its name
    from chainer.backends import cuda

    props = cuda.cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return Placement("cuda", chainer.get_device("@cupy:0"), f"cuda:0 ({name})")


def uniform_source(placement: Placement, seed: int) -> Callable[[tuple[int, ...]], object]:
    """``uniform(shape)``: float32 uniforms in [0, 1) on the model's device, from a generator
    seeded with ``seed`` and owned by the caller (dropout masks). On the CPU a NumPy ``PCG64``
    generator; on a GPU CuPy's ``RandomState`` (written, not run). Neither touches the global
    generators (``numpy.random``, ``cupy.random``) that Chainer's unseeded draw would use."""
    if placement.kind == "cuda":  # written, not run (no GPU here)
        from chainer.backends import cuda

        gen = cuda.cupy.random.RandomState(seed)
        return lambda shape: gen.random_sample(shape, dtype=np.float32)
    rng = np.random.default_rng(seed)
    return lambda shape: rng.random(shape, dtype=np.float32)


@contextlib.contextmanager
def step_config(
    placement: Placement, *, train: bool, backprop: bool = True, type_check: bool = False
) -> Iterator[None]:
    """Chainer's configuration of one step (timed and gated alike): mode, ``type_check`` (off
    unless a benchmark builds with ``type_check=True`` to measure its cost), cuDNN with autotune
    on a GPU."""
    from rosetta.backends.chainer import compat

    chainer = compat.load()
    with contextlib.ExitStack() as stack:
        stack.enter_context(chainer.using_config("train", train))
        stack.enter_context(chainer.using_config("type_check", type_check))
        stack.enter_context(chainer.using_config("enable_backprop", backprop))
        if placement.kind == "cuda":  # written, not run (no GPU here)
            stack.enter_context(chainer.using_config("use_cudnn", "always"))
            stack.enter_context(chainer.using_config("autotune", True))
        yield
