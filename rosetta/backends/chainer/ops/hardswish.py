"""hardswish in Chainer: ``x * F.clip(x + 3, 0, 6) / 6`` (Chainer has no hard-swish)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.HardSwish, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import hard_swish

    return hard_swish


def render(op: ops.HardSwish, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = {x} * F.clip({x} + 3, 0.0, 6.0) / 6  # hard-swish",))
