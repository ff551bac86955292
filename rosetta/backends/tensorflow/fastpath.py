"""The fast-path choices of the backend, each with the measurement that decided it.

Measured with ``python -m benchmarks lowering_tensorflow --xla --layout`` (interleaved, median
ratio [95% interval], 5 rounds) on the 2-core development CPU, 2 threads, while shared (load
average 15-16); the manifest records which choice ran.

- **Layout**: ``channels_last`` (NHWC) on CPU: the CNN's train step in NHWC takes 0.75
  [0.65, 0.83] of its time in NCHW (570 vs 756 ms; TensorFlow's CPU kernels want NHWC, Keras
  transposes around the rest). ``channels_first`` (NCHW) on GPU, cuDNN's native layout.
- **XLA** (``jit_compile``), per workload, XLA/no-XLA steady ratio and cold first steps:
  cnn train 4.51 [3.97, 5.83] (2.64 s vs 0.58 s; cold 15.0 s vs 2.1 s): off;
  gru train 0.29 [0.24, 1.22] (93 ms vs 318 ms; cold 8.8 s vs 2.8 s): on, its 150-step loop
  fuses; resnet50 features 1.18 [1.02, 1.43] (6.9 s vs 5.9 s; cold 19.4 s vs 9.7 s): off.
  So: on for graphs with a GRU on CPU, off for convolutional graphs (oneDNN's kernels win). On
  GPU the GRU runs cuDNN's fused kernel, which XLA cannot compile: off there.
- **GRU**: Keras' cuDNN-eligible configuration (tanh, sigmoid, reset_after, bias, no unroll),
  so the fused kernel runs wherever TensorFlow sees a GPU.
- **Padding**: ``padding="same"`` where it is exactly the spec's padding (see ``lowering.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rosetta.errors import BackendError
from rosetta.spec import ops
from rosetta.spec.graph import walk


@dataclass(frozen=True)
class FastPath:
    """The choices one model runs with."""

    data_format: str  # "channels_last" | "channels_first"
    jit_compile: bool  # XLA on the train and predict steps
    why_jit: str


LAYOUTS = {"NHWC": "channels_last", "NCHW": "channels_first"}


def has_gru(workload) -> bool:
    return any(isinstance(n, ops.GRU) for n, _, _ in walk(workload.graph, workload.input.shape))


def choose(workload, device: str, layout: str | None = None, jit_compile: bool | None = None):
    """The fast path for ``workload`` on ``device``; ``layout``/``jit_compile`` override it."""
    if layout is not None and layout not in LAYOUTS:
        raise BackendError(f"backend 'tensorflow': layout must be NHWC or NCHW, not {layout!r}")
    data_format = (
        LAYOUTS[layout] if layout else ("channels_first" if device == "cuda" else "channels_last")
    )
    if jit_compile is not None:
        why = "asked for"
    elif has_gru(workload):
        jit_compile = device == "cpu"
        why = (
            "GRU on CPU: XLA fuses the 150-step loop (measured faster)"
            if jit_compile
            else "GRU on GPU: cuDNN's fused kernel, which XLA cannot compile"
        )
    else:
        jit_compile = False
        why = "convolutions: TensorFlow's oneDNN kernels measured faster than XLA's on CPU"
    return FastPath(data_format, bool(jit_compile), why)
