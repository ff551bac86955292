"""gru in PyTorch: ``nn.GRU`` (batch-first, last state). The spec's gate blocks z | r | h along 3H
are PyTorch's r | z | n along its rows: swap the first two blocks, then transpose; the two
biases map one to one (reset_after is PyTorch's ``b_hn`` inside the reset product).
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
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.GRU, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import LastStepGRU

    # the spec admits only z,r,h + reset_after, zero state, last output: exactly nn.GRU's
    # function (its r,z,n order is a weight layout, converted by weights() below)
    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported("torch", op)
    layer = LastStepGRU(site.in_shape[1], op.units)
    ctx.own(op, layer.gru)
    return layer


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kernel = "swap_rz(a, 1).T"  # (E, 3H) z|r|h -> (3H, E) r|z|n
    back = "swap_rz(a.T, 1)"
    note = "z|r|h -> r|z|n, transposed"
    return Snippet(
        (f"self.{n} = nn.GRU({site.in_shape[1]}, {op.units}, batch_first=True)",),
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
                note="z|r|h -> r|z|n",
            ),
            Weight(
                f"{op.name}.bias_recurrent",
                f"model.{n}.bias_hh_l0",
                "swap_rz(a, 0)",
                "swap_rz(a, 0)",
                note="z|r|h -> r|z|n",
            ),
        ),
        helpers=("swap_rz",),
        notes=("GRU gate order: the spec's z | r | h blocks become PyTorch's r | z | n",),
    )


def weights(op: ops.GRU, m: nn.Module) -> list[Binding]:
    k_in, k_out = gru_kernel_rzn_rows, gru_kernel_from_rzn_rows
    return [
        Binding(f"{op.name}.kernel", m.weight_ih_l0, True, k_in, k_out),
        Binding(f"{op.name}.recurrent_kernel", m.weight_hh_l0, True, k_in, k_out),
        Binding(f"{op.name}.bias_input", m.bias_ih_l0, True, gru_bias_rzn, gru_bias_rzn),
        Binding(f"{op.name}.bias_recurrent", m.bias_hh_l0, True, gru_bias_rzn, gru_bias_rzn),
    ]
