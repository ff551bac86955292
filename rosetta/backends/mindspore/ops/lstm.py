"""lstm in MindSpore: ``nn.LSTM`` (batch-major, last state: ``LastStepLSTM``); its gate blocks are
the spec's ``i | f | g | o`` (PyTorch's), the kernels stored (4H, E) and (4H, H): transposed. The
spec has one bias: ``b_ih_list[0]``; ``b_hh_list[0]`` is held at zero, no gradient.
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


def build(op: ops.LSTM, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import LastStepLSTM

    cell = LastStepLSTM(site.in_shape[1], op.units, ctx.ms_dtype)
    ctx.own(op, cell.lstm)
    return cell


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    note = "(E, 4H) -> (4H, E), i|f|g|o as stored"
    return Snippet(
        (
            f"self.{n} = nn.LSTM({site.in_shape[1]}, {op.units}, batch_first=True)",
            f"self.{n}.b_hh_list[0].set_data(ops.zeros_like(self.{n}.b_hh_list[0]))  # one bias:",
            f"self.{n}.b_hh_list[0].requires_grad = False  # the second stays 0",
        ),
        (
            f"_, ({{x}}, _) = self.{n}({{x}})  # h: (1, N, {op.units}), the last step's state",
            f"{{x}} = {{x}}[0]  # {fmt_shape(site.out_shape)}",
        ),
        (
            Weight(f"{op.name}.kernel", f"model.{n}.w_ih_list[0]", "a.T", "a.T", note=note),
            Weight(f"{op.name}.recurrent_kernel", f"model.{n}.w_hh_list[0]", "a.T", "a.T",
                   note=note),
            Weight(f"{op.name}.bias", f"model.{n}.b_ih_list[0]"),
        ),  # fmt: skip
        notes=("LSTM: the spec's i | f | g | o is MindSpore's order; one bias (b_hh = 0)",),
    )


def weights(op: ops.LSTM, m: nn.Cell) -> list[Binding]:
    return [
        Binding(f"{op.name}.kernel", m.w_ih_list[0], True, transpose, transpose),
        Binding(f"{op.name}.recurrent_kernel", m.w_hh_list[0], True, transpose, transpose),
        Binding(f"{op.name}.bias", m.b_ih_list[0], True, same, same),
    ]
