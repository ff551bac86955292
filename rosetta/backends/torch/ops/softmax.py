"""softmax in PyTorch: ``nn.Softmax(dim=-1)``. NCHW and batch-major sequences are the spec's own
layout behind the batch axis, so the spec's last per-sample axis (an image's W, a sequence's E,
a vector's features) is the tensor's last."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.Softmax, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    return nn.Softmax(dim=-1)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = torch.softmax({x}, dim=-1)",))
