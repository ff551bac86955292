"""layer_norm in Paddle: ``LayerNorm`` (``lowering.py``), ``nn.LayerNorm`` over the last axis
(biased variance, eps in the root), written out in float64 (Paddle's kernel holds epsilon as a
float32 attribute); ``gamma, beta`` are its ``weight, bias``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


#: nn.LayerNorm's kernel holds epsilon as a float32 attribute (Paddle 3.3.1): the float64 file
#: writes the normalisation out (``lowering.LayerNorm`` says what it measured)
LAYER_NORM = '''
class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm; in float64 written out, because Paddle's layer_norm kernel holds epsilon as
    a float32 attribute (1e-5 would become 9.99999975e-06)."""

    def forward(self, x):
        if x.dtype != paddle.float64:
            return super().forward(x)
        xc = x - x.mean(axis=-1, keepdim=True)
        var = (xc * xc).mean(axis=-1, keepdim=True)
        eps = paddle.full([], self._epsilon, x.dtype)
        return xc / paddle.sqrt(var + eps) * self.weight + self.bias
'''
HELPERS = {"LayerNorm": LAYER_NORM}


def build(op: ops.LayerNorm, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import LayerNorm

    layer = LayerNorm(site.in_shape[-1], op.eps)  # biased variance, eps in the root
    ctx.own(op, layer)
    return layer


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = LayerNorm({site.in_shape[-1]}, epsilon={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.weight"),
            Weight(f"{op.name}.beta", f"model.{n}.bias"),
        ),
        helpers=("LayerNorm",),
    )


def weights(op: ops.LayerNorm, m: nn.Layer) -> list[Binding]:
    return [
        Binding(f"{op.name}.gamma", m.weight, True, same, same),
        Binding(f"{op.name}.beta", m.bias, True, same, same),
    ]
