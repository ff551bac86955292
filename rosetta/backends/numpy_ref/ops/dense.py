"""dense in NumPy: the reference layer ``layers.dense`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.Dense, site: Site, ctx: None) -> Layer:
    return layers.dense(op.name, op.bias)


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    call = f"dense({q(op.name)}, bias={op.bias})"
    return layer_line(call, site, owned(op, ("kernel", "bias") if op.bias else ("kernel",)))
