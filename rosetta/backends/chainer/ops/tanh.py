"""tanh in Chainer: ``F.tanh``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Tanh, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import F

    return F.tanh


def render(op: ops.Tanh, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.tanh({x})",))
