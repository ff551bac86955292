"""causal_attention in Chainer: attention's ``lowering.SelfAttention`` with ``causal=True``: the
same four linear projections (the key's without bias), the scores under a (T, T) lower-triangular
mask (key ``j <= i`` for query ``i``; the rest hold the dtype's lowest value) and no token mask,
composed from ``chainer.functions`` (Chainer has no fused attention). Weights and AdamW's decay
set are attention's (``ops/attention.py``: each ``*_kernel`` (IO) its ``Linear.W`` (out, in)
transposed). Generating, it reads its keys and values from a static cache shared through
``ctx.decoding`` (``SelfAttention._cached``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read, attention
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.CausalAttention, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import SelfAttention

    layer = SelfAttention(site.in_shape[1], op.heads, causal=True, decoding=ctx.decoding)
    return ctx.own(op, layer)


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    return attention.attention_snippet(op, site, causal=True)


def to_native(op: ops.CausalAttention, params) -> dict:
    return attention.to_native(op, params)


def to_canonical(op: ops.CausalAttention, read: Read) -> dict:
    return attention.to_canonical(op, read)


def decay_paths(op: ops.CausalAttention) -> dict[str, str]:
    """The link attribute of each canonical parameter AdamW may decay (the four kernels)."""
    return attention.decay_paths(op)
