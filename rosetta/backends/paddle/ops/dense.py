"""dense in Paddle: ``nn.Linear``, which stores ``(in, out)`` and computes ``x @ W + b``: the
canonical IO kernel is ``Linear.weight`` itself (PyTorch stores the transpose), its rows in the
spec's CHW flatten order, Paddle's NCHW order (no permutation); the bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Dense, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    layer = nn.Linear(site.in_shape[-1], op.units, bias_attr=None if op.bias else False)
    ctx.own(op, layer)
    return layer


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    bias = "" if op.bias else ", bias_attr=False"
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="(in, out), as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = nn.Linear({site.in_shape[-1]}, {op.units}{bias})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
    )


def weights(op: ops.Dense, m: nn.Layer) -> list[Binding]:
    out = [Binding(f"{op.name}.kernel", m.weight, True, same, same)]
    if op.bias:
        out.append(Binding(f"{op.name}.bias", m.bias, True, same, same))
    return out
