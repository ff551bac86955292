"""gru in Chainer: ``lowering.GRULast``, an ``L.NStepGRU``'s weights run by ``F.n_step_gru``
(one layer, zero initial state) over time-major (T, N, E), the last step's state out; only the
spec's z, r, h ``reset_after`` GRU is lowered (it is Chainer's, and cuDNN's, function).

Weights: ``L.NStepGRU`` holds six weight matrices (out, in) and six biases, ``w0..w2``/``b0..b2``
for the input side of the gates r, z, h and ``w3..w5``/``b3..b5`` for the recurrent side (the
reset gate applied to ``w5 h + b5``, after the recurrent matmul: the spec's reset_after), see
``GATES``. So each canonical tensor is split into its three column blocks (z | r | h along 3H,
``CANONICAL_GATES``), each kernel block transposed, and each block goes to its gate's index;
reading back concatenates them in z, r, h order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx

#: canonical gate blocks of the spec's GRU kernels (columns of ``kernel``/``recurrent_kernel``)
CANONICAL_GATES = ("z", "r", "h")
#: Chainer's NStepGRU index of each gate: input weights ``w{i}``/``b{i}``, recurrent weights
#: ``w{i+3}``/``b{i+3}`` (chainer.functions.n_step_gru: r uses W0/W3, z W1/W4, the candidate
#: W2/W5 with the reset gate applied to ``W5 h + b5``, i.e. reset_after)
GATES = {"r": 0, "z": 1, "h": 2}


def build(op: ops.GRU, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import GRULast

    ok = (
        tuple(op.gate_order) == ("z", "r", "h")
        and op.reset_after
        and op.initial_state == "zeros"
        and op.output == "last"
    )
    if not ok:
        raise unsupported("chainer", op)
    return ctx.own(op, GRULast(site.in_shape[1], op.units))


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    h = op.units
    weights = []
    for canonical, offset, kind, transpose in (
        ("kernel", 0, "ws", True),
        ("recurrent_kernel", 3, "ws", True),
        ("bias_input", 0, "bs", False),
        ("bias_recurrent", 3, "bs", False),
    ):
        for pos, gate in enumerate(op.gate_order):  # z, r, h: column blocks of the spec
            i = GATES[gate] + offset
            cols = f"{pos * h}:{(pos + 1) * h}"
            weights.append(
                Weight(
                    f"{op.name}.{canonical}",
                    f"model.{n}.{kind}[0][{i}]",
                    "a.T" if transpose else "a",
                    "a.T" if transpose else "a",
                    canonical_part=f"np.s_[:, {cols}]" if transpose else f"np.s_[{cols}]",
                    note=f"gate {gate} -> {kind[0]}{i}",
                )
            )
    return Snippet(
        (f"self.{n} = L.NStepGRU(1, {site.in_shape[1]}, {h}, 0.0)",),
        (
            f"hy, _ = self.{n}(None, F.separate({{x}}, axis=0))  # N x (T, E); hy: (1, N, H)",
            f"{{x}} = hy[0]  # {fmt_shape(site.out_shape)}, the last step's state",
        ),
        tuple(weights),
        notes=("GRU: z | r | h column blocks split into NStepGRU's w0..w5 (r=0, z=1, h=2)",),
    )


def to_native(op: ops.GRU, params) -> dict:
    h = op.units
    n = op.name
    out = {}
    for j, gate in enumerate(CANONICAL_GATES):
        cols = slice(j * h, (j + 1) * h)  # gate block j of the 3H axis
        i = GATES[gate]
        out[f"rnn.0.w{i}"] = params[f"{n}.kernel"][:, cols].T  # (E, H) -> (H, E)
        out[f"rnn.0.w{i + 3}"] = params[f"{n}.recurrent_kernel"][:, cols].T  # (H, H) -> (H, H)^T
        out[f"rnn.0.b{i}"] = params[f"{n}.bias_input"][cols]
        out[f"rnn.0.b{i + 3}"] = params[f"{n}.bias_recurrent"][cols]
    return out


def to_canonical(op: ops.GRU, read: Read) -> dict:
    n = op.name
    idx = [GATES[g] for g in CANONICAL_GATES]  # Chainer indices in z, r, h order
    return {
        # H x (H, E) transposed and side by side -> (E, 3H), blocks z | r | h
        f"{n}.kernel": np.concatenate([read(f"rnn.0.w{i}").T for i in idx], axis=1),
        f"{n}.recurrent_kernel": np.concatenate([read(f"rnn.0.w{i + 3}").T for i in idx], axis=1),
        f"{n}.bias_input": np.concatenate([read(f"rnn.0.b{i}") for i in idx]),
        f"{n}.bias_recurrent": np.concatenate([read(f"rnn.0.b{i + 3}") for i in idx]),
    }
