"""clip in PyTensor: ``pt.clip`` with bounds in the input's dtype (a float bound would be
cast to ``floatX``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Clip, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    lo, hi = op.min, op.max
    return lambda x, run: pt.clip(x, pt.constant(lo, dtype=x.dtype), pt.constant(hi, dtype=x.dtype))


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    lo, hi = (f"pt.constant({v!r}, dtype={{x}}.dtype)" for v in (op.min, op.max))
    return Snippet(forward=(f"{{x}} = pt.clip({{x}}, {lo}, {hi})",))
