"""Lowering overhead of the Keras-on-PyTorch backend: the lowered model's step against Keras
written by hand.

``python -m benchmarks lowering_keras_torch [--workloads cnn,gru,resnet50,transformer]
[--rounds N] [--threads N] [--image-size S] [--hand-first] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.keras_torch`` from the canonical
weights, float32, its default fast path: Keras' own ``train_on_batch`` on the CPU, NCHW images,
the GRU as PyTorch's fused ``nn.GRU`` in ``TorchModuleWrapper``) and the hand-written Keras
model (``benchmarks/handwritten/keras_models.py``: the same layout and dtype, the lowered
weights loaded by position, ``compile(jit_compile="auto")``, eager on this engine,
``train_on_batch`` / ``predict_on_batch``, and Keras' own ``layers.GRU``: the fused GRU is a
fast path of the lowered side only) first show the same forward pass in inference mode (float32,
1e-4 relative); then ``benchmarks._lowering`` times their steps interleaved and writes lowered /
hand-written with its interval (target <= 1.05), the load and the fraction of the measured
ceiling (``benchmarks/_keras_common.py`` does the rest, for both Keras engines).
"""

from __future__ import annotations

from benchmarks import _keras_common
from benchmarks._lowering import run

BACKEND = "keras_torch"


def main(argv: list[str]) -> int:
    return run(BACKEND, _keras_common.prepare(BACKEND), argv, setup=_keras_common.setup(BACKEND))
