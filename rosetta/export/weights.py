"""Canonical weights <-> the ONNX graph's initializers, and nothing else.

Every initializer keeps its canonical name and layout (conv ``OIHW``, dense ``IO`` read by
``Gemm`` with ``transB=0``, BatchNorm's four vectors, the embedding table ``VE``) except the
GRU's, which ONNX lays out as ``W (1, 3H, E)``, ``R (1, 3H, H)`` and ``B (1, 6H)`` (input biases
then recurrent biases). The gate blocks z | r | h are ONNX's own order (``W[zrh]``), so the GRU
needs transposes only, no block swap. Every conversion is exact (transposes and concatenations),
so a round trip returns the same bits. Framework-free: NumPy only.
"""

from __future__ import annotations

import numpy as np

from rosetta.spec import ops
from rosetta.spec.graph import walk

Params = dict[str, np.ndarray]


def gru_names(name: str) -> tuple[str, str, str]:
    """The ONNX initializer names of GRU ``name``'s ``W``, ``R`` and ``B``."""
    return f"{name}.W", f"{name}.R", f"{name}.B"


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
        for spec in node.param_specs(in_shape):
            out[spec.name] = initializers[spec.name]
    return {k: np.array(v, order="C") for k, v in out.items()}
