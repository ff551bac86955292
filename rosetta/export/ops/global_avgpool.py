"""global_avgpool in ONNX: ``GlobalAveragePool`` then ``Flatten``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.GlobalAvgPool, site: Site, ctx: Build) -> Emit:
    def emit(b: Build, x: str) -> str:
        pooled = b.one("GlobalAveragePool", [x])  # (N, C, 1, 1)
        return b.one("Flatten", [pooled], axis=1)  # (N, C)

    return emit


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(
        forward=(
            f"{{x}} = Flatten(GlobalAveragePool({{x}}), axis=1)  # {fmt_shape(site.out_shape)}",
        )
    )
