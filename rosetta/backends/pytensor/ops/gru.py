"""gru in PyTensor: ``scan`` over time-major (T, N, E) from a zero state, the input projection of
every step done by one ``dot`` before the loop, the spec's ``reset_after`` equations in the step;
the last step's state out.

Weights keep the spec's layout (gate blocks ``z | r | h``, two biases): the ``scan`` step uses
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

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "gru": '''
def gru(x, kernel, recurrent_kernel, bias_input, bias_recurrent):
    """GRU over (N, T, E) from a zero state, gate blocks z | r | h, reset applied after the
    recurrent matmul (reset_after); returns the last step's state (N, H)."""
    h = recurrent_kernel.get_value().shape[0]
    xw = pt.dot(x.dimshuffle(1, 0, 2), kernel) + bias_input  # (T, N, 3H): every step's input

    def step(xw_t, state):
        hu = pt.dot(state, recurrent_kernel) + bias_recurrent
        z = pt.sigmoid(xw_t[:, :h] + hu[:, :h])
        r = pt.sigmoid(xw_t[:, h : 2 * h] + hu[:, h : 2 * h])
        n = pt.tanh(xw_t[:, 2 * h :] + r * hu[:, 2 * h :])
        return z * state + (1 - z) * n

    h0 = pt.zeros((x.shape[0], h), dtype=x.dtype)
    states = pytensor.scan(step, sequences=[xw], outputs_info=[h0], return_updates=False)
    return states[-1]
''',
}


def build(op: ops.GRU, site: Site, ctx: Ctx) -> Layer:
    import pytensor
    import pytensor.tensor as pt

    from rosetta.backends.driver import unsupported

    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported("pytensor", op)
    e, h = site.in_shape[1], op.units
    kernel = ctx.shared(f"{op.name}.kernel", (e, 3 * h))  # gate blocks z | r | h
    recurrent = ctx.shared(f"{op.name}.recurrent_kernel", (h, 3 * h))
    bias_in = ctx.shared(f"{op.name}.bias_input", (3 * h,))
    bias_rec = ctx.shared(f"{op.name}.bias_recurrent", (3 * h,))

    def step(xw_t: Any, state: Any, u: Any, c: Any) -> Any:
        hu = pt.dot(state, u) + c  # (N, 3H): the recurrent side, reset applied after it
        z = pt.sigmoid(xw_t[:, :h] + hu[:, :h])  # update gate
        r = pt.sigmoid(xw_t[:, h : 2 * h] + hu[:, h : 2 * h])  # reset gate
        cand = pt.tanh(xw_t[:, 2 * h :] + r * hu[:, 2 * h :])
        return z * state + (ctx.const(1.0) - z) * cand

    def gru_layer(x: Any, run: Run) -> Any:
        t, n = x.shape[0], x.shape[1]
        # every step's input projection at once: (T*N, E) @ (E, 3H) -> (T, N, 3H)
        xw = pt.dot(x.reshape((t * n, e)), kernel).reshape((t, n, 3 * h)) + bias_in
        h0 = pt.zeros((n, h), dtype=ctx.dtype)  # zero initial state (N, H)
        states = pytensor.scan(
            step, sequences=[xw], outputs_info=[h0], non_sequences=[recurrent, bias_rec],
            return_updates=False,
        )  # fmt: skip
        return states[-1]  # the last step's state (N, H)

    return gru_layer


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    roles = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    args = ", ".join(param(f"{op.name}.{r}") for r in roles)
    line = f"{{x}} = gru({{x}}, {args})  # {fmt_shape(site.out_shape)}, the last step (scan)"
    weights = tuple(
        weight(f"{op.name}.{r}", note="z|r|h, as the spec" if i == 0 else "")
        for i, r in enumerate(roles)
    )
    return Snippet(forward=(line,), weights=weights, helpers=("gru",))


def layout(op: ops.GRU, prev: Prev) -> dict[str, Layout]:
    """No conversion: gate blocks z | r | h and two biases, as the spec's."""
    return {}
