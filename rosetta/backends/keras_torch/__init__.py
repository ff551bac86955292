"""Backend ``keras_torch``: the spec lowered to a Keras 3 model on the PyTorch engine.

The lowering, weight layouts, optimisers and source table are the Keras ones every engine shares
(``rosetta/backends/keras_common/``); this folder holds what is PyTorch's: ``runtime.py`` selects
Keras' PyTorch engine for the process (a process whose Keras runs another engine gets one line
why not) and reuses the ``torch`` backend's process settings, ``loader.py`` is the ``torch``
backend's ``DataLoader``, and ``model.py`` runs an eager step (forward, ``backward``,
``optimizer.apply``; or Keras' ``train_on_batch``: its option ``step``). Importing this
package imports no framework.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "keras_torch"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: Keras mixed_bfloat16 per layer (keras_common/model.py)
#: Keras' engine, chosen once per process (keras_common/engine.py); a process runs one
KERAS_ENGINE = "torch"

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
#: not a column of the Rosetta page: its source is the Keras column's (the same functional API)
PAGE_NAME = None
COLOUR = "#D55E00"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option keras_torch.step=VALUE``
OPTIONS = (
    Option(
        "step",
        ("default", "keras", "custom"),
        "default",
        "the training step: keras is Keras' own compile + train_on_batch, custom an eager backward"
        " and optimizer.apply; default is keras on the CPU",
        "keras/custom: cnn 0.890 [0.867, 0.926] and 0.971 [0.920, 1.013], gru 1.026 [0.979, 1.063]"
        " and 0.942 [0.903, 0.991] (benchmarks/fastpath_knob, Zen 4, 2026-11-25)",
    ),
    Option(
        "gru",
        ("default", "fused", "keras"),
        "default",
        "the GRU: fused is PyTorch's nn.GRU in keras.layers.TorchModuleWrapper (one fused kernel "
        "over the steps), keras is Keras' layers.GRU (a Python loop over time steps on the CPU); "
        "default is fused in float32 and float64, keras under bf16",
        "fused/keras train step of the gru workload: 0.643 [0.617, 0.666] (133.1 vs 207.0 ms), "
        "cold start 0.6 vs 8.8 s (benchmarks/fastpath_knob, Zen 4, 2026-11-28)",
    ),
    Option(
        "attention",
        ("default", "fused", "keras"),
        "default",
        "the attention core: fused is PyTorch's scaled_dot_product_attention (one kernel, a "
        "boolean key mask), keras the keras.ops composition every Keras engine shares (matmul, "
        "where, softmax, matmul); default is fused",
        "keras/fused train step of the transformer 1.071 [0.988, 1.131] (428 vs 400 ms; two "
        "earlier runs 1.040 [1.021, 1.074], 1.059 [0.995, 1.109]; benchmarks "
        "lowering_keras_torch, 40 rounds, Zen 4, 2026-11-28)",
    ),
)
#: the lanes besides Rosetta's fast path (``rosetta bench --lanes default,fast``): the options
#: that make this framework run as it comes, its own plain defaults
#: Keras' own train_on_batch and GRU, the shared keras.ops attention
LANES = {"default": {"step": "keras", "gru": "keras", "attention": "keras"}}
