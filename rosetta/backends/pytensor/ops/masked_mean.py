"""masked_mean in PyTensor: the time-major activations summed with weights ``valid / max(count,
1)`` (the mask of real tokens the model's sequence made): 0 over zero tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "masked_mean": '''
def masked_mean(x, valid):
    """(N, T, E) -> (N, E): the mean over the real tokens; a review of padding only gives 0."""
    w = valid.astype(x.dtype)  # (N, T)
    count = pt.maximum(w.sum(axis=1, keepdims=True), 1)  # no token: divide by 1
    return (x * (w / count).dimshuffle(0, 1, "x")).sum(axis=1)
''',
}


def build(op: ops.MaskedMean, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    from rosetta.backends.pytensor.lowering import token_mask

    one = ctx.const(1.0)

    def masked_mean_layer(x: Any, run: Run) -> Any:
        valid = token_mask(run, "masked_mean").astype(ctx.dtype)  # (N, T) 0/1
        count = pt.maximum(pt.sum(valid, axis=1, keepdims=True), one)  # (N, 1): 0 tokens -> 1
        weight = (valid / count).T.dimshuffle(0, 1, "x")  # (T, N, 1): 0 at padding
        return pt.sum(x * weight, axis=0)  # time-major (T, N, E) -> (N, E); 0 tokens: 0

    return masked_mean_layer


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = f"{{x}} = masked_mean({{x}}, valid)  # {fmt_shape(site.out_shape)}, real tokens only"
    return Snippet(forward=(line,), helpers=("masked_mean",))
