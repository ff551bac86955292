"""causal_attention in NumPy: the reference layer ``layers.causal_attention`` (the attention
kernels of ``seq.py`` under a (T, T) lower-triangular mask) and the same layer as a line of the
generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.CausalAttention, site: Site, ctx: None) -> Layer:
    return layers.causal_attention(op.name, op.heads)


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(
        f"causal_attention({q(op.name)}, heads={op.heads})",
        site,
        owned(op, ops.ATTENTION_ROLES),
    )
