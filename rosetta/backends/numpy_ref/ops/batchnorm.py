"""batchnorm in NumPy: the reference layer ``layers.batchnorm`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.BatchNorm, site: Site, ctx: None) -> Layer:
    return layers.batchnorm(op.name, op.eps)


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(
        f"batchnorm({q(op.name)}, eps={op.eps})", site, owned(op, ("gamma", "beta", "mean", "var"))
    )
