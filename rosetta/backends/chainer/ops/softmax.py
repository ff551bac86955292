"""softmax in Chainer: ``F.softmax(x, axis=-1)``. Images are NCHW (Chainer's only layout) and a
sequence's features are its last axis whether the model holds it time-major (T, N, E) or
batch-major (N, T, E), so the spec's last per-sample axis is the array's last in every case."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Softmax, site: Site, ctx: Ctx):
    from functools import partial

    from rosetta.backends.chainer.lowering import F

    return partial(F.softmax, axis=-1)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.softmax({x}, axis=-1)",))
