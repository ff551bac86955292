"""clip in PyTorch: ``nn.ReLU6`` for [0, 6], else ``nn.Hardtanh(min, max)`` (both clamp; the
gradient on the closed interval, as the spec's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.Clip, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    if (op.min, op.max) == (0.0, 6.0):
        return nn.ReLU6()
    return nn.Hardtanh(op.min, op.max)


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    if (op.min, op.max) == (0.0, 6.0):
        return Snippet(forward=("{x} = F.relu6({x})",))
    return Snippet(forward=(f"{{x}} = torch.clamp({{x}}, {op.min!r}, {op.max!r})",))
