"""gru in Paddle: ``nn.GRU`` (batch-major, last state: ``LastStepGRU``). The spec's gate blocks are
``z | r | h`` along the 3H axis with the kernels as (E, 3H) and (H, 3H); Paddle's
``weight_ih_l0`` (3H, E) and ``weight_hh_l0`` (3H, H) stack ``r | z | c`` along their rows
(PyTorch's layout). So: swap the first two H-blocks, then transpose. The biases: the spec keeps
the input and recurrent biases apart (reset_after: ``h~ = tanh(W_h x + b_h + r * (U_h h +
c_h))``), which is Paddle's ``bias_ih_l0`` / ``bias_hh_l0`` split with ``b_hc`` inside the reset
product (``GRUCell``'s docstring, and its fused CPU ``rnn`` kernel: checked against the
reference by the conformance suite); the same block swap, no transpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import (
    Binding,
    gru_bias_rzn,
    gru_kernel_from_rzn_rows,
    gru_kernel_rzn_rows,
)
from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.GRU, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import LastStepGRU

    # the spec admits only z,r,h + reset_after, zero state, last output: exactly nn.GRU's
    # function (r_t applied to W_hc h + b_hc, h = z h_prev + (1 - z) c); its r,z,c order is a
    # weight layout, converted by weights() below
    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported("paddle", op)
    layer = LastStepGRU(site.in_shape[1], op.units)
    ctx.own(op, layer.gru)
    return layer


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kernel = "swap_rz(a, 1).T"  # (E, 3H) z|r|h -> (3H, E) r|z|c
    back = "swap_rz(a.T, 1)"
    note = "z|r|h -> r|z|c, transposed"
    return Snippet(
        (f"self.{n} = nn.GRU({site.in_shape[1]}, {op.units})",),
        (
            f"_, {{x}} = self.{n}({{x}})  # h: (1, N, {op.units}), the last step's state",
            f"{{x}} = {{x}}[0]  # {fmt_shape(site.out_shape)}",
        ),
        (
            Weight(f"{op.name}.kernel", f"model.{n}.weight_ih_l0", kernel, back, note=note),
            Weight(
                f"{op.name}.recurrent_kernel", f"model.{n}.weight_hh_l0", kernel, back, note=note
            ),
            Weight(
                f"{op.name}.bias_input",
                f"model.{n}.bias_ih_l0",
                "swap_rz(a, 0)",
                "swap_rz(a, 0)",
                note="z|r|h -> r|z|c",
            ),
            Weight(
                f"{op.name}.bias_recurrent",
                f"model.{n}.bias_hh_l0",
                "swap_rz(a, 0)",
                "swap_rz(a, 0)",
                note="z|r|h -> r|z|c",
            ),
        ),
        helpers=("swap_rz",),
        notes=("GRU gate order: the spec's z | r | h blocks become Paddle's r | z | c",),
    )


def weights(op: ops.GRU, m: nn.Layer) -> list[Binding]:
    k_in, k_out = gru_kernel_rzn_rows, gru_kernel_from_rzn_rows
    return [
        Binding(f"{op.name}.kernel", m.weight_ih_l0, True, k_in, k_out),
        Binding(f"{op.name}.recurrent_kernel", m.weight_hh_l0, True, k_in, k_out),
        Binding(f"{op.name}.bias_input", m.bias_ih_l0, True, gru_bias_rzn, gru_bias_rzn),
        Binding(f"{op.name}.bias_recurrent", m.bias_hh_l0, True, gru_bias_rzn, gru_bias_rzn),
    ]
