"""softmax in PyTensor: ``pt.special.softmax`` over the spec's last per-sample axis in the native
layout (``snippet.batched_axis``): an image's W is axis 2 of its NHWC activations (the channels
are last); the compiled graph holds embedded sequences time-major, (T, N, E), the generated
file batch-major, and E is the last axis either way; a vector's features, 1."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, batched_axis
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Softmax, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    last = len(site.in_shape) - 1
    axis = batched_axis(last, site.in_shape, True, time_major=True)  # (T, N, E) sequences
    return lambda x, run: pt.special.softmax(x, axis=axis)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    axis = batched_axis(len(site.in_shape) - 1, site.in_shape, True)
    return Snippet(forward=(f"{{x}} = pt.special.softmax({{x}}, axis={axis})",))
