"""tanh in PyTensor: ``pt.tanh``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Tanh, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    return lambda x, run: pt.tanh(x)


def render(op: ops.Tanh, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = pt.tanh({x})",))
