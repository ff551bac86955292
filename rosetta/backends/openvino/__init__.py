"""Backend ``openvino``: the spec's ONNX export (``rosetta.export``) run by OpenVINO's CPU plugin.

A serving engine, forward only: ``model.py`` reads the exported graph with ``Core.read_model``
and compiles it for the CPU plugin, one static graph per batch shape, with the hints of
``runtime.py``; its cell of a training workload runs the forward pass only (``FORWARD_ONLY``).
bf16 runs where the CPU computes bfloat16 natively (``cpuflags.py``: avx512_bf16 or AMX), as
OpenVINO's ``INFERENCE_PRECISION_HINT=bf16``; elsewhere it is skipped with the reason. OpenVINO is
imported only when this backend is used.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.openvino.cpuflags import BF16_FLAGS, has_bf16

NAME = "openvino"
DEVICES = ("cpu",)  # the CPU plugin
DTYPES = ("float32",)  # the CPU plugin computes a float64 graph in f32 (it has no f64 precision)
PRECISIONS = ("fp32", "bf16") if has_bf16() else ("fp32",)
UNSUPPORTED_PRECISIONS = {
    "bf16": f"this CPU has none of {', '.join(BF16_FLAGS)}, and OpenVINO's CPU plugin "
    "computes bf16 only on those",
}
#: a capability (rosetta.backends.base.training_unsupported): why it runs no training step
FORWARD_ONLY = "a serving engine: it runs the spec's exported ONNX forward graph"

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
#: not a column of the Rosetta page: it runs the exported ONNX graph (no file of its own)
PAGE_NAME = None
COLOUR = "#F0E442"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's
