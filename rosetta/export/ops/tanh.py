"""tanh in ONNX: ``Tanh`` (opset 6 and later)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Tanh, site: Site, ctx: Build) -> Emit:
    return lambda b, x: b.one("Tanh", [x])


def render(op: ops.Tanh, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = Tanh({x})",))
