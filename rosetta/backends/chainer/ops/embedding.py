"""embedding in Chainer: ``L.EmbedID`` (id 0 an ordinary row) over time-major ids (T, N).
Weights: ``W`` is the (V, E) table unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Embedding, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import L

    # ids (T, N) int32 -> (T, N, E): time-major, see GRULast
    return ctx.own(op, L.EmbedID(op.vocab, op.dim))


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = L.EmbedID({op.vocab}, {op.dim})",),
        (
            f"{{x}} = self.{n}({{x}})  # ids {fmt_shape(site.in_shape)} -> "
            f"{fmt_shape(site.out_shape)}",
        ),
        (Weight(f"{op.name}.table", f"model.{n}.W"),),
    )


def to_native(op: ops.Embedding, params) -> dict:
    return {"W": params[f"{op.name}.table"]}  # (V, E) both sides


def to_canonical(op: ops.Embedding, read: Read) -> dict:
    return {f"{op.name}.table": read("W")}
