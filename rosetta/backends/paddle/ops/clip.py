"""clip in Paddle: ``nn.ReLU6`` for [0, 6], else ``paddle.clip`` with bounds in the input's dtype
(``lowering.Clip``: ``nn.Hardtanh`` rounds its bounds to float32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Clip, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import Clip, nn

    if (op.min, op.max) == (0.0, 6.0):
        return nn.ReLU6()
    return Clip(op.min, op.max)


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    if (op.min, op.max) == (0.0, 6.0):
        return Snippet(forward=("{x} = F.relu6({x})",))
    lo, hi = (f"paddle.full([], {v!r}, dtype={{x}}.dtype)" for v in (op.min, op.max))
    return Snippet(forward=(f"{{x}} = paddle.clip({{x}}, {lo}, {hi})",))
