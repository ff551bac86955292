"""Backend ``numpy_ref``: the pure-NumPy reference every other backend is checked against.

``lowering.py`` is the Rosetta of NumPy (each op's forward with its backward beside it, from the
kernels in ``conv.py``, ``nn.py`` and ``rnn.py``); ``optim.py`` holds SGD and Adam with the spec's
exact semantics; ``runtime.py`` sizes NumPy's BLAS pool; ``model.py`` interprets a workload.
Float32 and float64, CPU only.
"""

from rosetta.backends.base import BackendAPI

NAME = "numpy_ref"
DEVICES = ("cpu",)
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32",)

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "NumPy (reference)"  # its column on the report's Rosetta page
COLOUR = "#444444"  # its colour in the report's charts
#: the peak probe: (framework, a script timing an NxN matmul, fp32 and bf16) -> run.json
GEMM_PROBE = (
    "numpy",
    """
import numpy as np
a = np.random.default_rng(0).random((N, N), dtype=np.float32); b = a.T.copy()
print(json.dumps({"fp32": flop / best(lambda: a @ b) / 1e9, "bf16": None,
                  "bf16_why": "NumPy has no bfloat16 dtype"}))
""",
)
