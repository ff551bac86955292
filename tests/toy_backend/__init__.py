"""Backend ``toy``: the NumPy reference under another name, lowering four ops (a test fixture)."""

from rosetta.backends.base import BackendAPI

NAME = "toy"
DEVICES = ("cpu",)
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32",)

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

PAGE_NAME = "Toy"  # its column on the report's Rosetta page
COLOUR = "#123456"  # its colour in the report's charts
GEMM_PROBE = None
