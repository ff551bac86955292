"""clip in MindSpore: ``ops.clamp`` with bounds of the input's dtype (``lowering.Clip``; the CPU
``ReLU6`` kernel has no float64)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Clip, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import Clip

    return Clip(op.min, op.max, ctx.ms_dtype)


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    lo, hi = (f"ms.Tensor({v!r}, {{x}}.dtype)" for v in (op.min, op.max))
    return Snippet(forward=(f"{{x}} = ops.clamp({{x}}, {lo}, {hi})",))
