"""hardswish in ONNX: ``HardSwish`` (opset 14 and later: ``MIN_OPSET``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit

MIN_OPSET = 14


def build(op: ops.HardSwish, site: Site, ctx: Build) -> Emit:
    return lambda b, x: b.one("HardSwish", [x])


def render(op: ops.HardSwish, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = HardSwish({x})",))
