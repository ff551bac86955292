"""tied_dense in Chainer: ``lowering.TiedLinear``, ``F.linear(x, embed.W)`` (``x @ W.T``) with the
tied ``L.EmbedID``'s own ``W`` (V, E), read at each call: ``L.Linear``'s (out, in) layout is the
table's, so the table is the head's weight as it is. The op owns no parameter and converts none:
``W`` is registered once, by the embedding (``ops/embedding.py``), so the optimiser updates it
once, with the gradients of both uses summed in ``W.grad``, and AdamW decays it as the
embedding's ``table`` (where the spec's decay set names ``table``; the decoder's does not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, attr, fmt_shape
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx, TiedLinear


def build(op: ops.TiedDense, site: Site, ctx: Ctx) -> TiedLinear:
    from rosetta.backends.chainer.lowering import TiedLinear

    for owner, link in ctx.owners:
        if isinstance(owner, ops.Embedding) and owner.name == op.tie:
            return TiedLinear(link)
    raise BackendError(f"chainer: tied_dense {op.name} ties {op.tie!r}, built no embedding before")


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    axes = f", n_batch_axes={len(site.in_shape)}" if len(site.in_shape) > 1 else ""
    line = (
        f"{{x}} = F.linear({{x}}, self.{attr(op.tie)}.W{axes})  # tied: x @ the embedding's "
        f"table.T {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
