"""embedding in MindSpore: a ``(V, E)`` table and ``ops.gather`` (``lowering.Embedding``:
``nn.Embedding`` makes its table float32 whatever its dtype); id 0 an ordinary row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Embedding, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import Embedding

    cell = Embedding(op.vocab, op.dim, ctx.ms_dtype)  # (N, T) -> (N, T, E)
    ctx.own(op, cell)
    return cell


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = ms.Parameter(ops.zeros(({op.vocab}, {op.dim}), dtype), name=\"{n}\")",),
        (
            f"{{x}} = ops.gather(self.{n}, {{x}}, 0)  # ids {fmt_shape(site.in_shape)} -> "
            f"{fmt_shape(site.out_shape)}",
        ),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def weights(op: ops.Embedding, m: nn.Cell) -> list[Binding]:
    return [Binding(f"{op.name}.table", m.embedding_table, True, same, same)]
