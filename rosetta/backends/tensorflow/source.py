"""The Rosetta of Keras on TensorFlow, in text: the shared Keras table
(``rosetta/backends/keras_common/source.py``: the functional API reads the same on every engine)
under this backend's name. Text only."""

from __future__ import annotations

from dataclasses import replace

from rosetta.backends.driver import Entry, Site
from rosetta.backends.keras_common.source import op_table
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.spec import ops

NAME = "tensorflow"


def _layer(n: str) -> str:
    return f"model.get_layer({q(n)})"


# -- the transformer's ops, TensorFlow's own (its lowering.py builds them with tf.nn.softmax and
# tf.where; keras_jax and keras_torch do not lower them yet) ----------------------------------
def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = f"{{x}} = layers.LayerNormalization(epsilon={op.eps}, name={q(n)})({{x}})"
    return Snippet(
        forward=(line,),
        weights=(
            Weight(f"{op.name}.gamma", f"{_layer(n)}.gamma"),
            Weight(f"{op.name}.beta", f"{_layer(n)}.beta"),
        ),
    )


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    line = "{x} = layers.Lambda(lambda v: 0.5 * v * (1 + tf.math.erf(v / np.sqrt(2.0))))({x})"
    return Snippet(forward=(line + "  # exact GELU",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = f"{{x}} = PositionEmbedding({op.max_len}, {site.in_shape[1]}, name={q(n)})({{x}})"
    return Snippet(
        forward=(line,),
        weights=(Weight(f"{op.name}.table", f"{_layer(n)}.table"),),
        helpers=("PositionEmbedding",),
    )


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    ctx.extra["mask"] = True
    line = (
        f"{{x}} = SelfAttention({site.in_shape[1]}, {op.heads}, name={q(n)})({{x}}, valid)"
        f"  # {fmt_shape(site.out_shape)}"
    )
    parts = (
        ("query_kernel", "query.kernel"), ("query_bias", "query.bias"),
        ("key_kernel", "key.kernel"), ("value_kernel", "value.kernel"),
        ("value_bias", "value.bias"), ("output_kernel", "out_proj.kernel"),
        ("output_bias", "out_proj.bias"),
    )  # fmt: skip
    weights = tuple(Weight(f"{op.name}.{r}", f"{_layer(n)}.{v}") for r, v in parts)
    return Snippet(forward=(line,), weights=weights, helpers=("SelfAttention",))


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        f"{{x}} = MaskedMean()({{x}}, valid)  # mean over real tokens: {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("MaskedMean",))


TRANSFORMER_LAYERS = {
    "PositionEmbedding": '''
class PositionEmbedding(layers.Layer):
    """Learned positions: x + table[:T]."""

    def __init__(self, max_len, dim, **kwargs):
        super().__init__(**kwargs)
        self.table = self.add_weight(shape=(max_len, dim), initializer="zeros")

    def call(self, x):
        return x + self.table[: keras.ops.shape(x)[1]]
''',
    "SelfAttention": '''
class SelfAttention(layers.Layer):
    """Multi-head self-attention; padding keys (valid False) take no part; a row of padding
    only attends to nothing (0). The key projection has no bias (the softmax cancels one)."""

    def __init__(self, dim, heads, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.heads = dim, heads
        self.query = layers.Dense(dim, name="query")
        self.key = layers.Dense(dim, use_bias=False, name="key")
        self.value = layers.Dense(dim, name="value")
        self.out_proj = layers.Dense(dim, name="out_proj")

    def call(self, x, valid):
        n, t = tf.shape(x)[0], tf.shape(x)[1]
        d = self.dim // self.heads

        def split(y):
            return tf.transpose(tf.reshape(y, (n, t, self.heads, d)), (0, 2, 1, 3))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = tf.matmul(q, k, transpose_b=True) * tf.cast(1 / np.sqrt(d), q.dtype)
        scores = tf.where(valid[:, None, None, :], scores, tf.cast(q.dtype.min, q.dtype))
        o = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
        o = tf.where(tf.reduce_any(valid, axis=1)[:, None, None, None], o, tf.zeros((), q.dtype))
        return self.out_proj(tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (n, t, self.dim)))
''',
    "MaskedMean": '''
class MaskedMean(layers.Layer):
    """The mean over real tokens (0 for a row of padding only)."""

    def call(self, x, valid):
        w = tf.cast(valid, x.dtype)
        return tf.einsum("nte,nt->ne", x, w) / tf.maximum(tf.reduce_sum(w, 1, keepdims=True), 1)
''',
}


#: the backend's one op table: each op's build function (named: lowering.py) and its source
#: rendering (keras_common/source.py, and the transformer's above); ``lowering.TABLE`` and
#: ``RENDER`` are its two faces
_SHARED = op_table(NAME)
OPS = replace(
    _SHARED,
    entries={
        **_SHARED.entries,
        # LayerNormalization(epsilon=spec's)
        ops.LayerNorm: Entry("layer_norm", layer_norm),
        # exact GELU, its constant in the layer's dtype
        ops.GELU: Entry("gelu", gelu),
        ops.PositionEmbedding: Entry("position_embedding", position_embedding),
        # Dense projections + tf.nn.softmax over masked scores
        ops.Attention: Entry("attention", attention),
        ops.MaskedMean: Entry("masked_mean", masked_mean),
    },
    helpers={**_SHARED.helpers, **TRANSFORMER_LAYERS},
)
RENDER = OPS.rendering()
