"""gru in ONNX: ``GRU`` with ``linear_before_reset=1`` over (T, N, E): the spec's z | r | h is
ONNX's own gate order; its ``W``, ``R`` are the kernels transposed (``rosetta.export.weights``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.export.ops import NAME
from rosetta.export.weights import gru_names
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.GRU, site: Site, ctx: Build) -> Emit:
    # the spec admits only z,r,h + reset_after, zero state, last output: ONNX's GRU with
    # linear_before_reset=1 (n = tanh(x Wh + bh + r * (h Rh + ch))), no initial_h, Y_h
    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported(NAME, op)
    w, r, bias = gru_names(op.name)

    def emit(b: Build, x: str) -> str:
        b.constants.setdefault("axes0", np.array([0], dtype=np.int64))
        seq = b.one("Transpose", [x], perm=[1, 0, 2])  # (N, T, E) -> (T, N, E)
        _, y_h = b.node(
            "GRU", [seq, w, r, bias], n_out=2, hidden_size=op.units, linear_before_reset=1
        )  # Y (T, 1, N, H), Y_h (1, N, H)
        return b.one("Squeeze", [y_h, "axes0"])  # (N, H)

    return emit


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    lines = (
        "{x} = Transpose({x}, perm=[1, 0, 2])  # (N, T, E) -> (T, N, E), ONNX's sequence layout",
        f"_, {{x}} = GRU({{x}}, W={n}.W, R={n}.R, B={n}.B, hidden_size={op.units}, "
        "linear_before_reset=1)  # z|r|h, the reset gate after the recurrent matmul",
        f"{{x}} = Squeeze({{x}}, axes=[0])  # Y_h (1, N, H) -> {fmt_shape(site.out_shape)}",
    )
    w = (
        Weight(f"{n}.kernel", f"{n}.W", "a.T[None]", "a[0].T", note="(E, 3H) -> (1, 3H, E)"),
        Weight(
            f"{n}.recurrent_kernel", f"{n}.R", "a.T[None]", "a[0].T", note="(H, 3H) -> (1, 3H, H)"
        ),
        Weight(f"{n}.bias_input", f"{n}.B", "a", "a", native_part="np.s_[0, :3 * H]"),
        Weight(f"{n}.bias_recurrent", f"{n}.B", "a", "a", native_part="np.s_[0, 3 * H:]"),
    )
    return Snippet(
        forward=lines,
        weights=w,
        notes=("GRU: gate order z | r | h is ONNX's own; reset_after is linear_before_reset=1",),
    )
