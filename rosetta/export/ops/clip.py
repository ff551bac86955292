"""clip in ONNX: ``Clip`` with its bounds as inputs (opset 11 and later), constants in the
graph's float type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Clip, site: Site, ctx: Build) -> Emit:
    def emit(b: Build, x: str) -> str:
        lo = b.const(f"clip_min_{op.min!r}", op.min)
        hi = b.const(f"clip_max_{op.max!r}", op.max)
        return b.one("Clip", [x, lo, hi])

    return emit


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = Clip({{x}}, {op.min!r}, {op.max!r})",))
