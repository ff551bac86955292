"""relu in PyTorch: ``nn.ReLU``, in place except on a sequence's own input."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.ReLU, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    # in place except on a sequence's input (the caller's batch, or a residual's shared input)
    return nn.ReLU(inplace=not site.at_input)


def render(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.relu({x})",))
