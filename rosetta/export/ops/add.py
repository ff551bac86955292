"""add in ONNX: ``Add`` of two inputs (the node a residual block joins with); three or more are
one ``Sum`` node (variadic, unchanged from opset 13). A variadic emitter: ``emit(b, xs)`` reads
the list of its inputs' tensor names (``graph.graph`` hands it them).

Why ``Sum`` rather than a chain of ``Add``: the spec's one op stays one node (the summary's node
counts read as the spec), and both engines add its inputs left to right, ``(x0 + x1) + x2``, the
reference's order (checked: ``Sum`` of four float32 arrays bit-equal to the chained ``Add`` and
to NumPy's, in ONNX Runtime and OpenVINO); two inputs stay ``Add``, the node a residual block
writes and the engines' fusions (ONNX Runtime's Conv+Add+Relu) recognise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Variadic


def _node(n: int) -> str:
    return "Add" if n == 2 else "Sum"


def build(op: ops.Add, site: Site, ctx: Build) -> Variadic:
    node = _node(len(site.in_shapes))
    return lambda b, xs: b.one(node, list(xs))


def render(op: ops.Add, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    line = f"{{x}} = {_node(len(site.in_shapes))}({args})  # {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,))
