"""lstm in JAX: ``lax.scan`` over time of the spec's own equations from a zero state and cell,
the last state out. The kernels (``E, 4H``, ``H, 4H``, gate blocks ``i | f | g | o``) and the one
bias keep the canonical layout: no conversion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

LSTM_ROLES = ("kernel", "recurrent_kernel", "bias")

HELPERS = {
    "lstm": '''
def lstm(x, kernel, recurrent_kernel, bias):
    """LSTM over (N, T, E) from a zero state and cell, gate blocks i | f | g | o, one bias;
    returns the last step's state (N, H)."""
    n, hsz = x.shape[0], recurrent_kernel.shape[0]
    xw = x @ kernel + bias  # (N, T, 4H): every step's input projection at once

    def step(carry, xw_t):
        h, c = carry
        i, f, g, o = jnp.split(xw_t + h @ recurrent_kernel, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zeros = jnp.zeros((n, hsz), x.dtype)
    (h, _), _ = lax.scan(step, (zeros, zeros), jnp.swapaxes(xw, 0, 1))  # over time: (T, N, 4H)
    return h
''',
}


def build(op: ops.LSTM, site: Site, ctx: Ctx) -> Layer:
    import jax
    import jax.numpy as jnp
    from jax import lax

    n, h = op.name, op.units

    def lstm_layer(p: Params, x: Any, run: Run) -> Any:
        kernel, recurrent, bias = (p[f"{n}.{role}"] for role in LSTM_ROLES)
        dot = ctx.dot
        # (T, N, E) -> (T*N, E) @ (E, 4H) -> (T, N, 4H): every step's input projection at once
        xw = dot(x.reshape(-1, x.shape[-1]), kernel).reshape(x.shape[0], x.shape[1], 4 * h) + bias

        def step(carry: tuple[Any, Any], xw_t: Any) -> tuple[tuple[Any, Any], None]:
            state, cell = carry  # (N, H) each
            a = xw_t + dot(state, recurrent)  # (N, 4H)
            i, f, g, o = jnp.split(a, 4, axis=-1)
            cell = jax.nn.sigmoid(f) * cell + jax.nn.sigmoid(i) * jnp.tanh(g)
            return (jax.nn.sigmoid(o) * jnp.tanh(cell), cell), None

        zeros = jnp.zeros((x.shape[1], h), dtype=x.dtype)  # zero state and cell (N, H)
        (last, _), _ = lax.scan(step, (zeros, zeros), xw, unroll=ctx.gru_unroll)  # (T, N, 4H)
        return last  # the last step's state (N, H)

    return lstm_layer


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(param(f"{op.name}.{r}") for r in LSTM_ROLES)
    line = f"{{x}} = lstm({{x}}, {args})  # {fmt_shape(site.out_shape)}, the last step"
    weights = tuple(
        weight(f"{op.name}.{r}", note="i|f|g|o, as the spec" if i == 0 else "")
        for i, r in enumerate(LSTM_ROLES)
    )
    return Snippet(forward=(line,), weights=weights, helpers=("lstm",))
