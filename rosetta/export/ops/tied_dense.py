"""tied_dense in ONNX: the embedding's own table initializer ``<tie>.table`` (V, E), read a
second time (the file holds it once): ``Gemm(x, table, transB=1)`` on (N, E); on (N, T, E)
``MatMul`` against a ``Transpose`` node of it (Gemm is 2-D only), which the engines fold into a
constant when they load the graph. No bias, no parameter of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.TiedDense, site: Site, ctx: Build) -> Emit:
    table = f"{op.tie}.table"  # (V, E): the embedding's initializer, the same tensor
    if len(site.in_shape) == 2:  # (N, T, E): MatMul broadcasts the (E, V) kernel

        def emit(b: Build, x: str) -> str:
            return b.one("MatMul", [x, b.one("Transpose", [table], perm=[1, 0])])  # (N, T, V)

        return emit
    return lambda b, x: b.one("Gemm", [x, table], transB=1)  # x (N, E) @ table^T (E, V)


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    table = f"{op.tie}.table"
    if len(site.in_shape) == 2:  # (N, T, E): Gemm is 2-D only
        y = f"MatMul({{x}}, Transpose({table}, perm=[1, 0]))"
    else:
        y = f"Gemm({{x}}, {table}, transB=1)"
    line = f"{{x}} = {y}  # {fmt_shape(site.out_shape)}: tied, the embedding's table read again"
    return Snippet(forward=(line,))
