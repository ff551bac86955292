"""softmax in NumPy: the reference layer ``layers.softmax`` (forward and backward side by side)
and the same layer as a line of the generated plain-NumPy file. The reference is channels-first
and batch-major like the spec, so the spec's last per-sample axis is the batched array's last.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops


def build(op: ops.Softmax, site: Site, ctx: None) -> Layer:
    return layers.softmax()


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line("softmax()", site)
