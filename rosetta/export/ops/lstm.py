"""lstm in ONNX: ``LSTM`` over (T, N, E), its final state ``Y_h``: ONNX's gate order is
i | o | f | c where the spec's is i | f | g | o, so the blocks move (``rosetta.export.weights``);
the spec's one bias is ONNX's input bias ``Wb``, its recurrent ``Rb`` zeros.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.export.weights import gru_names
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.LSTM, site: Site, ctx: Build) -> Emit:
    w, r, bias = gru_names(op.name)

    def emit(b: Build, x: str) -> str:
        b.constants.setdefault("axes0", np.array([0], dtype=np.int64))
        seq = b.one("Transpose", [x], perm=[1, 0, 2])  # (N, T, E) -> (T, N, E)
        _, y_h, _ = b.node("LSTM", [seq, w, r, bias], n_out=3, hidden_size=op.units)
        return b.one("Squeeze", [y_h, "axes0"])  # Y_h (1, N, H) -> (N, H)

    return emit


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    lines = (
        "{x} = Transpose({x}, perm=[1, 0, 2])  # (N, T, E) -> (T, N, E), ONNX's sequence layout",
        f"_, {{x}}, _ = LSTM({{x}}, W={n}.W, R={n}.R, B={n}.B, hidden_size={op.units})"
        "  # gates i|o|f|c",
        f"{{x}} = Squeeze({{x}}, axes=[0])  # Y_h (1, N, H) -> {fmt_shape(site.out_shape)}",
    )
    iofc = "to_iofc(a)"
    w = (
        Weight(f"{n}.kernel", f"{n}.W", f"{iofc}.T[None]", "to_ifgo(a[0].T)",
               note="(E, 4H) i|f|g|o -> (1, 4H, E) i|o|f|c"),
        Weight(f"{n}.recurrent_kernel", f"{n}.R", f"{iofc}.T[None]", "to_ifgo(a[0].T)",
               note="(H, 4H) -> (1, 4H, H), i|o|f|c"),
        Weight(f"{n}.bias", f"{n}.B", iofc, "to_ifgo(a)", native_part="np.s_[0, :4 * H]",
               note="Wb; Rb = B[0, 4H:] stays 0"),
    )  # fmt: skip
    return Snippet(
        forward=lines,
        weights=w,
        notes=("LSTM: the spec's i | f | g | o blocks are ONNX's i | o | f | c; one bias (Wb)",),
    )
