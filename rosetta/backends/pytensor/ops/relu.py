"""relu in PyTensor: ``switch(x > 0, x, 0)`` (gradient 0 at 0, the spec's; ``maximum``'s would be
1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.ReLU, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    return lambda x, run: pt.switch(x > 0, x, ctx.const(0.0))


def render(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = pt.switch({x} > 0, {x}, 0.0)  # gradient 0 at 0",))
