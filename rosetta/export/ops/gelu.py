"""gelu in ONNX: exact GELU from ``Erf`` (opset 17 has no ``Gelu``), in the reference's order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.GELU, site: Site, ctx: Build) -> Emit:
    def emit(b: Build, x: str) -> str:  # 0.5 x (1 + erf(x / sqrt 2)), the reference's order
        half = b.one("Mul", [x, b.const("half", 0.5)])
        erf = b.one("Erf", [b.one("Div", [x, b.const("sqrt2", np.sqrt(2.0))])])
        return b.one("Mul", [half, b.one("Add", [erf, b.const("one", 1)])])

    return emit


def render(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        "{x} = Mul(Mul({x}, 0.5), Add(Erf(Div({x}, sqrt(2))), 1))"
        "  # exact GELU from Erf: opset 17 has no Gelu"
    )
    return Snippet(forward=(line,))
