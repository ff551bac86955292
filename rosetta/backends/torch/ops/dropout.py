"""dropout in PyTorch: ``GatedDropout``, whose rate is a buffer the step reads (the gate
switches it off inside the timed program).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.Dropout, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import GatedDropout

    return GatedDropout(op.rate)


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = F.dropout({{x}}, {op.rate}, self.training)",))
