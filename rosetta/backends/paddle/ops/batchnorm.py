"""batchnorm in Paddle: ``nn.BatchNorm2D``/``1D``, its momentum 1 - the spec's (PyTorch's,
:func:`bn_momentum`), kept in ``eval()`` (``model.py``: the spec's inference-mode statistics,
never updated); ``gamma, beta`` are ``weight, bias``, ``mean, var`` the buffers ``_mean,
_variance``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.paddle.ops import bn_momentum
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.BatchNorm, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    cls = nn.BatchNorm2D if len(site.in_shape) == 3 else nn.BatchNorm1D
    layer = cls(site.in_shape[0], momentum=bn_momentum(op.momentum), epsilon=op.eps)
    ctx.own(op, layer)  # kept in eval() (model.py): the spec's inference-mode statistics
    return layer


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kind = "BatchNorm2D" if len(site.in_shape) == 3 else "BatchNorm1D"
    roles = (("gamma", "weight"), ("beta", "bias"), ("mean", "_mean"), ("var", "_variance"))
    m = bn_momentum(op.momentum)
    return Snippet(
        (f"self.{n} = nn.{kind}({site.in_shape[0]}, momentum={m}, epsilon={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{t}") for c, t in roles),
        notes=(f"{op.name}: Paddle's momentum is 1 - the spec's (PyTorch's) {op.momentum}",),
    )


def weights(op: ops.BatchNorm, m: nn.Layer) -> list[Binding]:
    return [
        Binding(f"{op.name}.gamma", m.weight, True, same, same),
        Binding(f"{op.name}.beta", m.bias, True, same, same),
        Binding(f"{op.name}.mean", m._mean, False, same, same),
        Binding(f"{op.name}.var", m._variance, False, same, same),
    ]
