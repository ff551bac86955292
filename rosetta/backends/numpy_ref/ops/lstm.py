"""lstm in NumPy: the reference layer ``layers.lstm`` (forward and backward side by side) and
the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.LSTM, site: Site, ctx: None) -> Layer:
    return layers.lstm(op.name)


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(f"lstm({q(op.name)})", site, owned(op, layers.LSTM_ROLES))
