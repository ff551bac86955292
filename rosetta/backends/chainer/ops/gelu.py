"""gelu in Chainer: exact GELU composed, ``0.5 x (1 + F.erf(x / sqrt 2))`` (Chainer has no
gelu). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.GELU, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import _gelu

    return _gelu


def render(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = 0.5 * {x} * (1 + F.erf({x} / np.sqrt(2.0)))  # exact GELU",))
