"""flatten in NumPy: the reference layer ``layers.flatten`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops


def build(op: ops.Flatten, site: Site, ctx: None) -> Layer:
    return layers.flatten()  # (N, C, H, W) -> (N, C*H*W), channel-major


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(
        forward=(
            f"flatten(),  # {fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}, C, H, W",
        )
    )
