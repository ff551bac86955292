"""causal_attention in Paddle: ``CausalSelfAttention`` (``lowering.py``), attention's layer with
the padding mask replaced by causality: ``F.scaled_dot_product_attention(..., is_causal=True)``
in float32, attention's composed core (``attend``) under a lower triangle in float64. Its
projections, their source and their bindings are attention's (``attention.py``). Generating,
the lowered layer writes its keys and values into a static cache (``Decoding``); the generated
file's helper keeps them in a dict, one (keys, values) per layer, concatenated a step at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding
from rosetta.backends.driver import Site
from rosetta.backends.paddle.ops import attention
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


CAUSAL_SELF_ATTENTION = '''
def causal_self_attention(x, query, key, value, output, heads, cache=None, layer=""):
    """Multi-head self-attention where position i reads positions 0..i only: Paddle's
    scaled_dot_product_attention with is_causal=True; in float64 ``attend`` under a lower
    triangle (Paddle's CPU path scales q first and masks by adding -1e4, not the spec's -inf).
    Generating, ``cache`` (a dict) keeps each layer's keys and values of the positions seen so
    far: the prompt's positions fill it, then each new token reads them and adds its own."""
    n, t, e = x.shape
    split = [n, t, heads, e // heads]  # (N, T, E) -> (N, T, heads, d): head-major columns
    q, k, v = (p(x).reshape(split) for p in (query, key, value))
    if cache is not None:
        if layer in cache:  # new positions after the cached ones
            k = paddle.concat([cache[layer][0], k], axis=1)  # (N, seen + T, heads, d)
            v = paddle.concat([cache[layer][1], v], axis=1)
        cache[layer] = (k, v)
    seen = k.shape[1] - t  # the positions before these (0 unless generating)
    if x.dtype == paddle.float32 and (seen == 0 or t == 1):
        # several positions from the start: query i reads keys 0..i; one new token: all
        o = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)  # (N, T, heads, d)
    else:  # key j <= query i, the queries at positions seen..seen + T - 1
        o = attend(q, k, v, paddle.arange(seen, seen + t)[:, None] >= paddle.arange(seen + t))
    return output(o.reshape([n, t, e]))  # heads concatenated
'''
HELPERS = {"causal_self_attention": CAUSAL_SELF_ATTENTION}


def build(op: ops.CausalAttention, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import CausalSelfAttention

    layer = CausalSelfAttention(site.in_shape[1], op.heads, ctx.decoding)
    ctx.own(op, layer)
    return layer


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    layers, args = attention.projections(op, site.in_shape[1])
    return Snippet(
        layers.init,
        (
            f"{{x}} = causal_self_attention({{x}}, {args}, heads={op.heads}, cache=cache, "
            f"layer={q(op.name)})  # {fmt_shape(site.out_shape)}",
        ),
        layers.weights,
        helpers=("attend", "causal_self_attention"),
    )


def weights(op: ops.CausalAttention, m: nn.Layer) -> list[Binding]:
    return attention.weights(op, m)
