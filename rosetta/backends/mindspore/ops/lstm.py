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


LSTM_CELL = '''
class LastStepLSTM(nn.Cell):
    """nn.LSTM over (N, T, E) from zero state and cell, its last state; the second bias b_hh
    held at 0 (the spec has one). MindSpore's fused CPU LSTM kernel computes in float32 whatever
    the dtype, so in float64 the same cell is written out as a loop over time."""

    def __init__(self, input_size, hidden_size, dtype):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True, dtype=dtype)
        b_hh = self.lstm.b_hh_list[0]
        b_hh.set_data(ops.zeros(b_hh.shape, b_hh.dtype))
        b_hh.requires_grad = False
        self.hidden = hidden_size

    def construct(self, x):
        if x.dtype != ms.float64:
            _, (h, _) = self.lstm(x)  # (1, N, H)
            return h[0]
        w_ih, w_hh, b_ih = self.lstm.w_ih_list[0], self.lstm.w_hh_list[0], self.lstm.b_ih_list[0]
        h = ops.zeros((x.shape[0], self.hidden), x.dtype)
        c = ops.zeros((x.shape[0], self.hidden), x.dtype)
        xw = ops.matmul(x, w_ih.T) + b_ih  # (N, T, 4H)
        for t in range(x.shape[1]):
            i, f, g, o = ops.split(xw[:, t] + ops.matmul(h, w_hh.T), self.hidden, axis=1)
            c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
            h = ops.sigmoid(o) * ops.tanh(c)
        return h
'''
HELPERS = {"LastStepLSTM": LSTM_CELL}


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    note = "(E, 4H) -> (4H, E), i|f|g|o as stored"
    w = f"model.{n}.lstm"
    return Snippet(
        (f"self.{n} = LastStepLSTM({site.in_shape[1]}, {op.units}, dtype)",),
        (f"{{x}} = self.{n}({{x}})  # the last step's state: {fmt_shape(site.out_shape)}",),
        (
            Weight(f"{op.name}.kernel", f"{w}.w_ih_list[0]", "a.T", "a.T", note=note),
            Weight(f"{op.name}.recurrent_kernel", f"{w}.w_hh_list[0]", "a.T", "a.T", note=note),
            Weight(f"{op.name}.bias", f"{w}.b_ih_list[0]"),
        ),
        helpers=("LastStepLSTM",),
        notes=("LSTM: the spec's i | f | g | o is MindSpore's order; one bias (b_hh = 0)",),
    )


def weights(op: ops.LSTM, m: nn.Cell) -> list[Binding]:
    return [
        Binding(f"{op.name}.kernel", m.w_ih_list[0], True, transpose, transpose),
        Binding(f"{op.name}.recurrent_kernel", m.w_hh_list[0], True, transpose, transpose),
        Binding(f"{op.name}.bias", m.b_ih_list[0], True, same, same),
    ]
