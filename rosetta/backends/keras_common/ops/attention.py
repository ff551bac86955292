"""attention in Keras: ``SelfAttention``, four ``Dense`` projections (the key's without bias, as
the spec) and ``keras.ops.softmax`` over the scaled scores, padding keys at -inf, a row without
a real key zeroed (``lowering.ATTENTION_NOTE``: why not Keras' ``MultiHeadAttention``). It reads
the model's mask of real tokens. Every kernel is IO and every bias as stored: no conversion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Binding, identity
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer, SelfAttention

SELF_ATTENTION = '''
class SelfAttention(layers.Layer):
    """Multi-head self-attention. With the mask valid (N, T): padding keys take no part, and
    a row of padding only attends to nothing (0). causal=True (no mask): query i reads keys
    j <= i. The key projection has no bias (the softmax cancels one), so not
    keras.layers.MultiHeadAttention, which also masks with -1e9 rather than excluding."""

    def __init__(self, dim, heads, causal=False, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.heads, self.causal = dim, heads, causal
        self.query = layers.Dense(dim, name="query")
        self.key = layers.Dense(dim, use_bias=False, name="key")
        self.value = layers.Dense(dim, name="value")
        self.out_proj = layers.Dense(dim, name="out_proj")

    def build(self, input_shape):
        for projection in (self.query, self.key, self.value, self.out_proj):
            projection.build(input_shape)

    def call(self, x, valid=None):
        t, d = keras.ops.shape(x)[1], self.dim // self.heads

        def split(y):  # (N, T, E) -> (N, heads, T, d)
            return keras.ops.transpose(keras.ops.reshape(y, (-1, t, self.heads, d)), (0, 2, 1, 3))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = keras.ops.matmul(q, keras.ops.swapaxes(k, -1, -2)) / d**0.5
        if self.causal:  # key j <= query i
            i = keras.ops.arange(t)
            probs = keras.ops.softmax(
                keras.ops.where(i[:, None] >= i[None, :], scores, float("-inf")), axis=-1
            )
            o = keras.ops.matmul(probs, v)
        else:
            any_key = keras.ops.any(valid, axis=1)[:, None, None, None]
            # padding keys at -inf; a row with no real key lets all in (finite), then outputs 0
            keys = keras.ops.logical_or(valid[:, None, None, :], keras.ops.logical_not(any_key))
            probs = keras.ops.softmax(keras.ops.where(keys, scores, float("-inf")), axis=-1)
            o = keras.ops.where(any_key, keras.ops.matmul(probs, v), 0.0)
        o = keras.ops.reshape(keras.ops.transpose(o, (0, 2, 1, 3)), (-1, t, self.dim))
        return self.out_proj(o)
'''
HELPERS = {"SelfAttention": SELF_ATTENTION}


def build(op: ops.Attention, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.keras_common.lowering import takes_mask

    layer = self_attention(op, site, ctx, causal=False)
    return takes_mask(lambda x, valid: layer(x, valid))


def self_attention(
    op: ops.Attention | ops.CausalAttention, site: Site, ctx: Ctx, causal: bool
) -> SelfAttention:
    """The ``SelfAttention`` layer of ``op`` (``causal``: query i reads keys j <= i, no mask),
    an engine's fused core where it supplies one (``Ctx.native["attention"]``: keras_torch), its
    weights bound (kernels IO, as the spec); causal, it shares ``ctx.decoding`` (generating,
    the static KV cache: ``keras_common/decoding.py``). ``causal_attention.py`` builds with it
    too."""
    from rosetta.backends.keras_common.lowering import SelfAttention

    cls = ctx.native.get("attention", SelfAttention)
    layer = cls(
        site.in_shape[1],
        op.heads,
        causal=causal,
        decoding=ctx.decoding if causal else None,  # a decoder generates: its KV cache
        dtype=ctx.dtype,
        name=ctx.layer_name(op.name),
    )
    ctx.bind(weights(op, layer, ctx))
    return layer


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    ctx.extra["mask"] = True
    line = (
        f"{{x}} = SelfAttention({site.in_shape[1]}, {op.heads}, name={q(n)})({{x}}, valid)"
        f"  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=rendered_weights(op), helpers=("SelfAttention",))


def rendered_weights(op: ops.Attention | ops.CausalAttention) -> tuple[Weight, ...]:
    """The weight table's rows of a ``SelfAttention`` layer: each role's variable, as stored."""
    parts = (
        ("query_kernel", "query.kernel"), ("query_bias", "query.bias"),
        ("key_kernel", "key.kernel"), ("value_kernel", "value.kernel"),
        ("value_bias", "value.bias"), ("output_kernel", "out_proj.kernel"),
        ("output_bias", "out_proj.bias"),
    )  # fmt: skip
    n = attr(op.name)
    return tuple(Weight(f"{op.name}.{r}", f"{get_layer(n)}.{v}") for r, v in parts)


def weights(op: ops.Attention | ops.CausalAttention, layer: SelfAttention, ctx: Ctx) -> Binding:
    names = tuple(f"{op.name}.{r}" for r in ops.ATTENTION_ROLES)
    find = lambda: (  # noqa: E731
        layer.query.kernel, layer.query.bias, layer.key.kernel, layer.value.kernel,
        layer.value.bias, layer.out_proj.kernel, layer.out_proj.bias,
    )  # fmt: skip
    return Binding(names, find, identity, identity)
