"""add in Chainer: the sum of its inputs (``lowering.add``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Add, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import add

    return add


def render(op: ops.Add, site: Site, ctx: RenderCtx) -> Snippet:
    terms = " + ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = {terms}",))
