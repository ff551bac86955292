"""dense in ONNX: ``Gemm`` on (N, in); on (N, T, E) ``MatMul`` then ``Add`` (Gemm is 2-D
only); the kernel IO as stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Dense, site: Site, ctx: Build) -> Emit:
    kernel, bias = f"{op.name}.kernel", f"{op.name}.bias"
    if len(site.in_shape) == 2:  # (N, T, E): Gemm is 2-D only; MatMul broadcasts the kernel

        def emit(b: Build, x: str) -> str:
            y = b.one("MatMul", [x, kernel])
            return b.one("Add", [y, bias]) if op.bias else y

        return emit
    inputs = [kernel, *([bias] if op.bias else [])]
    return lambda b, x: b.one("Gemm", [x, *inputs])  # x (N, in) @ kernel (in, out) + bias


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f", {op.name}.bias" if op.bias else ""
    w = [Weight(f"{op.name}.kernel", f"{op.name}.kernel", note="IO, as stored (transB=0)")]
    if op.bias:
        w.append(Weight(f"{op.name}.bias", f"{op.name}.bias"))
    if len(site.in_shape) == 2:  # (N, T, E): Gemm is 2-D only, so MatMul (batched) then Add
        line = f"{{x}} = MatMul({{x}}, {op.name}.kernel)  # {fmt_shape(site.out_shape)}"
        add = (f"{{x}} = Add({{x}}, {op.name}.bias)",) if op.bias else ()
        return Snippet(forward=(line, *add), weights=tuple(w))
    line = f"{{x}} = Gemm({{x}}, {op.name}.kernel{bias})  # {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,), weights=tuple(w))
