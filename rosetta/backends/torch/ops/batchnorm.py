"""batchnorm in PyTorch: ``nn.BatchNorm2d``/``1d`` kept in ``eval()``; gamma, beta are ``weight,
bias``, mean, var the running buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.BatchNorm, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    cls = nn.BatchNorm2d if len(site.in_shape) == 3 else nn.BatchNorm1d
    layer = cls(site.in_shape[0], eps=op.eps, momentum=op.momentum)  # kept in eval(): model.py
    ctx.own(op, layer)
    return layer


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kind = "BatchNorm2d" if len(site.in_shape) == 3 else "BatchNorm1d"
    roles = (
        ("gamma", "weight"),
        ("beta", "bias"),
        ("mean", "running_mean"),
        ("var", "running_var"),
    )
    return Snippet(
        (f"self.{n} = nn.{kind}({site.in_shape[0]}, eps={op.eps}, momentum={op.momentum})",),
        (f"{{x}} = self.{n}({{x}})",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{t}") for c, t in roles),
    )


def weights(op: ops.BatchNorm, m: nn.Module) -> list[Binding]:
    return [
        Binding(f"{op.name}.gamma", m.weight, True, same, same),
        Binding(f"{op.name}.beta", m.bias, True, same, same),
        Binding(f"{op.name}.mean", m.running_mean, False, same, same),
        Binding(f"{op.name}.var", m.running_var, False, same, same),
    ]
