"""dropout in ONNX: nothing: the graph is the evaluation form, where dropout is the identity."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Dropout, site: Site, ctx: Build) -> Emit:
    return lambda b, x: x  # the evaluation form: the identity, no node


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(notes=(f"dropout {op.rate}: the identity at evaluation, no node",))
