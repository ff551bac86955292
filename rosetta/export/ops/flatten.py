"""flatten in ONNX: ``Flatten(axis=1)``, channel-major (the spec's CHW)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.export.ops import NAME
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Flatten, site: Site, ctx: Build) -> Emit:
    if op.order != "CHW":
        raise unsupported(NAME, op)
    return lambda b, x: b.one("Flatten", [x], axis=1)  # (N, C, H, W) -> (N, C*H*W), channel-major


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = Flatten({{x}}, axis=1)  # {fmt_shape(site.out_shape)}, CHW",))
