"""add in PyTensor: the sum of its inputs (a variadic layer: their list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Add, site: Site, ctx: Ctx) -> Layer:
    def add(xs, run):
        out = xs[0] + xs[1]
        for x in xs[2:]:
            out = out + x
        return out

    return add


def render(op: ops.Add, site: Site, ctx: RenderCtx) -> Snippet:
    terms = " + ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = {terms}",))
