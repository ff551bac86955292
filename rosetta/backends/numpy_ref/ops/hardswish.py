"""hardswish in NumPy: the reference layer ``layers.hardswish`` (forward and backward side by
side) and the same layer as a line of the generated plain-NumPy file.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops


def build(op: ops.HardSwish, site: Site, ctx: None) -> Layer:
    return layers.hardswish()


def render(op: ops.HardSwish, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line("hardswish()", site)
