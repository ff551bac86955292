"""tied_dense in PyTorch: ``TiedLinear``, whose weight is the tied ``nn.Embedding``'s own
``weight`` Parameter (nanoGPT's tie); the op binds nothing: the table is the embedding's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, attr, fmt_shape
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.TiedDense, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import TiedLinear

    for owner, module in ctx.owners:
        if isinstance(owner, ops.Embedding) and owner.name == op.tie:
            return TiedLinear(module)
    raise BackendError(f"torch: tied_dense {op.name} ties {op.tie!r}, built no embedding before")


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    n, tie = attr(op.name), attr(op.tie)
    return Snippet(
        (
            f"self.{n} = nn.Linear({site.in_shape[-1]}, {op.units}, bias=False)",
            f"self.{n}.weight = self.{tie}.weight  # tied: one Parameter, the embedding's table",
        ),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        (),
    )


def weights(op: ops.TiedDense, m: nn.Module) -> list[Binding]:
    return []  # the table is bound once, by the embedding
