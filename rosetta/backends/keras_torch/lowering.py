"""The Rosetta of Keras on PyTorch: the shared Keras op modules (``keras_common/ops/``, one per
spec op, engine-neutral) under this backend's table, composed by ``sequence`` and
``residual`` of ``keras_common/lowering.py`` (imported here so the table finds them by name),
and ``apply_op``.

Images are channels-first (NCHW): Keras' torch engine runs every convolution and pooling through
``torch.nn.functional`` in NCHW and, given channels-last tensors, transposes them to NCHW and
back around each such op (``keras/src/backend/torch/nn.py``, ``_transpose_spatial_inputs``);
channels-first feeds PyTorch its own layout, so a flatten is already in the spec's C, H, W order.
"""

from __future__ import annotations

# Keras' engine is chosen (runtime.py) before anything imports keras
from rosetta.backends.keras_torch import runtime as torch_keras_runtime  # isort: split

import keras
import numpy as np
import torch

from rosetta.backends.binding import gru_bias_rzn, gru_kernel_from_rzn_rows, gru_kernel_rzn_rows
from rosetta.backends.driver import LoweringTable, Site
from rosetta.backends.keras_common.lowering import (  # noqa: F401  (the table's composers)
    GatedDropout,
    Layer,
    SelfAttention,
    apply_keras_op,
    graph,
    residual,
    sequence,
)
from rosetta.backends.keras_common.weights import Binding
from rosetta.backends.keras_torch.source import OPS
from rosetta.backends.torch.lowering import LastStepGRU
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "keras_torch"
TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS
DATA_FORMAT = "channels_first"
WHY_LAYOUT = (
    "NCHW: Keras' torch engine runs convolutions and pooling in NCHW and transposes "
    "channels-last tensors around each such op"
)


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch (dropout seeded from ``runtime.seed``)."""
    with keras.device(torch_keras_runtime.keras_device(runtime.device)):
        return apply_keras_op(
            TABLE, op, x, runtime.dtype, DATA_FORMAT, runtime.seed, training, NAME
        )


def fused_gru(op: ops.GRU, site: Site, ctx) -> Layer:
    """The spec's GRU as PyTorch's fused ``nn.GRU`` (one ``aten::gru`` over every step, as the
    ``torch`` backend runs it) in ``keras.layers.TorchModuleWrapper``, Keras' documented way to
    use a torch module in a Keras model on this engine: its parameters become the layer's Keras
    variables, which the optimiser steps and the binding reads. Keras' own ``layers.GRU`` is a
    Python loop over the time steps here (its fused path is cuDNN, GPUs only): the gru
    workload's train step fused / Keras' 0.643 [0.617, 0.666] (``benchmarks fastpath_knob``,
    batch 64 x 150, Zen 4), its cold start 0.6 s against 8.8 s. The gates:
    PyTorch's rows r|z|n, (3H, E), where the spec's columns are z|r|h, (E, 3H)."""
    module = LastStepGRU(site.in_shape[1], op.units)  # the torch backend's own
    if ctx.dtype == "float64":
        module = module.double()
    layer = keras.layers.TorchModuleWrapper(
        module, name=ctx.layer_name(op.name), output_shape=(None, op.units), dtype=ctx.dtype
    )  # its dtype policy: a layer casts its inputs to it (float32 by default)
    names = tuple(
        f"{op.name}.{r}" for r in ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    )
    ctx.bind(Binding(names, lambda: tuple(layer.weights), _gru_to_torch, _gru_from_torch))
    return layer  # (N, T, E) -> (N, H), the last step


def _gru_to_torch(kernel, recurrent_kernel, bias_input, bias_recurrent):
    return (gru_kernel_rzn_rows(kernel), gru_kernel_rzn_rows(recurrent_kernel),
            gru_bias_rzn(bias_input), gru_bias_rzn(bias_recurrent))  # fmt: skip


def _gru_from_torch(weight_ih, weight_hh, bias_ih, bias_hh):
    return (gru_kernel_from_rzn_rows(weight_ih), gru_kernel_from_rzn_rows(weight_hh),
            gru_bias_rzn(bias_ih), gru_bias_rzn(bias_hh))  # fmt: skip


class FusedSelfAttention(SelfAttention):
    """The spec's attention with its core, ``softmax(q k^T / sqrt(d)) v`` over the real keys, as
    PyTorch's ``torch.nn.functional.scaled_dot_product_attention`` (one fused kernel, forward and
    backward, where the shared ``SelfAttention`` runs matmul, where, softmax and matmul as four
    eager ops with an (N, H, T, T) tensor between each), the boolean mask letting in the keys
    the shared layer lets in; the projections, the mask and the all-padding rule are the shared
    layer's; causal (the decoder's ``causal_attention``), the same call with ``is_causal=True``
    and no mask tensor (PyTorch builds the triangle, and its flash kernel skips the masked half),
    as the ``torch`` backend's ``CausalSelfAttention``. Chosen by the option ``attention``
    (``attention_in_effect``)."""

    def attend(self, q, k, v, keys):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keys)

    def attend_causal(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


class FusedDropout(GatedDropout):
    """The spec's dropout as PyTorch's own kernel, ``torch.nn.functional.dropout`` (a Bernoulli
    draw and one multiply, backward one multiply), as the ``torch`` backend's ``nn.Dropout``:
    Keras' seeded dropout on this engine fills a keep-probability tensor, draws, then selects
    with ``where`` and divides, forward and backward (~3% of the transformer's train step). Its
    random stream is PyTorch's generator, seeded from the runtime's seed when the model is built
    (``KerasTorchModel``), as the torch backend seeds it. The gate is a Python flag
    (``EagerGate``); the mask is drawn either way."""

    def call(self, inputs, training=False):
        if not training:
            return inputs
        dropped = torch.nn.functional.dropout(inputs, self.rate, training=True)
        return dropped if self._gate.on else inputs
