"""The Rosetta of Keras: one small function per spec op, building its Keras layer(s).

``TABLE`` is the backend's lowering (``rosetta.backends.driver``): each entry turns an op into a
*layer*, here a function of Keras tensors made of Keras layers (most ops one layer, some a
padding layer and the layer), and registers the weights under their canonical names
(``ctx.bind``; the variables are found once the layer is built). The driver walks the graph;
``model.py`` applies the result to a ``keras.Input`` and gets a functional ``keras.Model``;
``apply_op`` applies one op to an eager tensor. ``site.in_shape`` is the op's input in the
*canonical* per-sample layout ``(C, H, W)``; the tensors themselves are in ``ctx.data_format``.

Padding: the spec's padding is explicit numbers. Where TensorFlow's ``"same"`` would pad exactly
those numbers (stride 1, odd kernel: every 3x3 conv of the CNN) the op uses ``padding="same"``,
one op (the CNN's train step with ZeroPadding2D + "valid" instead took 1.08 [1.01, 1.12] times
as long, interleaved, 12 rounds, load 15). Elsewhere (ResNet's stride-2 convs and its stem, where
"same" would pad bottom/right only) an explicit ``ZeroPadding2D`` precedes a ``"valid"`` conv,
and max-pooling pads with -inf (``NegInfPadding2D``): padded cells are never selected, as the
spec says.

Dropout is Keras' own (same rate, seed generator, mask and scaling) with its output selected by
``ctx.dropout_on``, a boolean ``tf.Variable`` read *inside* the trace: ``Model.set_dropout``
flips it, and the timed ``tf.function`` runs on without retracing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from rosetta.backends.driver import LoweringTable, Site, lower_op
from rosetta.backends.tensorflow import runtime as tf_runtime
from rosetta.backends.tensorflow import weights
from rosetta.backends.tensorflow.source import OPS
from rosetta.backends.tensorflow.weights import Binding
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "tensorflow"
Layer = Callable[[Any], Any]  # Keras tensor -> Keras tensor, through Keras layers


@dataclass
class Ctx:
    """What the entries need besides the op: dtype, layout, seeds, the dropout gate, bindings."""

    dtype: str
    data_format: str  # "channels_last" (NHWC) | "channels_first" (NCHW)
    dropout_on: tf.Variable  # bool, read inside the trace (Model.set_dropout)
    seed: int = 0
    training: bool | None = None  # None: the keras.Model call decides; bool: apply_op
    bindings: list[Binding] = field(default_factory=list)
    flattened_from: tuple[int, int, int] | None = None  # (C, H, W) of a pending NHWC flatten
    layer_count: int = 0

    def bind(self, names, find, to_native, to_canonical) -> None:
        self.bindings.append(Binding(tuple(names), find, to_native, to_canonical))

    def next_seed(self) -> int:
        self.layer_count += 1
        return self.seed * 1000 + self.layer_count


class NegInfPadding2D(layers.Layer):
    """Pads H and W with -inf: max-pooling's explicit padding (a padded cell is never the max)."""

    def __init__(self, padding: tuple[int, int, int, int], data_format: str, **kwargs):
        super().__init__(**kwargs)
        self.padding = tuple(padding)
        self.data_format = data_format

    def call(self, x):
        t, b, left, right = self.padding
        hw = [[t, b], [left, right]]
        widths = (
            [[0, 0], *hw, [0, 0]] if self.data_format == "channels_last" else [[0, 0], [0, 0], *hw]
        )
        return keras.ops.pad(x, widths, constant_values=float("-inf"))

    def get_config(self) -> dict:
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


class InferenceBatchNorm(layers.BatchNormalization):
    """``BatchNormalization`` that always normalises with its moving statistics (the spec's
    inference-mode BatchNorm), whatever ``training`` flag the model is called with."""

    def call(self, inputs, training=None, mask=None):
        return super().call(inputs, training=False, mask=mask)


class GatedDropout(layers.Dropout):
    """Keras' ``Dropout`` whose training-mode output is ``where(gate, dropout(x), x)``: the mask
    is drawn either way (the random stream does not depend on the gate), and ``gate`` is a
    ``tf.Variable``, so switching dropout off changes no trace."""

    def __init__(self, rate: float, gate: tf.Variable, **kwargs):
        super().__init__(rate, **kwargs)
        self._gate = gate  # not a weight: Keras tracks only its own Variables

    def call(self, inputs, training=False):
        dropped = super().call(inputs, training=training)
        return tf.where(self._gate, dropped, inputs) if training else dropped


class PositionEmbedding(layers.Layer):
    """Learned positions: ``x + table[:T]`` on (N, T, E)."""

    def __init__(self, max_len: int, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.max_len, self.dim = max_len, dim

    def build(self, input_shape) -> None:
        self.table = self.add_weight(shape=(self.max_len, self.dim), initializer="zeros")

    def call(self, x):
        return x + self.table[: ops_shape(x)[1]]


def ops_shape(x):
    return keras.ops.shape(x)


class SelfAttention(layers.Layer):
    """Multi-head self-attention over (N, T, E) with the key padding mask ``valid`` (N, T):
    four ``Dense`` projections (the key's without bias, as the spec), ``tf.nn.softmax`` (stable)
    over the scores with padding keys at the dtype's lowest value, and rows without any real key
    set to 0 (the spec's rule; Keras' ``MultiHeadAttention`` adds -1e9 instead, which float64
    does not drown, and carries a key bias the spec has not)."""

    def __init__(self, dim: int, heads: int, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.dim = heads, dim
        policy = kwargs.get("dtype")
        self.query = layers.Dense(dim, dtype=policy, name="query")
        self.key = layers.Dense(dim, use_bias=False, dtype=policy, name="key")
        self.value = layers.Dense(dim, dtype=policy, name="value")
        self.out_proj = layers.Dense(dim, dtype=policy, name="out_proj")

    def call(self, x, valid):
        n, t = tf.shape(x)[0], tf.shape(x)[1]
        h, d = self.heads, self.dim // self.heads

        def split(y):
            return tf.transpose(tf.reshape(y, (n, t, h, d)), (0, 2, 1, 3))  # (N, H, T, d)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = tf.matmul(q, k, transpose_b=True) * tf.cast(1 / np.sqrt(d), q.dtype)
        keys = valid[:, None, None, :]  # (N, 1, 1, T)
        scores = tf.where(keys, scores, tf.cast(q.dtype.min, q.dtype))
        probs = tf.nn.softmax(scores, axis=-1)
        any_key = tf.reduce_any(valid, axis=1)[:, None, None, None]
        o = tf.where(any_key, tf.matmul(probs, v), tf.zeros((), q.dtype))  # (N, H, T, d)
        o = tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (n, t, self.dim))  # heads concatenated
        return self.out_proj(o)


class ExactGELU(layers.Layer):
    """``0.5 x (1 + erf(x / sqrt 2))`` with the constant in the layer's dtype: Keras' and
    TensorFlow's own ``gelu(approximate=False)`` round ``sqrt 2`` to float32 first (5e-9 off in
    float64, 150x the float64 gate's bound; in float32 they are this)."""

    def call(self, x):
        root2 = tf.constant(np.sqrt(2.0), x.dtype)
        return tf.constant(0.5, x.dtype) * x * (1 + tf.math.erf(x / root2))


class MaskedMean(layers.Layer):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only."""

    def call(self, x, valid):
        w = tf.cast(valid, x.dtype)
        total = tf.einsum("nte,nt->ne", x, w)
        return total / tf.maximum(tf.reduce_sum(w, axis=1, keepdims=True), 1)


def _takes_mask(layer) -> Layer:
    """Mark ``layer`` (a function of ``(x, valid)``) for the sequences that hand it the mask."""
    layer.takes_mask = True
    return layer


def same_is_exact(kernel, stride, padding, in_hw) -> bool:
    """Whether TensorFlow's ``padding="same"`` pads exactly ``padding`` (t, b, l, r)."""
    pads = []
    for k, s, n in zip(kernel, stride, in_hw, strict=True):
        out = -(-n // s)  # ceil(n / s)
        total = max((out - 1) * s + k - n, 0)
        pads += [total // 2, total - total // 2]  # TensorFlow puts the odd cell at the end
    return tuple(pads) == tuple(padding)


def _padding(op, site: Site) -> tuple[tuple[int, int, int, int] | None, str]:
    """``(explicit, keras_padding)``: "valid" or exact "same" (explicit None), else the spec's
    ``(t, b, l, r)`` to pad with a layer of its own before a "valid" op."""
    if not any(op.padding):
        return None, "valid"
    if same_is_exact(op.kernel, op.stride, op.padding, site.in_shape[1:]):
        return None, "same"
    return tuple(op.padding), "valid"


def _after(pad: layers.Layer, layer: layers.Layer) -> Layer:
    """``layer`` preceded by the explicit padding layer ``pad``."""
    return lambda x: layer(pad(x))


def _weights(op, layer) -> tuple[list[str], Callable[[], tuple]]:
    """Canonical names and the variable finder of a kernel (+ bias) layer."""
    names = [f"{op.name}.kernel"] + ([f"{op.name}.bias"] if op.bias else [])
    return names, lambda: (layer.kernel, layer.bias) if op.bias else (layer.kernel,)


# -- the table's entries: entry(op, site, ctx) -> layer ----------------------------------------
def conv2d(op: ops.Conv2D, site: Site, ctx: Ctx) -> Layer:
    explicit, padding = _padding(op, site)
    layer = layers.Conv2D(
        op.out_channels,
        op.kernel,
        strides=op.stride,
        padding=padding,
        data_format=ctx.data_format,
        use_bias=op.bias,
        dtype=ctx.dtype,
        name=op.name,
    )
    ctx.bind(*_weights(op, layer), weights.oihw_to_hwio, weights.hwio_to_oihw)
    if explicit is None:
        return layer
    t, b, left, right = explicit
    return _after(
        layers.ZeroPadding2D(((t, b), (left, right)), ctx.data_format, dtype=ctx.dtype), layer
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: Ctx) -> Layer:
    explicit, padding = _padding(op, site)
    pool = layers.MaxPooling2D(
        op.kernel, strides=op.stride, padding=padding, data_format=ctx.data_format, dtype=ctx.dtype
    )
    if explicit is None:
        return pool
    return _after(NegInfPadding2D(explicit, ctx.data_format, dtype=ctx.dtype), pool)


def relu(op: ops.ReLU, site: Site, ctx: Ctx) -> Layer:
    return layers.ReLU(dtype=ctx.dtype)


def dropout(op: ops.Dropout, site: Site, ctx: Ctx) -> Layer:
    layer = GatedDropout(op.rate, ctx.dropout_on, seed=ctx.next_seed(), dtype=ctx.dtype)
    return layer if ctx.training is None else lambda x: layer(x, training=ctx.training)


def flatten(op: ops.Flatten, site: Site, ctx: Ctx) -> Layer:
    if op.order != "CHW":
        raise BackendError(f"backend {NAME!r}: flatten order {op.order!r} is not the spec's CHW")
    if ctx.data_format == "channels_last" and len(site.in_shape) == 3:
        ctx.flattened_from = tuple(site.in_shape)  # the next dense layer's rows are permuted
    return layers.Flatten(dtype=ctx.dtype)  # channels_first: already C, H, W order


def dense(op: ops.Dense, site: Site, ctx: Ctx) -> Layer:
    layer = layers.Dense(op.units, use_bias=op.bias, dtype=ctx.dtype, name=op.name)
    if ctx.flattened_from is not None:
        chw, ctx.flattened_from = ctx.flattened_from, None
        convert = weights.chw_rows_to_hwc(chw), weights.hwc_rows_to_chw(chw)
    else:
        convert = weights.identity, weights.identity
    ctx.bind(*_weights(op, layer), *convert)
    return layer


def batchnorm(op: ops.BatchNorm, site: Site, ctx: Ctx) -> Layer:
    if ctx.flattened_from is not None:
        raise BackendError(f"backend {NAME!r}: batchnorm after an NHWC flatten is not lowered")
    axis = -1 if ctx.data_format == "channels_last" or len(site.in_shape) == 1 else 1
    layer = InferenceBatchNorm(
        axis=axis, epsilon=op.eps, momentum=1.0 - op.momentum, dtype=ctx.dtype, name=op.name
    )
    names = [f"{op.name}.{r}" for r in ("gamma", "beta", "mean", "var")]
    find = lambda: (layer.gamma, layer.beta, layer.moving_mean, layer.moving_variance)  # noqa: E731
    ctx.bind(names, find, weights.identity, weights.identity)
    return layer


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: Ctx) -> Layer:
    return layers.GlobalAveragePooling2D(data_format=ctx.data_format, dtype=ctx.dtype)


def embedding(op: ops.Embedding, site: Site, ctx: Ctx) -> Layer:
    layer = layers.Embedding(op.vocab, op.dim, dtype=ctx.dtype, name=op.name)
    ctx.bind([f"{op.name}.table"], lambda: (layer.embeddings,), weights.identity, weights.identity)
    return layer  # (N, T) -> (N, T, E)


def gru(op: ops.GRU, site: Site, ctx: Ctx) -> Layer:
    if (op.gate_order, op.reset_after) != (("z", "r", "h"), True):
        raise BackendError(f"backend {NAME!r}: GRU must be z, r, h with reset_after=True")
    if (op.initial_state, op.output) != ("zeros", "last"):
        raise BackendError(f"backend {NAME!r}: GRU must start at zeros and return the last step")
    # the cuDNN-eligible configuration: tanh, sigmoid, reset_after, bias, no unroll
    layer = layers.GRU(
        op.units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        reset_after=True,
        unroll=False,
        return_sequences=False,
        dtype=ctx.dtype,
        name=op.name,
    )
    names = [
        f"{op.name}.{r}" for r in ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    ]
    find = lambda: (layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)  # noqa: E731
    ctx.bind(names, find, weights.gru_to_keras, weights.gru_from_keras)
    return layer  # (N, T, E) -> (N, H), the last step


def layer_norm(op: ops.LayerNorm, site: Site, ctx: Ctx) -> Layer:
    layer = layers.LayerNormalization(axis=-1, epsilon=op.eps, dtype=ctx.dtype, name=op.name)
    names = [f"{op.name}.gamma", f"{op.name}.beta"]
    ctx.bind(names, lambda: (layer.gamma, layer.beta), weights.identity, weights.identity)
    return layer


def gelu(op: ops.GELU, site: Site, ctx: Ctx) -> Layer:
    return ExactGELU(dtype=ctx.dtype)


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    layer = PositionEmbedding(op.max_len, site.in_shape[1], dtype=ctx.dtype, name=op.name)
    ctx.bind([f"{op.name}.table"], lambda: (layer.table,), weights.identity, weights.identity)
    return layer


def attention(op: ops.Attention, site: Site, ctx: Ctx) -> Layer:
    layer = SelfAttention(site.in_shape[1], op.heads, dtype=ctx.dtype, name=op.name)
    names = [f"{op.name}.{r}" for r in ops.ATTENTION_ROLES]
    find = lambda: (  # noqa: E731
        layer.query.kernel, layer.query.bias, layer.key.kernel, layer.value.kernel,
        layer.value.bias, layer.out_proj.kernel, layer.out_proj.bias,
    )  # fmt: skip
    ctx.bind(names, find, weights.identity, weights.identity)
    return _takes_mask(lambda x, valid: layer(x, valid))


def masked_mean(op: ops.MaskedMean, site: Site, ctx: Ctx) -> Layer:
    layer = MaskedMean(dtype=ctx.dtype)
    return _takes_mask(lambda x, valid: layer(x, valid))


def _run(layer, x, valid):
    return layer(x, valid) if getattr(layer, "takes_mask", False) else layer(x)


def sequence(chain: list[Layer], site: Site, ctx: Ctx) -> Layer:
    """The layers applied in order (an empty chain is the identity: a plain shortcut); with
    masked ops, the model's own sequence over token ids makes the mask and hands it down."""
    if not any(getattr(layer, "takes_mask", False) for layer in chain):

        def sequence_layer(x):
            for layer in chain:
                x = layer(x)
            return x

        return sequence_layer
    if site.path == "" and len(site.in_shape) == 1:

        def token_sequence(x):
            valid = keras.ops.not_equal(x, 0)  # (N, T): real tokens
            for layer in chain:
                x = _run(layer, x, valid)
            return x

        return token_sequence

    def masked_sequence(x, valid):
        for layer in chain:
            x = _run(layer, x, valid)
        return x

    return _takes_mask(masked_sequence)


def residual(body: Layer, shortcut: Layer, site: Site, ctx: Ctx) -> Layer:
    """``body(x) + shortcut(x)`` through a Keras ``Add``."""
    add = layers.Add(dtype=ctx.dtype)
    if getattr(body, "takes_mask", False) or getattr(shortcut, "takes_mask", False):
        return _takes_mask(lambda x, valid: add([_run(body, x, valid), _run(shortcut, x, valid)]))
    return lambda x: add([body(x), shortcut(x)])


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def data_format_for(device: str, image: bool) -> str:
    """The layout ``apply_op`` computes in: the model's default for ``device`` (see model.py)."""
    return "channels_first" if device == "cuda" or not image else "channels_last"


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch, in the device's layout (dropout seeded
    from ``runtime.seed``)."""
    x = np.asarray(x, dtype=runtime.dtype)
    data_format = data_format_for(runtime.device, x.ndim == 4)
    with tf.device(tf_runtime.tf_device(runtime.device)):
        gate = tf.Variable(True, trainable=False)
        ctx = Ctx(runtime.dtype, data_format, gate, seed=runtime.seed, training=training)
        layer = lower_op(TABLE, op, tuple(x.shape[1:]), ctx)  # in_shape: canonical (C, H, W)
        y = layer(tf.constant(weights.images_to_layout(x, data_format))).numpy()
    if ctx.flattened_from is not None:
        return weights.flat_hwc_to_chw(y, ctx.flattened_from)
    return weights.images_to_canonical(y, data_format)
