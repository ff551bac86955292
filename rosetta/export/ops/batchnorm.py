"""batchnorm in ONNX: ``BatchNormalization`` (inference form, the moving statistics)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.BatchNorm, site: Site, ctx: Build) -> Emit:
    stats = [f"{op.name}.{p}" for p in ("gamma", "beta", "mean", "var")]
    return lambda b, x: b.one("BatchNormalization", [x, *stats], epsilon=op.eps)  # inference form


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    stats = f"{n}.gamma, {n}.beta, {n}.mean, {n}.var"
    line = f"{{x}} = BatchNormalization({{x}}, {stats}, epsilon={op.eps})"
    parts = ("gamma", "beta", "mean", "var")
    return Snippet(forward=(line,), weights=tuple(Weight(f"{n}.{p}", f"{n}.{p}") for p in parts))
