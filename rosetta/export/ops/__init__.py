"""The spec's ops in ONNX: one module per op, found by its name (``rosetta.backends.driver
.discover``), as every backend's. Each holds ``build`` (an emitter appending the op's nodes to the
graph under construction, ``graph.Build``) and ``render`` (the same nodes as text, what the
serving engines' ``source.py`` shows); an op whose ONNX form needs a newer opset than
:data:`rosetta.export.MIN_OPSET` says so as ``MIN_OPSET``. A variadic op's emitter (``add``,
``concat``) reads the list of its inputs' tensor names, ``emit(b, xs)``, and its text reads
``{x0}``, ``{x1}``... This package imports no ``onnx``.

Layouts: the graph computes in the canonical NCHW / (N, T) layouts, so conv kernels (OIHW), the
channel-major flatten and dense kernels (in, out) pass unchanged; only the GRU's kernels are
transposed (``rosetta.export.weights``). The token mask of the Transformer's ops is made once
from the graph's int input (``valid = input != 0``) and shared by every op that reads it
(``graph.mask``, and :func:`mask_lines` in text).
"""

from __future__ import annotations

from rosetta.backends.snippet import RenderCtx

NAME = "onnx"

#: op name -> why the exporter does not lower it (none: it writes every op of the spec as ONNX
#: nodes, which both serving engines run)
UNSUPPORTED: dict[str, str] = {}


def onnx_pads(padding: tuple[int, int, int, int]) -> list[int]:
    """The spec's ``(top, bottom, left, right)`` as ONNX's ``[h_begin, w_begin, h_end, w_end]``."""
    t, b, left, right = padding
    return [t, left, b, right]


def mask_lines(ctx: RenderCtx, *pieces: str) -> tuple[str, ...]:
    """The lines making the token mask's ``pieces`` not written yet (each once per graph, as
    ``graph.py`` emits them): ``valid``, ``count``, ``key_bias``, ``any_key``."""
    lines = {
        "valid": "valid = Not(Equal(input, 0))  # (N, T) bool: the real tokens (id 0 is padding)",
        "count": "count = ReduceSum(Cast(valid, float), axes=[1], keepdims=1)  # (N, 1)",
        "key_bias": "key_bias = Unsqueeze(Where(Or(valid, Not(Greater(count, 0))), 0, -inf), "
        "[1, 2])  # (N, 1, 1, T); a row of padding only keeps every key (zeroed below)",
        "any_key": "any_key = Unsqueeze(Cast(Greater(count, 0), float), [2])  # (N, 1, 1)",
    }
    need = {"valid": (), "count": ("valid",), "key_bias": ("count",), "any_key": ("count",)}
    done = ctx.extra.setdefault("onnx_mask", set())
    out: list[str] = []

    def add(piece: str) -> None:
        for before in need[piece]:
            add(before)
        if piece not in done:
            done.add(piece)
            out.append(lines[piece])

    for piece in pieces:
        add(piece)
    return tuple(out)
