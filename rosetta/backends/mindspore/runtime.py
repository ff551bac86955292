"""MindSpore's process settings, each applied and then read back where MindSpore can say.

- threads: ``mindspore.device_context.cpu.op_tuning.threads_num(n)``, the thread pool of its CPU
  kernels (25 by default, whatever the machine). MindSpore takes it once per process (a second
  call raises) and has no getter: the count set is kept here, and a second request for another
  count is refused with that reason (a cell is one process; a test process asks once);
- TF32 (CUDA only): MindSpore has no TF32 switch of its own for fp32 matmul/conv on the GPU
  (written, not run here: a CPU-only machine); False on the CPU;
- the device: ``mindspore.set_device("CPU" | "GPU")``.
"""

from __future__ import annotations

import importlib.metadata

from rosetta.backends.mindspore.compat import ms
from rosetta.errors import BackendError

_THREADS: list[int] = []  # the count this process set (MindSpore takes it once)


def available() -> tuple[bool, str]:
    """``import mindspore`` worked (this module imported it)."""
    return True, ""


def versions() -> dict[str, str]:
    """MindSpore's version, and NumPy's."""
    out = {"mindspore": ms.__version__}
    try:
        out["numpy"] = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        pass
    return out


def cuda_available() -> bool:
    """Whether this MindSpore build has a GPU device (the CPU wheel has none)."""
    try:
        return bool(ms.hal.is_available("GPU"))
    except Exception:  # noqa: BLE001 - a build without the GPU plugin
        return False


def set_threads(n: int) -> int:
    """Size MindSpore's CPU kernel pool to ``n``; returns the count in effect (the one this
    process set: MindSpore takes it once and cannot be asked)."""
    n = int(n)
    if _THREADS:
        if _THREADS[0] != n:
            raise BackendError(
                f"mindspore: this process runs {_THREADS[0]} CPU kernel threads; MindSpore sets "
                f"them once per process (threads_num), so {n} needs a process of its own"
            )
        return n
    ms.device_context.cpu.op_tuning.threads_num(n)
    _THREADS.append(n)
    return n


def threads_source() -> str:
    """Where the manifest's thread count comes from."""
    return "mindspore.device_context.cpu.op_tuning.threads_num, as set (MindSpore has no getter)"


def set_tf32(enabled: bool, device: str) -> bool:
    """No TF32 switch in MindSpore: False (fp32 means fp32)."""
    return False


def set_device(device: str) -> str:
    """Make ``device`` (``cpu`` | ``cuda``) MindSpore's target; returns MindSpore's name."""
    target = "GPU" if device == "cuda" else "CPU"
    if ms.get_context("device_target") != target:
        ms.set_device(target)
    return target


def device_name(device: str) -> str:
    """``cpu``, or ``cuda`` for the manifest (written, not run here on CUDA)."""
    return "cuda" if device == "cuda" else "cpu"
