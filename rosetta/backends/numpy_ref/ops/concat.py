"""concat in NumPy: the reference layer ``layers.concat`` (its inputs' list in, their
gradients' parts out) and the same layer as a line of the generated plain-NumPy file. The
reference is channels-first like the spec: the spec's per-sample axis is the batched array's
``axis + 1``.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops


def build(op: ops.Concat, site: Site, ctx: None) -> Layer:
    return layers.concat(op.axis + 1)  # + 1: the batch axis leads


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(f"concat({op.axis + 1})", site)
