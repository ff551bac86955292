"""gru in MindSpore: ``nn.GRU`` (batch-major, last state: ``LastStepGRU``). The spec's gate blocks
are ``z | r | h`` along the 3H axis with the kernels as (E, 3H) and (H, 3H); MindSpore's
``w_ih_list[0]`` (3H, E) and ``w_hh_list[0]`` (3H, H) stack ``r | z | n`` along their rows
(PyTorch's layout; its CPU cell ``_gru_cell`` splits them so): swap the first two H-blocks,
then transpose. The two biases are the spec's reset_after pair (``b_hh``'s new-gate block inside
the reset product), the same block swap.
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
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.GRU, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import LastStepGRU

    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported("mindspore", op)
    cell = LastStepGRU(site.in_shape[1], op.units, ctx.ms_dtype)
    ctx.own(op, cell.gru)
    return cell


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kernel, back, note = "swap_rz(a, 1).T", "swap_rz(a.T, 1)", "z|r|h -> r|z|n, transposed"
    bias = dict(to="swap_rz(a, 0)", back="swap_rz(a, 0)", note="z|r|h -> r|z|n")
    return Snippet(
        (f"self.{n} = nn.GRU({site.in_shape[1]}, {op.units}, batch_first=True, dtype=dtype)",),
        (
            f"_, {{x}} = self.{n}({{x}})  # h: (1, N, {op.units}), the last step's state",
            f"{{x}} = {{x}}[0]  # {fmt_shape(site.out_shape)}",
        ),
        (
            Weight(f"{op.name}.kernel", f"model.{n}.w_ih_list[0]", kernel, back, note=note),
            Weight(f"{op.name}.recurrent_kernel", f"model.{n}.w_hh_list[0]", kernel, back,
                   note=note),
            Weight(f"{op.name}.bias_input", f"model.{n}.b_ih_list[0]", bias["to"], bias["back"],
                   note=bias["note"]),
            Weight(f"{op.name}.bias_recurrent", f"model.{n}.b_hh_list[0]", bias["to"],
                   bias["back"], note=bias["note"]),
        ),  # fmt: skip
        helpers=("swap_rz",),
        notes=("GRU gate order: the spec's z | r | h blocks become MindSpore's r | z | n",),
    )


def weights(op: ops.GRU, m: nn.Cell) -> list[Binding]:
    k_in, k_out = gru_kernel_rzn_rows, gru_kernel_from_rzn_rows
    return [
        Binding(f"{op.name}.kernel", m.w_ih_list[0], True, k_in, k_out),
        Binding(f"{op.name}.recurrent_kernel", m.w_hh_list[0], True, k_in, k_out),
        Binding(f"{op.name}.bias_input", m.b_ih_list[0], True, gru_bias_rzn, gru_bias_rzn),
        Binding(f"{op.name}.bias_recurrent", m.b_hh_list[0], True, gru_bias_rzn, gru_bias_rzn),
    ]
