"""softmax in ONNX: one ``Softmax`` node with ``axis=-1``, opset 13's semantics (one axis, not
opset 11's flattening of every axis from ``axis`` on; the exporter writes 13 and later). The
graph is channels-first and batch-major, the spec's layout behind the batch axis, so the spec's
last per-sample axis (an image's W, a sequence's E, a vector's features) is the tensor's last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Softmax, site: Site, ctx: Build) -> Emit:
    return lambda b, x: b.one("Softmax", [x], axis=-1)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = Softmax({x}, axis=-1)",))
