"""hardswish in PyTensor: ``x * clip(x + 3, 0, 6) / 6`` (PyTensor has no hard-swish)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.HardSwish, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    return lambda x, run: x * pt.clip(x + 3, 0, 6) / 6


def render(op: ops.HardSwish, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = {x} * pt.clip({x} + 3, 0, 6) / 6  # hard-swish",))
