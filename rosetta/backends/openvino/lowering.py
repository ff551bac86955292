"""The Rosetta of OpenVINO: the exporter's table (spec op -> ONNX nodes), which the CPU plugin
reads through its ONNX front end, and one op alone.

``TABLE`` is ``rosetta.export.graph.TABLE`` itself: one home for how each op becomes ONNX
(shared with ``rosetta.backends.onnxruntime``).
"""

from __future__ import annotations

import io

import numpy as np

from rosetta.backends.openvino import runtime as settings
from rosetta.errors import BackendError
from rosetta.export.graph import TABLE, op_model
from rosetta.runtime import Runtime
from rosetta.spec import ops

__all__ = ["TABLE", "apply_op"]


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op as a one-node ONNX graph compiled for the CPU plugin."""
    if training and isinstance(op, ops.Dropout):
        raise BackendError("backend 'openvino' is forward-only: it has no training dropout")
    model = op_model(op, tuple(x.shape[1:]), runtime.dtype)
    read = settings.CORE.read_model(io.BytesIO(model.SerializeToString()))
    compiled = settings.CORE.compile_model(
        read, settings.DEVICE, settings.compile_config(runtime.precision, runtime.threads or 1)
    )
    return np.array(compiled(np.ascontiguousarray(x, dtype=runtime.dtype))[0])
