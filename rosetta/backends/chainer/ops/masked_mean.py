"""masked_mean in Chainer: ``lowering.MaskedMean``, the mean over real tokens (N, T, E) -> (N, E)
(0 for a row of padding only). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.MaskedMean, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import MaskedMean

    return MaskedMean()


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        "{x} = F.sum({x} * (valid / np.maximum(valid.sum(1, keepdims=True), 1))"
        "[:, :, None].astype({x}.dtype), axis=1)  # mean over real tokens"
    )
    return Snippet(forward=(line,))
