"""embedding in Chainer: ``L.EmbedID`` (id 0 an ordinary row) over time-major ids (T, N), or
batch-major (N, T) in a model holding a masked op or an attention (``lowering.sequence``).
Weights: ``W`` is the (V, E) table unchanged (a ``tied_dense`` head reads this same ``W``);
AdamW may decay it (``decay_paths``: where the spec's decay set names ``table``).
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


def decay_paths(op: ops.Embedding) -> dict[str, str]:
    """The link attribute of each canonical parameter AdamW may decay (the table, once, however
    many layers read it)."""
    return {f"{op.name}.table": "W"}
