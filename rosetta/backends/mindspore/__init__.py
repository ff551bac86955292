"""Backend ``mindspore``: the spec lowered to ``mindspore.nn`` (MindSpore 2, PyNative mode), trained
with ``mindspore.value_and_grad`` and the spec's optimisers, fed by ``mindspore.dataset``.

``ops/`` is the Rosetta of MindSpore: one module per op (its ``nn.Cell``, its source text and its
weight conversions side by side); ``lowering.py`` the cells they share and how they compose,
``source.py`` the op table found from ``ops/``, ``weights.py`` loading and reading the bound
parameters, ``loader.py`` the input pipeline, ``optim.py`` the spec's optimisers, ``runtime.py``
the process settings, ``model.py`` the ``Model`` with its two faces and the ``mindspore.jit``
switch. MindSpore is imported only when this backend is used (``compat.py``).

MindSpore's CPU kernels have no float64 ``Conv2D`` or ``BatchNorm`` and no bfloat16 ``MatMul``
(2.10.0, measured here): in float64 those two ops are written out in MindSpore ops (``lowering``
says how), and bf16 is not run.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "mindspore"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32",)
#: why a known policy is not in ``PRECISIONS`` (the reason a skipped cell carries)
UNSUPPORTED_PRECISIONS = {
    "bf16": (
        "MindSpore 2.10's CPU kernels have no bfloat16 MatMul (its error: Select CPU operator"
        "[MatMul] fail! Unsupported data type!): a bf16 cell would have to compute in float32 "
        "while claiming bf16"
    ),
}

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "MindSpore"  # its column on the report's Rosetta page
COLOUR = "#CC79A7"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option mindspore.jit=VALUE``
OPTIONS = (
    Option(
        "jit",
        ("default", "on", "off"),
        "default",
        "mindspore.jit (graph mode) of the training step and the forward: default runs "
        "graph mode (the localiser's probes PyNative), on and off force it",
        "PyNative / jit, float32, both in the same rounds (python -m benchmarks "
        "lowering_mindspore, 5 rounds, 2-core Zen 1, load 0.9 before, its own threads after): "
        "cnn 1.174 [1.084, 1.267], gru 13.2 [11.5, 15.1], resnet50 1.158 [1.093, 1.354], "
        "transformer 2.173 [2.072, 2.329]; float64 stays PyNative (graph mode fails its gate "
        "here)",
    ),
)
LANES = {"default": {"jit": "off"}}  # MindSpore as it comes: PyNative throughout
