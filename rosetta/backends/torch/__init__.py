"""Backend ``torch``: the spec lowered to ``torch.nn``, trained with ``torch.optim``.

``lowering.py`` is the Rosetta of PyTorch (op -> ``nn`` module), ``weights.py`` every weight
conversion, ``loader.py`` the ``DataLoader``, ``optim.py`` the spec's optimisers as
``torch.optim``, ``runtime.py`` the process settings (threads, TF32, cuDNN autotune),
``model.py`` the ``Model`` with its two faces and the measured fast-path choices. PyTorch is
imported only when this backend is used, never by the core.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "torch"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: torch.autocast (model.py), CPU and CUDA

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "PyTorch"  # its column on the report's Rosetta page
COLOUR = "#E69F00"  # its colour in the report's charts
#: the peak probe: (framework, a script timing an NxN matmul, fp32 and bf16) -> run.json
GEMM_PROBE = (
    "torch",
    """
import torch
out = {}
for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
    a = torch.rand(N, N, dtype=dt); b = torch.rand(N, N, dtype=dt)
    out[name] = flop / best(lambda: torch.mm(a, b)) / 1e9
print(json.dumps(out))
""",
)

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option torch.compile=VALUE``
OPTIONS = (
    Option(
        "compile",
        ("default", "on", "off"),
        "default",
        "torch.compile of the timed program: default compiles a forward-only float32 program "
        "(inductor with freezing) and runs a training step eager; on and off force it (a float64 "
        "build and the localiser's cuts always run eager)",
        "training gained nothing measured and paid minutes of inductor builds "
        "(model.compile_in_effect; benchmarks/fastpath_knob --backend torch --knob torch_compile)",
    ),
)
#: the lanes besides Rosetta's fast path (``rosetta bench --lanes default,fast``): the options
#: that make this framework run as it comes, its own plain defaults
LANES = {"default": {"compile": "off"}}  # PyTorch as it comes: eager
