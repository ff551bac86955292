"""PyTorch's fast path: each choice, the measurement that decided it, and how it is switched.

The figures come from ``python -m benchmarks fastpath_torch`` on the 2-core development CPU
(oneDNN, MKL, torch 2.13 CPU); rerun it on another machine before changing a choice.

- threads: intra-op and inter-op both from the runner's single setting (``$ROSETTA_THREADS``);
- CUDA: ``cudnn.benchmark = True`` (autotune), TF32 off for matmul and cuDNN (fp32 is fp32),
  NCHW (cuDNN's native layout), the fused cuDNN GRU (``nn.GRU`` uses it whenever its input is
  on the GPU);
- CPU memory format: ``CPU_LAYOUT`` per workload (see the measurements there);
- ``torch.compile``: off by default (``COMPILE_DEFAULT``); ``$ROSETTA_TORCH_COMPILE=1`` or
  ``build(..., compile=True)`` turns it on;
- features run under ``torch.inference_mode()``.
"""

from __future__ import annotations

import os

import torch

from rosetta.backends.base import threads_setting

COMPILE_ENV = "ROSETTA_TORCH_COMPILE"
#: eager unless asked. Measured (fastpath_torch.py, compile; 2-core CPU, load average 8-14):
#:   workload   cold start eager / compiled   steady compiled / eager, median [95% CI]
#:   cnn          9.1 s / 177.9 s              0.992 [0.775, 1.107]  (n=15)
#:   gru         18.4 s /  21.0 s              0.923 [0.646, 1.316]  (n=20; nn.GRU stays one op)
#:   resnet50    22.3 s / 167.4 s              0.762 [0.615, 1.107]  (n=5)
#: No interval excludes 1, and the cold start grows by 2.5-3 minutes (inductor builds C++): even
#: resnet50's best case (24% of ~4 s on a quiet machine, 41 batches in `full`) does not repay it.
COMPILE_DEFAULT = False

#: memory format on CPU per workload, from the interleaved measurement of fastpath_torch.py
#: (ratio channels_last / NCHW; < 1 means channels_last is faster). Workloads not listed: NCHW.
#: Measured 2026-11-23 on the shared 2-core CPU (load average 5-14, so absolute times are ~3x the
#: quiet machine's; the interleaved ratios are what count):
CPU_LAYOUT: dict[str, str] = {
    "cnn": "NHWC",  # train step, batch 64: 0.659 [0.526, 0.928] (1.13 s vs 1.71 s), n=15
    "resnet50": "NHWC",  # features, 32 x 224^2: 0.535 [0.411, 0.973] (17.7 s vs 33.0 s), n=5
}


def set_threads() -> tuple[int, int]:
    """Apply ``$ROSETTA_THREADS`` to intra- and inter-op threads; returns what is in effect.

    ``set_num_interop_threads`` can be called once per process, before any inter-op work: when
    that moment has passed (a second model in the same process) the current value is kept."""
    n = threads_setting()
    if n is not None:
        torch.set_num_threads(n)
        if torch.get_num_interop_threads() != n:
            try:
                torch.set_num_interop_threads(n)
            except RuntimeError:
                pass  # already started: recorded as what it is
    return torch.get_num_threads(), torch.get_num_interop_threads()


def setup_cuda() -> dict[str, object]:
    """cuDNN autotune on, TF32 off (recorded); returns the settings in effect."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return {
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32),
    }


def compile_wanted(flag: bool | None) -> bool:
    """The build keyword if given, else ``$ROSETTA_TORCH_COMPILE`` (1/0), else the default."""
    if flag is not None:
        return flag
    raw = os.environ.get(COMPILE_ENV, "").strip()
    return COMPILE_DEFAULT if raw == "" else raw not in ("0", "false", "no")


def memory_format(workload_name: str, device: str, override: str | None) -> str:
    """``NCHW`` or ``NHWC`` (channels_last) for an image workload on ``device``."""
    if override is not None:
        if override not in ("NCHW", "NHWC"):
            raise ValueError(f"layout must be NCHW or NHWC, got {override!r}")
        return override
    if device == "cuda":
        return "NCHW"  # channels-first on GPU, as cuDNN's fp32 kernels prefer
    return CPU_LAYOUT.get(workload_name, "NCHW")
