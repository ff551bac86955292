"""Paddle's process settings, each applied and then read back.

- threads: ``paddle.base.core.set_num_threads(n)`` (Paddle's ``SetNumThreads``: the OpenMP pool
  of its bundled ``libiomp5`` and MKL's threads, which its CPU conv/matmul kernels run on). Paddle
  has no public getter, so the count in effect is read back from that ``libiomp5`` itself
  (threadpoolctl). On import Paddle sets ``OMP_NUM_THREADS=1`` where it is unset and prints a
  ``WARNING: OMP_NUM_THREADS set to N, not 1`` where it is more (advice for data-parallel jobs):
  a cell's process has it set to its thread count (``rosetta.runtime.child_env``), so that line
  appears on stderr and means nothing here. ``FLAGS_paddle_num_threads`` is the inference
  predictor's setting, not the dynamic graph's;
- TF32 (CUDA only): ``FLAGS_allow_tf32_cublas`` / ``FLAGS_allow_tf32_cudnn`` where the build has
  them; the CPU wheel has neither (written, not run here: a CPU-only machine);
- oneDNN stays as Paddle ships it in the dynamic graph (``FLAGS_use_onednn`` off): the phi CPU
  kernels (im2col + MKL GEMM) are the dynamic graph's default path.
"""

from __future__ import annotations

import importlib.metadata
import os

from rosetta.backends.paddle.compat import paddle

core = paddle.base.core

_TF32_FLAGS = ("FLAGS_allow_tf32_cublas", "FLAGS_allow_tf32_cudnn")


def available() -> tuple[bool, str]:
    """``import paddle`` worked (this module imported it)."""
    return True, ""


def versions() -> dict[str, str]:
    """Paddle's version (CUDA/cuDNN where built with them), and NumPy's."""
    out = {"paddle": paddle.__version__}
    if paddle.device.is_compiled_with_cuda():  # written, not run here
        out["cuda"] = str(paddle.version.cuda())
        out["cudnn"] = str(paddle.version.cudnn())
    try:
        out["numpy"] = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        pass
    return out


def cuda_available() -> bool:
    """Whether this Paddle build sees a CUDA GPU."""
    return bool(paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0)


def _paddle_openmp() -> list[dict]:
    """threadpoolctl's view of the OpenMP runtime(s) Paddle ships (its ``libs/libiomp5``)."""
    from threadpoolctl import threadpool_info

    root = os.path.dirname(paddle.__file__)
    return [
        i
        for i in threadpool_info()
        if i.get("user_api") == "openmp" and os.path.realpath(i["filepath"]).startswith(root)
    ]


def omp_threads() -> int:
    """The threads of Paddle's OpenMP pool in effect (0 where none is loaded)."""
    pools = _paddle_openmp()
    return min(int(p["num_threads"]) for p in pools) if pools else 0


def set_threads(n: int) -> int:
    """Size Paddle's OpenMP/MKL pool to ``n``; returns what is in effect, read back from the
    ``libiomp5`` Paddle loaded (``n`` cannot be read back where Paddle loaded none: then 0
    would be a lie, so the request is returned with ``threads_source`` saying so)."""
    core.set_num_threads(int(n))
    got = omp_threads()
    return got if got else int(n)


def threads_source() -> str:
    """Where the manifest's thread count was read (for the manifest)."""
    pools = _paddle_openmp()
    if not pools:
        return "core.set_num_threads (no OpenMP runtime of Paddle's visible to threadpoolctl)"
    return f"read back from {os.path.basename(pools[0]['filepath'])} (threadpoolctl)"


def set_tf32(enabled: bool, device: str) -> bool:
    """TF32 for fp32 matmul/conv on CUDA where this build has the flags; False on the CPU.
    Written, not run here."""
    on = bool(enabled) and device == "cuda"
    present = [f for f in _TF32_FLAGS if f in core.globals().keys()]
    if not present:
        return False
    paddle.set_flags({f: on for f in present})
    flags = paddle.get_flags(present)
    return all(bool(flags[f]) for f in present)


def set_device(device: str) -> str:
    """Make ``device`` (``cpu`` | ``cuda``) Paddle's current place; returns Paddle's name."""
    return str(paddle.device.set_device("gpu" if device == "cuda" else "cpu"))


def device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)`` for the manifest (written, not run here on CUDA)."""
    if device != "cuda":
        return "cpu"
    return f"cuda ({paddle.device.cuda.get_device_name()})"


def blas() -> str:
    """The math libraries of this Paddle build, as it reports them."""
    parts = []
    if core.is_compiled_with_mkldnn():
        on = paddle.get_flags(["FLAGS_use_onednn"])["FLAGS_use_onednn"]
        parts.append(f"oneDNN built in (FLAGS_use_onednn={on} in the dynamic graph)")
    libs = os.path.join(os.path.dirname(paddle.__file__), "libs")
    if os.path.exists(os.path.join(libs, "libmklml_intel.so")):
        parts.append("MKLML (libmklml_intel) with libiomp5")
    return "; ".join(parts) or "unknown"
