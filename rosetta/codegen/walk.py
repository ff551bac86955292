"""The one render driver: walks a spec graph and asks a backend's ``RENDER`` table for each op.

It mirrors :func:`rosetta.backends.driver.lower` line for line (the same shape threading, the
same ``Site`` per op, residual branches opened the same way), so the source a table renders is
laid out exactly as the model its lowering builds. Besides the composed snippet of the whole
graph it keeps each op's own snippet, in graph order, for the report's Rosetta page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rosetta.backends.driver import Site
from rosetta.codegen.snippet import RenderCtx, RenderTable, Snippet
from rosetta.spec import ops
from rosetta.spec.ops import Shape


@dataclass(frozen=True)
class OpSource:
    """One op of the graph and its rendering: the rows of the Rosetta page."""

    path: str  # e.g. "3" or "4.body.2"
    op: object
    site: Site
    snippet: Snippet


@dataclass(frozen=True)
class Rendered:
    """A graph rendered by one table: the composed snippet and each op's own."""

    model: Snippet
    ops: tuple[OpSource, ...]
    out_shape: Shape


def check_renderable(table: RenderTable, nodes: Sequence[object]) -> None:
    """Raise the one-line error for the first op of ``nodes`` the table cannot render."""
    for node in nodes:
        if isinstance(node, ops.Residual):
            check_renderable(table, node.body)
            check_renderable(table, node.shortcut)
        else:
            table.entry(node)


def render(
    table: RenderTable,
    nodes: Sequence[object],
    in_shape: Shape,
    ctx: RenderCtx | None = None,
    *,
    at_input: bool = True,
    path: str = "",
) -> Rendered:
    """Render ``nodes`` (a graph or a branch) to one snippet through ``table``."""
    ctx = ctx if ctx is not None else RenderCtx()
    check_renderable(table, nodes)
    parts: list[Snippet] = []
    rows: list[OpSource] = []
    shape = in_shape
    for i, node in enumerate(nodes):
        here = f"{path}.{i}" if path else str(i)
        out = node.out_shape(shape)
        site = Site(shape, out, at_input and i == 0, here)
        if isinstance(node, ops.Residual):
            ctx.depth += 1
            body = render(table, node.body, shape, ctx, path=f"{here}.body")
            shortcut = render(table, node.shortcut, shape, ctx, path=f"{here}.shortcut")
            ctx.depth -= 1
            parts.append(table.residual(body.model, shortcut.model, site, ctx))
            rows.extend(body.ops + shortcut.ops)
        else:
            snippet = table.entry(node)(node, site, ctx)
            parts.append(snippet)
            rows.append(OpSource(here, node, site, snippet))
        shape = out
    model = table.sequence(parts, Site(in_shape, shape, at_input, path), ctx)
    return Rendered(model, tuple(rows), shape)
