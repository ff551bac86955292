"""The Rosetta of ONNX Runtime: the exporter's table (spec op -> ONNX nodes), and one op alone.

An engine runs what the exporter writes, so ``TABLE`` is ``rosetta.export.graph.TABLE`` itself:
one home for how each op becomes ONNX (shared with ``rosetta.backends.openvino``).
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.onnxruntime import runtime as settings
from rosetta.errors import BackendError
from rosetta.export.graph import INPUT, TABLE, op_model
from rosetta.runtime import Runtime
from rosetta.spec import ops

__all__ = ["TABLE", "apply_op"]


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op as a one-node ONNX graph in a session (evaluation only)."""
    if training and isinstance(op, ops.Dropout):
        raise BackendError("backend 'onnxruntime' is forward-only: it has no training dropout")
    model = op_model(op, tuple(x.shape[1:]), runtime.dtype)
    sess = settings.session(model.SerializeToString(), runtime.threads or 1)
    return sess.run(None, {INPUT: np.ascontiguousarray(x, dtype=runtime.dtype)})[0]
