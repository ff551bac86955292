"""clip in Chainer: ``F.relu6`` for [0, 6], else ``F.clip``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Clip, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import F

    if (op.min, op.max) == (0.0, 6.0):
        return F.relu6
    lo, hi = op.min, op.max
    return lambda x: F.clip(x, lo, hi)


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    if (op.min, op.max) == (0.0, 6.0):
        return Snippet(forward=("{x} = F.relu6({x})",))
    return Snippet(forward=(f"{{x}} = F.clip({{x}}, {op.min!r}, {op.max!r})",))
