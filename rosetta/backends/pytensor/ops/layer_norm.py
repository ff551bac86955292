"""layer_norm in PyTensor, composed: mean and biased variance over the last axis, ``eps`` inside
the root. Weights: gamma, beta as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "layer_norm": '''
def layer_norm(x, gamma, beta, eps):
    """Normalisation over the last axis: biased variance (divided by E), eps inside the root."""
    xc = x - x.mean(axis=-1, keepdims=True)
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / pt.sqrt(var + np.asarray(eps, x.dtype)) * gamma + beta
''',
}


def build(op: ops.LayerNorm, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    e = site.in_shape[-1]
    gamma, beta = ctx.shared(f"{op.name}.gamma", (e,)), ctx.shared(f"{op.name}.beta", (e,))
    eps, one = ctx.const(op.eps), ctx.const(1.0)

    def layer_norm_layer(x: Any, run: Run) -> Any:
        xc = x - pt.mean(x, axis=-1, keepdims=True)  # over the last (feature) axis
        var = pt.mean(xc * xc, axis=-1, keepdims=True)  # biased: divided by E
        return xc * (one / pt.sqrt(var + eps)) * gamma + beta  # eps inside the root

    return layer_norm_layer


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    gamma, beta = param(f"{op.name}.gamma"), param(f"{op.name}.beta")
    line = f"{{x}} = layer_norm({{x}}, {gamma}, {beta}, {op.eps})"
    weights = (weight(f"{op.name}.gamma"), weight(f"{op.name}.beta"))
    return Snippet(forward=(line,), weights=weights, helpers=("layer_norm",))


def layout(op: ops.LayerNorm, prev: Prev) -> dict[str, Layout]:
    """No conversion: gamma, beta as is."""
    return {}
