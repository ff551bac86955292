"""layer_norm in ONNX: opset 17's ``LayerNormalization`` in float32; written out in float64
(see build).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit

#: LayerNormalization is new in opset 17: the export refuses this op below it
MIN_OPSET = 17


def build(op: ops.LayerNorm, site: Site, ctx: Build) -> Emit:
    # opset 17's LayerNormalization: biased variance, epsilon inside the root (the spec's rule).
    # Its epsilon is a float attribute, float32 in the protobuf: exact for a float32 graph (the
    # reference's float32 eps is the same float32), but 1e-5 -> 9.99999974737875e-06 moves a
    # float64 graph's output by 2e-10 relative, twice float64's bound (measured on the gate's
    # batch). The float64 graph therefore writes the same formula out, eps a float64 constant.
    gamma, beta = f"{op.name}.gamma", f"{op.name}.beta"
    if ctx.dtype == "float32":
        return lambda b, x: b.one("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=op.eps)
    e = site.in_shape[-1]

    def emit(b: Build, x: str) -> str:
        last, width = b.const("axes_last", [-1], "int64"), b.const(f"width{e}", e)

        def mean(t: str) -> str:
            return b.one("Div", [b.one("ReduceSum", [t, last], keepdims=1), width])

        xc = b.one("Sub", [x, mean(x)])
        var = mean(b.one("Mul", [xc, xc]))  # divided by E: the biased variance
        std = b.one("Sqrt", [b.one("Add", [var, b.const(f"eps{op.eps!r}", op.eps)])])
        xhat = b.one("Mul", [xc, b.one("Div", [b.const("one", 1), std])])
        return b.one("Add", [b.one("Mul", [xhat, gamma]), beta])

    return emit


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    line = (
        f"{{x}} = LayerNormalization({{x}}, {n}.gamma, {n}.beta, axis=-1, epsilon={op.eps})"
        "  # biased variance, eps inside the root (opset 17)"
    )
    return Snippet(
        forward=(line,),
        weights=(Weight(f"{n}.gamma", f"{n}.gamma"), Weight(f"{n}.beta", f"{n}.beta")),
    )
