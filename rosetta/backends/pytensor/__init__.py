"""Backend ``pytensor``: the spec as PyTensor symbolic graphs (the maintained line of Theano),
differentiated by ``pytensor.grad`` and compiled by ``pytensor.function``.

``ops/`` is the Rosetta of PyTensor, one module per op (its ``build``: the op as a function of
symbolic tensors, the convolution as taps and one ``dot``, max-pooling over stacked taps, ``scan``
for the GRU, the Transformer's attention, LayerNorm, exact GELU and masked mean composed of
PyTensor's ops; its ``render``: the same as source text; its ``layout``: its parameters' native
layouts, HWIO kernels); ``lowering.py`` the build context and how layers compose; ``source.py`` the
one op table (``OPS``); ``weights.py`` the canonical <-> native layouts of a workload (NHWC images,
each op's ``layout``); ``optim.py`` the spec's optimisers as the ``updates`` of the compiled step;
``loader.py`` the host batches PyTensor's CPU functions take; ``runtime.py`` the process settings
and the linker (C via g++, or Numba: its option ``linker``); ``model.py`` the compiled
programs and both faces. CPU only; float32 and float64. Nothing imports PyTensor until
``available()``, ``build()`` or ``run_op()`` is called.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "pytensor"
DEVICES = ("cpu",)
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32",)
#: why a known policy is not in ``PRECISIONS`` (the reason a skipped cell carries)
UNSUPPORTED_PRECISIONS = {
    "bf16": (
        "PyTensor's tensor types are NumPy dtypes, and NumPy has no bfloat16; neither its C nor "
        "its Numba linker has a bfloat16 kernel, so a bf16 cell would compute fp32"
    ),
}

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "PyTensor"  # its column on the report's Rosetta page
COLOUR = "#0072B2"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option pytensor.linker=VALUE``
OPTIONS = (
    Option(
        "linker",
        ("default", "cvm", "numba"),
        "default",
        "PyTensor's linker: cvm runs C ops under the C VM (needs g++), numba compiles with Numba; "
        "default is cvm where a C++ compiler exists, else numba",
        "runtime.resolve_linker says why (Numba compiles each new graph for minutes)",
    ),
)
#: the lanes besides Rosetta's fast path (``rosetta bench --lanes default,fast``): the options
#: that make this framework run as it comes, its own plain defaults
LANES = {"default": {"linker": "numba"}}  # PyTensor 3's own default linker
