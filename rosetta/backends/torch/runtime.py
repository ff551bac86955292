"""PyTorch's process settings, each applied and then read back from torch itself.

- threads: ``torch.set_num_threads(n)`` for the intra-op pool (ATen/OpenMP, oneDNN) and
  ``torch.set_num_interop_threads(n)`` for the inter-op pool; the latter can be set once per
  process, before any inter-op work, so a second configure in the same process keeps what is
  there (``interop_threads()`` reports it). The BLAS/OpenMP environment of a cell's process is
  made by ``rosetta.runtime.child_env``, not here;
- TF32 (CUDA only): ``torch.backends.cuda.matmul.allow_tf32`` and
  ``torch.backends.cudnn.allow_tf32`` both off unless the runtime asks (fp32 means fp32);
- cuDNN autotune (CUDA only): ``torch.backends.cudnn.benchmark = True``: the fastest
  convolution algorithm per input shape, found on the first steps (every timed step has the
  same shape, and the warm-up absorbs the search).

The CUDA settings are written with care but were not run here (a CPU-only machine).
"""

from __future__ import annotations

import importlib.metadata

import torch


def available() -> tuple[bool, str]:
    """``import torch`` worked (this module imported it)."""
    return True, ""


def versions() -> dict[str, str]:
    """torch's version (and CUDA/cuDNN where built with them), and NumPy's."""
    out = {"torch": torch.__version__}
    if torch.version.cuda:
        out["cuda"] = str(torch.version.cuda)
        out["cudnn"] = str(torch.backends.cudnn.version())
    try:
        out["numpy"] = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        pass
    return out


def cuda_available() -> bool:
    """Whether PyTorch sees a CUDA GPU."""
    return bool(torch.cuda.is_available())


def set_threads(n: int) -> int:
    """Size the intra-op pool (and the inter-op pool, where still possible) to ``n``; returns
    the intra-op threads in effect, read back with ``torch.get_num_threads()``."""
    torch.set_num_threads(n)
    if torch.get_num_interop_threads() != n:
        try:
            torch.set_num_interop_threads(n)
        except RuntimeError:
            pass  # the inter-op pool has started: kept, and recorded as it is
    return int(torch.get_num_threads())


def interop_threads() -> int:
    """The inter-op threads in effect (for the manifest)."""
    return int(torch.get_num_interop_threads())


def set_tf32(enabled: bool, device: str) -> bool:
    """TF32 for fp32 matmul and cuDNN convolutions: on only when ``enabled`` on CUDA; returns
    whether both are on, read back from ``torch.backends`` (always False on the CPU).
    The CUDA branch is written, not run here."""
    on = bool(enabled) and device == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return bool(torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32)


def set_autotune(device: str) -> bool:
    """cuDNN autotune on for CUDA (off on the CPU, where it does nothing); returns the setting in
    effect, read back. Written, not run here on CUDA."""
    torch.backends.cudnn.benchmark = device == "cuda"
    return bool(torch.backends.cudnn.benchmark)


def device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)`` for the manifest."""
    if device != "cuda":
        return "cpu"
    return f"cuda ({torch.cuda.get_device_name(torch.device('cuda'))})"


def peak_memory_bytes(device: str) -> int | None:
    """Peak CUDA memory allocated by this process, or None on the CPU."""
    if device != "cuda":
        return None
    return int(torch.cuda.max_memory_allocated(torch.device("cuda")))


def reset_peak_memory(device: str) -> bool:
    """Restart CUDA's peak-allocation counter (``max_memory_allocated`` reads from here on);
    False on the CPU (written, not run: no GPU here)."""
    if device != "cuda":
        return False
    torch.cuda.reset_peak_memory_stats(torch.device("cuda"))
    return True


def blas() -> str:
    """The BLAS and oneDNN torch runs, from ``torch.__config__.show()`` (statically linked MKL is
    invisible to threadpoolctl), with ATen's CPU kernel level (e.g. ``AVX512``)."""
    info = torch.__config__.show()
    parts = []
    for line in info.splitlines():
        line = line.strip(" -")
        if "MKL-DNN" in line or "oneDNN" in line:
            parts.append(line.replace("Intel(R) MKL-DNN", "oneDNN").split(" (Git")[0])
        elif line.startswith("Build settings:"):
            flags = dict(
                kv.strip().split("=", 1) for kv in line.split(":", 1)[1].split(",") if "=" in kv
            )
            if flags.get("BLAS_INFO"):
                parts.insert(0, f"BLAS_INFO={flags['BLAS_INFO']}")
    try:
        parts.append(f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()}")
    except AttributeError:  # older torch
        pass
    return "; ".join(parts) or "unknown"
