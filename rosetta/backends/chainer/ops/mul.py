"""mul in Chainer: the product of its inputs (``lowering.mul``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Mul, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import mul

    return mul


def render(op: ops.Mul, site: Site, ctx: RenderCtx) -> Snippet:
    terms = " * ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = {terms}",))
