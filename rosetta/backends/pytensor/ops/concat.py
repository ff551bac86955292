"""concat in PyTensor: ``pt.concatenate`` along the spec's axis in the native layout
(``snippet.batched_axis``): an image's channels are the last axis of its NHWC activations; the
compiled graph holds embedded sequences time-major, (T, N, E), the generated file batch-major."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, batched_axis
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Concat, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    axis = batched_axis(op.axis, site.in_shape, True, time_major=True)  # (T, N, E) sequences
    return lambda xs, run: pt.concatenate(xs, axis=axis)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    axis = batched_axis(op.axis, site.in_shape, True)
    return Snippet(forward=(f"{{x}} = pt.concatenate([{parts}], axis={axis})",))
