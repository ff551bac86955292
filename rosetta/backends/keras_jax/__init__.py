"""Backend ``keras_jax``: the spec lowered to a Keras 3 model on the JAX engine.

The lowering, weight layouts, optimisers and source table are the Keras ones every engine shares
(``rosetta/backends/keras_common/``); this folder holds what is JAX's: ``runtime.py`` selects
Keras' JAX engine for the process (a process whose Keras runs another engine gets one line why
not) and reuses the ``jax`` backend's process settings, ``loader.py`` puts batches on the device
ahead of the step, and ``model.py`` runs a jitted stateless training step (or Keras'
``train_on_batch``: its option ``step``). Importing this package imports no framework.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "keras_jax"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: Keras mixed_bfloat16 per layer (keras_common/model.py)
#: Keras' engine, chosen once per process (keras_common/engine.py); a process runs one
KERAS_ENGINE = "jax"

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
#: not a column of the Rosetta page: its source is the Keras column's (the same functional API)
PAGE_NAME = None
COLOUR = "#0072B2"  # its colour in the report's charts
GEMM_PROBE = None  # no probe of its own: its framework's peak is another backend's

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option keras_jax.step=VALUE``
OPTIONS = (
    Option(
        "step",
        ("default", "keras", "custom"),
        "default",
        "the training step: keras is Keras' own compile + train_on_batch, custom a jitted "
        "stateless step; default is custom on JAX",
        "keras_common/engine.step_in_effect says why, with the benchmarks/fastpath_knob figures",
    ),
)
#: the lanes besides Rosetta's fast path (``rosetta bench --lanes default,fast``): the options
#: that make this framework run as it comes, its own plain defaults
LANES = {"default": {"step": "keras"}}  # Keras' own compile + train_on_batch
