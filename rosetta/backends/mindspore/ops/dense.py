"""dense in MindSpore: ``nn.Dense``, which stores ``(out, in)`` (PyTorch's layout): the canonical IO
kernel transposed, its rows already in the spec's CHW flatten order; the bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same, transpose
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Dense, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import nn

    cell = nn.Dense(site.in_shape[-1], op.units, has_bias=op.bias, dtype=ctx.ms_dtype)
    ctx.own(op, cell)
    return cell


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    bias = "" if op.bias else ", has_bias=False"
    weights = [
        Weight(f"{op.name}.kernel", f"model.{n}.weight", "a.T", "a.T", note="IO -> (out, in)")
    ]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = nn.Dense({site.in_shape[-1]}, {op.units}{bias}, dtype=dtype)",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
        notes=(f"{op.name}.kernel: IO -> Dense.weight (out, in), transposed",),
    )


def weights(op: ops.Dense, m: nn.Cell) -> list[Binding]:
    out = [Binding(f"{op.name}.kernel", m.weight, True, transpose, transpose)]
    if op.bias:
        out.append(Binding(f"{op.name}.bias", m.bias, True, same, same))
    return out
