"""tied_dense in NumPy: the reference layer ``layers.tied_dense`` (the dense kernels of
``nn.py`` with the embedding's table transposed as the kernel; its gradient added to the
embedding's) and the same layer as a line of the generated plain-NumPy file. The op owns no
parameter: the generated file's ``params`` holds the table once, under the embedding's name.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.TiedDense, site: Site, ctx: None) -> Layer:
    return layers.tied_dense(op.tie)


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(f"tied_dense({q(op.tie)})", site)
