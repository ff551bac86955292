"""layer_norm in PyTorch: ``nn.LayerNorm`` (biased variance, eps in the root)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.LayerNorm, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    layer = nn.LayerNorm(site.in_shape[-1], eps=op.eps)  # biased variance, eps in the root
    ctx.own(op, layer)
    return layer


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.LayerNorm({site.in_shape[-1]}, eps={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.weight"),
            Weight(f"{op.name}.beta", f"model.{n}.bias"),
        ),
    )


def weights(op: ops.LayerNorm, m: nn.Module) -> list[Binding]:
    return [
        Binding(f"{op.name}.gamma", m.weight, True, same, same),
        Binding(f"{op.name}.beta", m.bias, True, same, same),
    ]
