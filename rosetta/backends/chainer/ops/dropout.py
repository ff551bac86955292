"""dropout in Chainer: ``lowering.Dropout``, ``F.dropout`` given a mask drawn from the model's
own seeded generator (``ctx.dropout``, the switch every dropout layer reads at call time; rate 0
while ``set_dropout(False)`` switches it off). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Dropout, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import Dropout

    return Dropout(op.rate, ctx.dropout)


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = F.dropout({{x}}, {op.rate})  # off unless config.train",))
