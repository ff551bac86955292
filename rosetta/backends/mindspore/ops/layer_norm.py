"""layer_norm in MindSpore: ``nn.LayerNorm`` over the last axis (``lowering.LayerNorm``: in float64
written out, its kernel's epsilon being a float32 attribute); ``gamma, beta`` as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.LayerNorm, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import LayerNorm

    cell = LayerNorm(site.in_shape[-1], op.eps, ctx.ms_dtype)  # biased variance, eps in the root
    ctx.own(op, cell)
    return cell


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.LayerNorm(({site.in_shape[-1]},), epsilon={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.gamma"),
            Weight(f"{op.name}.beta", f"model.{n}.beta"),
        ),
    )


def weights(op: ops.LayerNorm, m: nn.Cell) -> list[Binding]:
    return [
        Binding(f"{op.name}.gamma", m.gamma, True, same, same),
        Binding(f"{op.name}.beta", m.beta, True, same, same),
    ]
