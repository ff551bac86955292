"""The Rosetta of NumPy: every op of the spec as a NumPy forward with its backward beside it.

``TABLE`` (the native face of ``source.OPS``, walked by ``rosetta.backends.driver``) turns each
op into a *layer* of :mod:`rosetta.backends.numpy_ref.layers`, a function
``layer(x, ctx) -> (y, back)`` that runs the op's forward (the kernels of ``conv.py``, ``nn.py``,
``rnn.py``) and returns a closure mapping the output gradient to the input gradient while adding
the op's parameter gradients to ``ctx.grads``. The layers take plain values, so the generated
NumPy file carries the same code verbatim; an entry here only reads the op's fields.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, lower_op
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Ctx, Layer
from rosetta.backends.numpy_ref.loader import as_input
from rosetta.backends.numpy_ref.source import OPS
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "numpy_ref"
__all__ = ["NAME", "TABLE", "Ctx", "Layer", "apply_op"]


def conv2d(op: ops.Conv2D, site: Site, build: None) -> Layer:
    return layers.conv2d(op.name, op.stride, op.padding, op.bias)


def maxpool2d(op: ops.MaxPool2D, site: Site, build: None) -> Layer:
    return layers.maxpool2d(op.kernel, op.stride, op.padding)


def relu(op: ops.ReLU, site: Site, build: None) -> Layer:
    return layers.relu()


def dropout(op: ops.Dropout, site: Site, build: None) -> Layer:
    return layers.dropout(op.rate)


def flatten(op: ops.Flatten, site: Site, build: None) -> Layer:
    return layers.flatten()  # (N, C, H, W) -> (N, C*H*W), channel-major


def dense(op: ops.Dense, site: Site, build: None) -> Layer:
    return layers.dense(op.name, op.bias)


def batchnorm(op: ops.BatchNorm, site: Site, build: None) -> Layer:
    return layers.batchnorm(op.name, op.eps)


def global_avgpool(op: ops.GlobalAvgPool, site: Site, build: None) -> Layer:
    return layers.global_avgpool()


def embedding(op: ops.Embedding, site: Site, build: None) -> Layer:
    return layers.embedding(op.name)


def gru(op: ops.GRU, site: Site, build: None) -> Layer:
    return layers.gru(op.name)


def layer_norm(op: ops.LayerNorm, site: Site, build: None) -> Layer:
    return layers.layer_norm(op.name, op.eps)


def gelu(op: ops.GELU, site: Site, build: None) -> Layer:
    return layers.gelu()


def position_embedding(op: ops.PositionEmbedding, site: Site, build: None) -> Layer:
    return layers.position_embedding(op.name)


def attention(op: ops.Attention, site: Site, build: None) -> Layer:
    return layers.attention(op.name, op.heads)


def masked_mean(op: ops.MaskedMean, site: Site, build: None) -> Layer:
    return layers.masked_mean()


def sequence(parts: list[Layer], site: Site, build: None) -> Layer:
    """Layers in order; the backward plays their closures in reverse. The model's own sequence
    on token ids records their padding mask for the masked ops."""
    return layers.sequential(parts, tokens=is_token_input(site))


def is_token_input(site: Site) -> bool:
    """Whether ``site`` is the whole model's sequence over token ids (T,)."""
    return site.path == "" and site.at_input and len(site.in_shape) == 1


def residual(body: Layer, shortcut: Layer, site: Site, build: None) -> Layer:
    """``body(x) + shortcut(x)``; the output gradient flows into both branches."""
    return layers.residual(body, shortcut)


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch (dropout masks from ``runtime.seed``)."""
    layer = lower_op(TABLE, op, tuple(x.shape[1:]), None)
    ctx = Ctx({}, training=training, rng=np.random.default_rng(runtime.seed))
    y, _ = layer(as_input(x, runtime.dtype), ctx)
    return y
