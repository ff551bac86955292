"""flatten in Chainer: ``F.reshape`` to (N, C*H*W); NCHW (Chainer's only layout) is already the
spec's channel-major CHW order, the one order lowered. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Flatten, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import _flatten_chw

    if op.order != "CHW":
        raise unsupported("chainer", op)
    return _flatten_chw  # NCHW reshape: already the spec's channel-major order


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = F.reshape({{x}}, ({{x}}.shape[0], -1))  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))
