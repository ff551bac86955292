"""Backend ``paddle``: the spec lowered to ``paddle.nn`` (PaddlePaddle 3, dynamic graph), trained
with ``paddle.optimizer``, fed by ``paddle.io.DataLoader``.

``ops/`` is the Rosetta of Paddle: one module per op (its ``nn`` layer, its source text and its
weight conversions side by side); ``lowering.py`` the layers they share and how they compose,
``source.py`` the op table found from ``ops/``, ``weights.py`` loading and reading the bound
weights, ``loader.py`` the ``DataLoader``, ``optim.py`` the spec's optimisers (Paddle's own
``Adam`` and ``AdamW``; ``Momentum`` in float32, the spec's rule written in Paddle ops in
float64), ``runtime.py`` the process settings (threads), ``model.py`` the ``Model`` with its two
faces and the ``paddle.jit.to_static`` switch. Paddle is imported only when this backend is used.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "paddle"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32",)
#: why a known policy is not in ``PRECISIONS`` (the reason a skipped cell carries)
UNSUPPORTED_PRECISIONS = {
    "bf16": (
        "Paddle 3.3's CPU kernels have no bfloat16 matmul (its error: the kernel `matmul` is not "
        "registered for bfloat16 on the CPU), and paddle.amp.auto_cast(dtype='bfloat16') on the "
        "CPU leaves conv2d and linear in float32, oneDNN on or off: a bf16 cell would compute "
        "fp32 while claiming bf16"
    ),
}

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "Paddle"  # its column on the report's Rosetta page
COLOUR = "#F0E442"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option paddle.static=VALUE``
OPTIONS = (
    Option(
        "static",
        ("default", "on", "off"),
        "default",
        "paddle.jit.to_static of the layers: default runs the dynamic graph, on and off force it",
        "on/off measured level on a 2-core Zen 4: cnn 1.002 [0.992, 1.007], gru 0.992 [0.963, "
        "1.042], resnet50 0.999 [0.989, 1.004] (model.static_in_effect)",
    ),
    Option(
        "predictor",
        ("default", "inference", "dygraph"),
        "default",
        "how a forward-only workload's predict runs: default and inference use Paddle Inference "
        "(paddle.jit.save + create_predictor with oneDNN) for float32 on the CPU, dygraph the "
        "dynamic graph",
        "ResNet-50 32 x 224^2, 2-core Zen 4, quiet: dynamic graph / Paddle Inference with oneDNN "
        "6.32 [6.07, 6.57] (predictor.in_effect)",
    ),
)
LANES = {"default": {"predictor": "dygraph"}}  # Paddle as it comes: the dynamic graph throughout
