"""sigmoid in Chainer: ``F.sigmoid`` itself (a function: exact, stable at both tails). No
parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Sigmoid, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import F

    return F.sigmoid


def render(op: ops.Sigmoid, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.sigmoid({x})",))
