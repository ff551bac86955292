"""lstm in PyTensor: ``scan`` over time-major (T, N, E) from a zero state and cell, the input
projection of every step done by one ``dot`` before the loop, the spec's equations in the step;
the last step's state out.

Weights keep the spec's layout (gate blocks ``i | f | g | o``, one bias): the ``scan`` step uses
the spec's equations as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

LSTM_ROLES = ("kernel", "recurrent_kernel", "bias")

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "lstm": '''
def lstm(x, kernel, recurrent_kernel, bias):
    """LSTM over (N, T, E) from a zero state and cell, gate blocks i | f | g | o, one bias;
    returns the last step's state (N, H)."""
    h = recurrent_kernel.get_value().shape[0]
    xw = pt.dot(x.dimshuffle(1, 0, 2), kernel) + bias  # (T, N, 4H): every step's input

    def step(xw_t, state, cell):
        a = xw_t + pt.dot(state, recurrent_kernel)
        i, f = pt.sigmoid(a[:, :h]), pt.sigmoid(a[:, h : 2 * h])
        g, o = pt.tanh(a[:, 2 * h : 3 * h]), pt.sigmoid(a[:, 3 * h :])
        cell = f * cell + i * g
        return o * pt.tanh(cell), cell

    zeros = pt.zeros((x.shape[0], h), dtype=x.dtype)
    states, _ = pytensor.scan(step, sequences=[xw], outputs_info=[zeros, zeros],
                              return_updates=False)
    return states[-1]
''',
}


def build(op: ops.LSTM, site: Site, ctx: Ctx) -> Layer:
    import pytensor
    import pytensor.tensor as pt

    e, h = site.in_shape[1], op.units
    kernel = ctx.shared(f"{op.name}.kernel", (e, 4 * h))  # gate blocks i | f | g | o
    recurrent = ctx.shared(f"{op.name}.recurrent_kernel", (h, 4 * h))
    bias = ctx.shared(f"{op.name}.bias", (4 * h,))

    def step(xw_t: Any, state: Any, cell: Any, u: Any) -> tuple[Any, Any]:
        a = xw_t + pt.dot(state, u)  # (N, 4H)
        i, f = pt.sigmoid(a[:, :h]), pt.sigmoid(a[:, h : 2 * h])
        g, o = pt.tanh(a[:, 2 * h : 3 * h]), pt.sigmoid(a[:, 3 * h :])
        cell = f * cell + i * g
        return o * pt.tanh(cell), cell

    def lstm_layer(x: Any, run: Run) -> Any:
        t, n = x.shape[0], x.shape[1]
        # every step's input projection at once: (T*N, E) @ (E, 4H) -> (T, N, 4H)
        xw = pt.dot(x.reshape((t * n, e)), kernel).reshape((t, n, 4 * h)) + bias
        zeros = pt.zeros((n, h), dtype=ctx.dtype)  # zero state and cell (N, H)
        states, _ = pytensor.scan(
            step, sequences=[xw], outputs_info=[zeros, zeros], non_sequences=[recurrent],
            return_updates=False,
        )  # fmt: skip
        return states[-1]  # the last step's state (N, H)

    return lstm_layer


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(param(f"{op.name}.{r}") for r in LSTM_ROLES)
    line = f"{{x}} = lstm({{x}}, {args})  # {fmt_shape(site.out_shape)}, the last step (scan)"
    weights = tuple(
        weight(f"{op.name}.{r}", note="i|f|g|o, as the spec" if i == 0 else "")
        for i, r in enumerate(LSTM_ROLES)
    )
    return Snippet(forward=(line,), weights=weights, helpers=("lstm",))


def layout(op: ops.LSTM, prev: Prev) -> dict[str, Layout]:
    """No conversion: gate blocks i | f | g | o and one bias, as the spec's."""
    return {}
