"""dropout in PyTensor: a uniform draw from the shared random generator seeded by the runtime
(``pt.random.shared_rng``, its state threaded from site to site and written back as an update of
the compiled step), switched by ``Ctx.dropout_on``, a ``shared`` scalar the step reads (0: every
unit kept, scale exactly 1), so the gate runs the timed function itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "dropout": '''
def dropout(x, rate, rngs):
    """Inverted dropout; ``rngs`` holds the random generator after each draw (the compiled step
    writes the last one back), None in evaluation (the identity)."""
    if rngs is None or rate == 0:
        return x
    next_rng, u = rngs[-1].uniform(0.0, 1.0, size=x.shape, dtype=x.dtype)
    rngs.append(next_rng)
    return pt.switch(u >= rate, x / (1.0 - rate), 0.0)
''',
}


def build(op: ops.Dropout, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    next(ctx.sites)

    def dropout_layer(x: Any, run: Run) -> Any:
        if not run.training or op.rate == 0:
            return x
        rate = ctx.const(op.rate) * ctx.dropout_on  # 0 when switched off
        rng = run.rngs[-1] if run.rngs else ctx.rng  # the generator after the last draw
        next_rng, u = rng.uniform(0.0, 1.0, size=x.shape, dtype=ctx.dtype)
        run.rngs.append(next_rng)
        return pt.switch(u >= rate, x / (ctx.const(1.0) - rate), ctx.const(0.0))

    return dropout_layer


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = dropout({{x}}, {op.rate}, rngs)  # rngs None: evaluation, identity"
    return Snippet(forward=(line,), helpers=("dropout",))
