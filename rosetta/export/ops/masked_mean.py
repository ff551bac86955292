"""masked_mean in ONNX: one ``MatMul`` by the per-position weights ``valid / max(count, 1)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.export.ops import mask_lines
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.MaskedMean, site: Site, ctx: Build) -> Emit:
    from rosetta.export.graph import mask

    def emit(b: Build, x: str) -> str:
        count = b.one("Max", [mask(b, "count"), b.const("one", 1)])  # (N, 1), at least 1
        weight = b.one("Div", [mask(b, "weights"), count])  # (N, T): 1/count or 0
        weight = b.one("Unsqueeze", [weight, b.const("axes1", [1], "int64")])  # (N, 1, T)
        pooled = b.one("MatMul", [weight, x])  # (N, 1, E)
        return b.one("Squeeze", [pooled, b.const("axes1", [1], "int64")])  # (N, E)

    return emit


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    lines = (
        *mask_lines(ctx, "count"),
        "weight = Unsqueeze(Div(Cast(valid, float), Max(count, 1)), [1])  # (N, 1, T)",
        f"{{x}} = Squeeze(MatMul(weight, {{x}}), [1])  # {fmt_shape(site.out_shape)}; "
        "padding only: 0, never 0/0",
    )
    return Snippet(forward=lines)
