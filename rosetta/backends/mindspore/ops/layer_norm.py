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


LAYER_NORM = '''
class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm over the last axis; in float64 written out (its kernel takes epsilon as a
    float32 attribute), eps a tensor of the model's dtype."""

    def __init__(self, dim, eps, dtype):
        super().__init__((dim,), epsilon=eps, dtype=dtype)
        self.eps = ms.Tensor(eps, dtype)

    def construct(self, x):
        if x.dtype != ms.float64:
            return super().construct(x)
        xc = x - x.mean(axis=-1, keep_dims=True)
        rstd = 1 / ops.sqrt((xc * xc).mean(axis=-1, keep_dims=True) + self.eps)
        return xc * rstd * self.gamma + self.beta
'''
HELPERS = {"LayerNorm": LAYER_NORM}


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = LayerNorm({site.in_shape[-1]}, {op.eps}, dtype)",),
        (f"{{x}} = self.{n}({{x}})",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.gamma"),
            Weight(f"{op.name}.beta", f"model.{n}.beta"),
        ),
        helpers=("LayerNorm",),
    )


def weights(op: ops.LayerNorm, m: nn.Cell) -> list[Binding]:
    return [
        Binding(f"{op.name}.gamma", m.gamma, True, same, same),
        Binding(f"{op.name}.beta", m.beta, True, same, same),
    ]
