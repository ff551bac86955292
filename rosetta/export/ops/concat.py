"""concat in ONNX: one ``Concat`` node. The graph is channels-first with the batch leading, as
the spec's canonical layout, so the spec's per-sample ``axis`` is ONNX's ``axis + 1``. A
variadic emitter: ``emit(b, xs)`` reads the list of its inputs' tensor names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Variadic


def build(op: ops.Concat, site: Site, ctx: Build) -> Variadic:
    return lambda b, xs: b.one("Concat", list(xs), axis=op.axis + 1)  # + 1: the batch leads


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    line = f"{{x}} = Concat({args}, axis={op.axis + 1})  # {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,))
