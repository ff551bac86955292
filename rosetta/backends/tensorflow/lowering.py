"""The Rosetta of Keras on TensorFlow: the shared Keras entries (``keras_common/lowering.py``,
one small function per spec op, engine-neutral) under this backend's table, and ``apply_op``.

``TABLE`` is the backend's lowering (``rosetta.backends.driver``) made of the entries of
``rosetta/backends/keras_common/lowering.py`` (imported here so the op table finds them by name);
``model.py`` applies the result to a ``keras.Input`` and gets a functional ``keras.Model``;
``apply_op`` applies one op to an eager tensor. Dropout is gated by a boolean ``tf.Variable``
read inside the trace: ``Model.set_dropout`` flips it, and the timed ``tf.function`` runs on
without retracing.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from rosetta.backends.driver import LoweringTable, Site, lower_op
from rosetta.backends.keras_common.lowering import (  # noqa: F401  (the table's build functions)
    Ctx,
    GatedDropout,
    InferenceBatchNorm,
    Layer,
    NegInfPadding2D,
    batchnorm,
    conv2d,
    dense,
    dropout,
    embedding,
    flatten,
    global_avgpool,
    gru,
    maxpool2d,
    relu,
    same_is_exact,
)
from rosetta.backends.tensorflow import runtime as tf_runtime
from rosetta.backends.tensorflow import weights
from rosetta.backends.tensorflow.source import OPS
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "tensorflow"


# -- the transformer's ops (TensorFlow's own: tf.nn.softmax, tf.where; keras_jax and keras_torch
# do not lower them yet, so their transformer cells name the op they lack) ----------------------
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
        ctx = Ctx(
            runtime.dtype, data_format, gate, seed=runtime.seed, training=training, backend=NAME
        )
        layer = lower_op(TABLE, op, tuple(x.shape[1:]), ctx)  # in_shape: canonical (C, H, W)
        y = layer(tf.constant(weights.images_to_layout(x, data_format))).numpy()
    if ctx.flattened_from is not None:
        return weights.flat_hwc_to_chw(y, ctx.flattened_from)
    return weights.images_to_canonical(y, data_format)
