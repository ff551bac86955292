"""lstm in Paddle: ``nn.LSTM`` (batch-major, last state: ``LastStepLSTM``). Paddle's
``weight_ih_l0`` (4H, E) and ``weight_hh_l0`` (4H, H) stack ``i | f | g | o`` along their rows,
the spec's order: the kernels are transposed, nothing reordered. The spec's one bias is
``bias_ih_l0``; ``bias_hh_l0`` is held at zero (a zero gradient: ``lowering.LastStepLSTM``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same, transpose
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.LSTM, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import LastStepLSTM

    layer = LastStepLSTM(site.in_shape[1], op.units)
    ctx.own(op, layer.lstm)
    return layer


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    note = "(E, 4H) -> (4H, E), i|f|g|o as stored"
    return Snippet(
        (
            f"self.{n} = nn.LSTM({site.in_shape[1]}, {op.units})",
            f"self.{n}.bias_hh_l0.set_value(paddle.zeros_like(self.{n}.bias_hh_l0))  # one bias:",
            f"self.{n}.bias_hh_l0.register_hook(paddle.zeros_like)  # the second stays 0",
        ),
        (
            f"_, ({{x}}, _) = self.{n}({{x}})  # h: (1, N, {op.units}), the last step's state",
            f"{{x}} = {{x}}[0]  # {fmt_shape(site.out_shape)}",
        ),
        (
            Weight(f"{op.name}.kernel", f"model.{n}.weight_ih_l0", "a.T", "a.T", note=note),
            Weight(
                f"{op.name}.recurrent_kernel", f"model.{n}.weight_hh_l0", "a.T", "a.T", note=note
            ),
            Weight(f"{op.name}.bias", f"model.{n}.bias_ih_l0"),
        ),  # fmt: skip
        notes=("LSTM: the spec's i | f | g | o is Paddle's order; one bias (bias_hh_l0 = 0)",),
    )


def weights(op: ops.LSTM, m: nn.Layer) -> list[Binding]:
    return [
        Binding(f"{op.name}.kernel", m.weight_ih_l0, True, transpose, transpose),
        Binding(f"{op.name}.recurrent_kernel", m.weight_hh_l0, True, transpose, transpose),
        Binding(f"{op.name}.bias", m.bias_ih_l0, True, same, same),
    ]
