"""The fast-path choices of the backend, each with the measurement that decided it.

Numbers are from ``benchmarks/lowering_tensorflow.py`` and one-off runs on the 2-core CPU this
suite was developed on (shared, so noisy); the manifest records which choice ran.

- **Layout**: ``channels_last`` (NHWC) on CPU, where TensorFlow's CPU convolutions and pooling
  work in NHWC (NCHW pooling is not even implemented there: Keras transposes around it);
  ``channels_first`` (NCHW) on GPU, cuDNN's native layout.
- **XLA** (``jit_compile``): off for convolutional graphs on CPU (the CNN's train step is slower
  compiled: one-off 0.96 s vs 0.41 s), on for the GRU on CPU (its 150-step loop fuses: 0.18 s vs
  0.25-0.56 s). On GPU the GRU runs cuDNN's fused kernel, which XLA cannot compile: off there.
- **GRU**: Keras' cuDNN-eligible configuration (tanh, sigmoid, reset_after, bias, no unroll),
  so the fused kernel runs wherever TensorFlow sees a GPU.
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
