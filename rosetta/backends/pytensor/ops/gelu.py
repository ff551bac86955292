"""gelu in PyTensor: exact, with ``pt.erf`` (not the tanh approximation)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "gelu": '''
def gelu(x):
    """Exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (not the tanh approximation)."""
    half, root2 = (np.asarray(v, x.dtype) for v in (0.5, np.sqrt(2.0)))
    return half * x * (1 + pt.erf(x / root2))
''',
}


def build(op: ops.GELU, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    half, one, root2 = ctx.const(0.5), ctx.const(1.0), ctx.const(math.sqrt(2.0))
    return lambda x, run: half * x * (one + pt.erf(x / root2))  # exact: erf, not tanh


def render(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = gelu({x})  # exact (erf)",), helpers=("gelu",))
