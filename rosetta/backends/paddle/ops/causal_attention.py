"""causal_attention in Paddle: ``CausalSelfAttention`` (``lowering.py``), attention's layer with
the padding mask replaced by causality: ``F.scaled_dot_product_attention(..., is_causal=True)``
in float32, attention's composed core (``attend``) under a lower triangle in float64. Its
projections, their source and their bindings are attention's (``attention.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding
from rosetta.backends.driver import Site
from rosetta.backends.paddle.ops import attention
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


CAUSAL_SELF_ATTENTION = '''
def causal_self_attention(x, query, key, value, output, heads):
    """Multi-head self-attention where position i reads positions 0..i only: Paddle's
    scaled_dot_product_attention with is_causal=True; in float64 ``attend`` under a lower
    triangle (Paddle's CPU path scales q first and masks by adding -1e4, not the spec's -inf)."""
    n, t, e = x.shape
    split = [n, t, heads, e // heads]  # (N, T, E) -> (N, T, heads, d): head-major columns
    q, k, v = (p(x).reshape(split) for p in (query, key, value))
    if x.dtype == paddle.float32:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (N, T, heads, d)
    else:
        o = attend(q, k, v, paddle.arange(t)[:, None] >= paddle.arange(t))  # key j <= query i
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
            f"{{x}} = causal_self_attention({{x}}, {args}, heads={op.heads})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        layers.weights,
        helpers=("attend", "causal_self_attention"),
    )


def weights(op: ops.CausalAttention, m: nn.Layer) -> list[Binding]:
    return attention.weights(op, m)
