"""concat in PyTorch: ``torch.cat`` along the spec's axis + 1 (NCHW is the spec's own layout,
behind the batch axis)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.Concat, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import Concat

    return Concat(op.axis + 1)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = torch.cat([{parts}], dim={op.axis + 1})",))
