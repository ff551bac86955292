"""Backend ``onnxruntime``: the spec's ONNX export (``rosetta.export``) run by ONNX Runtime.

A serving engine, forward only: ``model.py`` runs the exported graph in an
``onnxruntime.InferenceSession`` on the CPU execution provider with the fast-path settings of
``runtime.py``; its cell of a training workload runs the forward pass only (``FORWARD_ONLY``).
``lowering.py`` and ``source.py`` are the exporter's table (spec op -> ONNX nodes),
``weights.py`` its initializer conversions. ONNX Runtime is imported only when this backend is used.
"""

from rosetta.backends.base import BackendAPI

NAME = "onnxruntime"
DEVICES = ("cpu",)  # the CPU execution provider (onnxruntime-gpu is another distribution)
DTYPES = ("float32",)  # the CPU provider has no float64 Conv or GRU kernel
PRECISIONS = ("fp32",)
UNSUPPORTED_PRECISIONS = {
    "bf16": "its CPU execution provider has no bfloat16 Conv, Gemm or GRU kernels",
}
#: a capability (rosetta.backends.base.training_unsupported): why it runs no training step
FORWARD_ONLY = "a serving engine: it runs the spec's exported ONNX forward graph"

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
#: not a column of the Rosetta page: it runs the exported ONNX graph (no file of its own)
PAGE_NAME = None
COLOUR = "#999999"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's
