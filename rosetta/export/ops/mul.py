"""mul in ONNX: ``Mul`` of two inputs, a chain of ``Mul`` for more (ONNX has no variadic
product), left to right as the reference multiplies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Variadic


def build(op: ops.Mul, site: Site, ctx: Build) -> Variadic:
    def emit(b: Build, xs: list[str]) -> str:
        out = b.one("Mul", [xs[0], xs[1]])
        for x in xs[2:]:
            out = b.one("Mul", [out, x])
        return out

    return emit


def render(op: ops.Mul, site: Site, ctx: RenderCtx) -> Snippet:
    terms = "{x0}"
    for i in range(1, len(site.in_shapes)):
        terms = f"Mul({terms}, {{x{i}}})"
    return Snippet(forward=(f"{{x}} = {terms}  # {fmt_shape(site.out_shape)}",))
