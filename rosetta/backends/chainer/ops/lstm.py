"""lstm in Chainer: ``lowering.LSTMLast``, an ``L.NStepLSTM``'s weights run by ``F.n_step_lstm``
(one layer, zero state and cell) over time-major (T, N, E), the last step's state out.

Weights: ``L.NStepLSTM`` holds eight weight matrices (out, in) and eight biases, ``w0..w3`` for
the input side of the gates i, f, the candidate g and o, ``w4..w7`` for the recurrent side
(``GATES``). Each canonical kernel is split into its four column blocks (i | f | g | o along 4H),
each transposed to its gate's index; the spec's one bias goes to ``b0..b3``, and ``b4..b7`` are
no parameters at all (zeros in their place). Reading back concatenates them in i, f, g, o order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx

#: canonical gate blocks of the spec's LSTM kernels and bias
CANONICAL_GATES = ("i", "f", "g", "o")
#: Chainer's NStepLSTM index of each gate's input weights ``w{i}``/``b{i}`` (recurrent: + 4):
#: cuDNN's i, f, g, o, the spec's order. NB ``F.n_step_lstm``'s docstring gives ``o`` to W2 and
#: the candidate to W3, but its code (``_lstm``: ``_stack_weight([w[2], w[0], w[1], w[3]])``
#: into ``F.lstm``'s a, i, f, o) runs W2 as the candidate and W3 as o: the conformance probe
#: failed forward by 6e10x the float64 bound with the docstring's order
GATES = {"i": 0, "f": 1, "g": 2, "o": 3}


def build(op: ops.LSTM, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import LSTMLast

    return ctx.own(op, LSTMLast(site.in_shape[1], op.units))


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    h = op.units
    weights = []
    for canonical, offset, kind, transpose in (
        ("kernel", 0, "ws", True),
        ("recurrent_kernel", 4, "ws", True),
        ("bias", 0, "bs", False),
    ):
        for pos, gate in enumerate(CANONICAL_GATES):  # i, f, g, o: column blocks of the spec
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
        (
            f"self.{n} = L.NStepLSTM(1, {site.in_shape[1]}, {h}, 0.0)",
            "for k in range(4, 8):  # the spec's one bias is b0..b3: b4..b7 are no parameters",
            f"    delattr(self.{n}[0], f'b{{k}}')",
        ),
        (
            f"w, zero = self.{n}[0], self.xp.zeros(({h},), {{x}}.dtype)",
            "bs = [[w.b0, w.b1, w.b2, w.b3, zero, zero, zero, zero]]  # the recurrent biases: 0",
            f"h0 = self.xp.zeros((1, len({{x}}), {h}), {{x}}.dtype)  # zero state and cell",
            "steps = list(F.separate({x}, axis=1))  # T x (N, E)",
            f"hy, _, _ = F.n_step_lstm(1, 0.0, h0, h0, self.{n}.ws, bs, steps)",
            f"{{x}} = hy[0]  # {fmt_shape(site.out_shape)}, the last step's state",
        ),
        tuple(weights),
        notes=("LSTM: i | f | g | o column blocks split into NStepLSTM's w0..w3 and w4..w7",),
    )


def to_native(op: ops.LSTM, params) -> dict:
    h = op.units
    n = op.name
    out = {}
    for j, gate in enumerate(CANONICAL_GATES):
        cols = slice(j * h, (j + 1) * h)  # gate block j of the 4H axis
        i = GATES[gate]
        out[f"rnn.0.w{i}"] = params[f"{n}.kernel"][:, cols].T  # (E, H) -> (H, E)
        out[f"rnn.0.w{i + 4}"] = params[f"{n}.recurrent_kernel"][:, cols].T  # (H, H)^T
        out[f"rnn.0.b{i}"] = params[f"{n}.bias"][cols]
    return out


def to_canonical(op: ops.LSTM, read: Read) -> dict:
    n = op.name
    idx = [GATES[g] for g in CANONICAL_GATES]  # Chainer indices in i, f, g, o order
    return {
        # H x (H, E) transposed and side by side -> (E, 4H), blocks i | f | g | o
        f"{n}.kernel": np.concatenate([read(f"rnn.0.w{i}").T for i in idx], axis=1),
        f"{n}.recurrent_kernel": np.concatenate([read(f"rnn.0.w{i + 4}").T for i in idx], axis=1),
        f"{n}.bias": np.concatenate([read(f"rnn.0.b{i}") for i in idx]),
    }
