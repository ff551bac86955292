"""mul in NumPy: the reference layer ``layers.mul`` (forward and backward side by side) and
the same layer as a line of the generated plain-NumPy file. A variadic layer: the list of its
inputs in, one gradient per input out.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops


def build(op: ops.Mul, site: Site, ctx: None) -> Layer:
    return layers.mul()


def render(op: ops.Mul, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line("mul()", site)
