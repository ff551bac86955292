"""position_embedding in ONNX: one ``Add`` of the table (a ``Slice`` of it where the sequence
is shorter); in the generation graph (``b.decoding``) a ``Gather`` of the rows of positions
S..S+T-1, S the cached positions' count (``graph.steps``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.PositionEmbedding, site: Site, ctx: Build) -> Emit:
    t = site.in_shape[0]

    def emit(b: Build, x: str) -> str:
        from rosetta.export.graph import steps

        table = f"{op.name}.table"  # (P, E); rows 0..T-1 where the sequence is shorter
        if b.decoding:  # (T, E): the rows S..S+T-1 after the S cached positions
            table = b.one("Gather", [table, steps(b, "query")], axis=0)
        elif t < op.max_len:
            start, end = b.const("index0", [0], "int64"), b.const(f"index{t}", [t], "int64")
            table = b.one("Slice", [table, start, end, b.const("axes0", [0], "int64")])
        return b.one("Add", [x, table])  # (N, T, E) + (T, E)

    return emit


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    t = site.in_shape[0]
    table = f"{op.name}.table"
    if t < op.max_len:
        table = f"Slice({table}, starts=[0], ends=[{t}], axes=[0])"
    line = f"{{x}} = Add({{x}}, {table})  # positions 0..{t - 1}, one row each"
    return Snippet(forward=(line,), weights=(Weight(f"{op.name}.table", f"{op.name}.table"),))
