"""Canonical weights <-> the ONNX graph's initializers, and nothing else.

Every initializer keeps its canonical name and layout (conv ``OIHW``, dense ``IO`` read by
``Gemm`` with ``transB=0``, BatchNorm's four vectors, the embedding table ``VE``) except the
GRU's, which ONNX lays out as ``W (1, 3H, E)``, ``R (1, 3H, H)`` and ``B (1, 6H)`` (input biases
then recurrent biases). The gate blocks z | r | h are ONNX's own order (``W[zrh]``), so the GRU
needs transposes only, no block swap. The LSTM's ``W (1, 4H, E)``, ``R (1, 4H, H)`` and
``B (1, 8H)`` order their gate blocks ``i, o, f, c`` where the spec's are ``i | f | g | o``
(:func:`to_iofc`), and the spec's one bias is ONNX's input bias, its recurrent bias zeros.
Every conversion is exact (transposes, block moves and concatenations), so a round trip returns
the same bits. Framework-free: NumPy only.
"""

from __future__ import annotations

import numpy as np

from rosetta.spec import ops
from rosetta.spec.graph import walk

Params = dict[str, np.ndarray]


def gru_names(name: str) -> tuple[str, str, str]:
    """The ONNX initializer names of GRU ``name``'s ``W``, ``R`` and ``B``."""
    return f"{name}.W", f"{name}.R", f"{name}.B"


#: the spec's LSTM gate blocks (i, f, g, o) in ONNX's order i, o, f, c, and back
IOFC = (0, 3, 1, 2)
IFGO = (0, 2, 3, 1)


def to_iofc(a: np.ndarray, order: tuple[int, ...] = IOFC) -> np.ndarray:
    """The four gate blocks along ``a``'s last axis put in ``order`` (the spec's i | f | g | o
    to ONNX's i | o | f | c; ``IFGO``: back)."""
    blocks = np.split(a, 4, axis=-1)
    return np.concatenate([blocks[k] for k in order], axis=-1)


def to_initializers(workload, params: Params, dtype: str) -> Params:
    """The graph's initializers (by ONNX name, in ``dtype``) from canonical ``params``."""
    out: Params = {}
    for node, in_shape, _ in walk(workload.graph, workload.input.shape):
        if isinstance(node, ops.GRU):
            n = node.name
            w, r, b = gru_names(n)
            out[w] = params[f"{n}.kernel"].T[None]  # (E, 3H) -> (1, 3H, E)
            out[r] = params[f"{n}.recurrent_kernel"].T[None]  # (H, 3H) -> (1, 3H, H)
            bias = (params[f"{n}.bias_input"], params[f"{n}.bias_recurrent"])
            out[b] = np.concatenate(bias)[None]  # (1, 6H): Wb[zrh] then Rb[zrh]
            continue
        if isinstance(node, ops.LSTM):
            n = node.name
            w, r, b = gru_names(n)
            out[w] = to_iofc(params[f"{n}.kernel"]).T[None]  # (E, 4H) -> (1, 4H, E), i|o|f|c
            out[r] = to_iofc(params[f"{n}.recurrent_kernel"]).T[None]  # (H, 4H) -> (1, 4H, H)
            bias = to_iofc(params[f"{n}.bias"])
            out[b] = np.concatenate([bias, np.zeros_like(bias)])[None]  # (1, 8H): Wb, Rb = 0
            continue
        for spec in node.param_specs(in_shape):
            out[spec.name] = params[spec.name]
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in out.items()}


def to_canonical(workload, initializers: Params) -> Params:
    """Canonical parameters from the graph's initializers (the inverse of ``to_initializers``)."""
    out: Params = {}
    for node, in_shape, _ in walk(workload.graph, workload.input.shape):
        if isinstance(node, ops.GRU):
            n, h = node.name, node.units
            w, r, b = gru_names(n)
            out[f"{n}.kernel"] = initializers[w][0].T
            out[f"{n}.recurrent_kernel"] = initializers[r][0].T
            out[f"{n}.bias_input"] = initializers[b][0, : 3 * h]
            out[f"{n}.bias_recurrent"] = initializers[b][0, 3 * h :]
            continue
        if isinstance(node, ops.LSTM):
            n, h = node.name, node.units
            w, r, b = gru_names(n)
            out[f"{n}.kernel"] = to_iofc(initializers[w][0].T, IFGO)
            out[f"{n}.recurrent_kernel"] = to_iofc(initializers[r][0].T, IFGO)
            out[f"{n}.bias"] = to_iofc(initializers[b][0, : 4 * h], IFGO)
            continue
        for spec in node.param_specs(in_shape):
            out[spec.name] = initializers[spec.name]
    return {k: np.array(v, order="C") for k, v in out.items()}
