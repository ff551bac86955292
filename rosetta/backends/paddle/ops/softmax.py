"""softmax in Paddle: ``nn.Softmax(axis=-1)``. Activations are NCHW and sequences batch-major,
the spec's layout behind the batch axis, so the spec's last per-sample axis (an image's W, a
sequence's E, a vector's features) is the tensor's last."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Softmax, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    return nn.Softmax(axis=-1)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.softmax({x}, axis=-1)",))
