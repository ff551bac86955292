"""gru in NumPy: the reference layer ``layers.gru`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.GRU, site: Site, ctx: None) -> Layer:
    return layers.gru(op.name)


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    roles = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    return layer_line(f"gru({q(op.name)})", site, owned(op, roles))
