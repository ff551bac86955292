"""batchnorm in PyTensor: inference-mode affine ``(x - mean) / sqrt(var + eps) * gamma + beta``
over the last (channel) axis (NHWC, or (N, C)). Weights: gamma, beta, mean, var as is.
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
    "batchnorm": '''
def batchnorm(x, gamma, beta, mean, var, eps):
    """Inference-mode batch normalisation over the last (channel) axis."""
    return (x - mean) / pt.sqrt(var + eps) * gamma + beta
''',
}


def build(op: ops.BatchNorm, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    shape = (site.in_shape[0],)
    gamma, beta, mean, var = (ctx.shared(f"{op.name}.{r}", shape) for r in
                              ("gamma", "beta", "mean", "var"))  # fmt: skip

    def batchnorm_layer(x: Any, run: Run) -> Any:
        # inference mode; the channel axis is the last one (NHWC, or (N, C))
        return (x - mean) / pt.sqrt(var + ctx.const(op.eps)) * gamma + beta

    return batchnorm_layer


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(param(f"{op.name}.{r}") for r in ("gamma", "beta", "mean", "var"))
    line = f"{{x}} = batchnorm({{x}}, {args}, {op.eps})"
    weights = tuple(weight(f"{op.name}.{r}") for r in ("gamma", "beta", "mean", "var"))
    return Snippet(forward=(line,), weights=weights, helpers=("batchnorm",))


def layout(op: ops.BatchNorm, prev: Prev) -> dict[str, Layout]:
    """No conversion: gamma, beta, mean, var as is (vectors over the channel axis)."""
    return {}
