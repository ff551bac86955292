"""MindSpore's process settings, each applied and then read back where MindSpore can say.

- threads: ``mindspore.device_context.cpu.op_tuning.threads_num(n)`` sizes the pool of its CPU
  kernels (25 by default), once per process (a second call raises; there is no getter). It does
  not bound what a step uses: measured on a 2-core Zen 1 (MindSpore 2.10.0, a 64x64x32x32 conv
  and a 1024^2 matmul), ``threads_num(1)`` and ``threads_num(2)`` ran both in the same wall time
  at 2.0 CPU-seconds per second, and a training step's PyNative pipeline threads
  (``backend_queue``, ``ActorThread_0``, ``KernelThread_0``) spin beside the Python thread. So a
  count below this process's cores is also enforced as MindSpore's own ``set_cpu_affinity``
  does it, by thread-level core binding: every thread of the process is bound to the first ``n``
  cores of the affinity mask it started with (threads made later inherit it); 1 thread pinned:
  cpu/wall 1.00. A later request re-binds (all cores again for a count >= the mask's), and the
  count in effect is read back from the masks (``rosetta.backends.cores``, as for JAX);
- TF32 (CUDA only): MindSpore has no TF32 switch of its own for fp32 matmul/conv on the GPU
  (written, not run here: a CPU-only machine); False on the CPU;
- the device: ``mindspore.set_device("CPU" | "GPU")``.
"""

from __future__ import annotations

import importlib.metadata

from rosetta.backends import cores
from rosetta.backends.mindspore.compat import ms

_POOL_SET: list[int] = []  # the kernel pool's size, set once (MindSpore takes it once)


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
    """Run this process's MindSpore work on ``n`` cores; returns the cores in effect, read back
    (see the module docstring: the kernel pool's size once, then thread-level core binding)."""
    if not _POOL_SET:
        ms.device_context.cpu.op_tuning.threads_num(int(n))
        _POOL_SET.append(int(n))
    return cores.bind(n)


def threads_source() -> str:
    """Where the manifest's thread count comes from."""
    return (
        "the cores MindSpore's threads are bound to (sched_setaffinity), read back; its kernel "
        "pool sized by op_tuning.threads_num, once"
    )


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
