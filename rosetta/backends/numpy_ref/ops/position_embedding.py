"""position_embedding in NumPy: the reference layer ``layers.position_embedding`` (forward and
backward side by side) and the same layer as a line of the generated plain-NumPy file.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.PositionEmbedding, site: Site, ctx: None) -> Layer:
    return layers.position_embedding(op.name)


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(f"position_embedding({q(op.name)})", site, owned(op, ("table",)))
