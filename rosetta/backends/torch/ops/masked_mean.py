"""masked_mean in PyTorch: the mean over real tokens (0 for a row of padding only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.MaskedMean, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import MaskedMean

    return MaskedMean()


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    return Snippet(
        forward=(
            "{x} = (({x} * valid[..., None]).sum(1) / valid.sum(1, keepdim=True).clamp(min=1))"
            f"  # mean over real tokens: {fmt_shape(site.out_shape)}",
        )
    )
