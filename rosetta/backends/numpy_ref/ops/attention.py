"""attention in NumPy: the reference layer ``layers.attention`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.Attention, site: Site, ctx: None) -> Layer:
    return layers.attention(op.name, op.heads)


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(
        f"attention({q(op.name)}, heads={op.heads})", site, owned(op, ops.ATTENTION_ROLES)
    )
