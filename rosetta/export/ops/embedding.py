"""embedding in ONNX: ``Gather`` of the table's rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Embedding, site: Site, ctx: Build) -> Emit:
    return lambda b, x: b.one("Gather", [f"{op.name}.table", x], axis=0)  # (N, T) -> (N, T, E)


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = Gather({op.name}.table, {{x}})  # ids -> {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,), weights=(Weight(f"{op.name}.table", f"{op.name}.table"),))
