"""mul in MindSpore: the elementwise product of its inputs (``lowering.Product``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Mul, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import Product

    return Product()


def render(op: ops.Mul, site: Site, ctx: RenderCtx) -> Snippet:
    terms = " * ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = {terms}",))
