"""Backend ``tensorflow``: the spec lowered to a Keras 3 model on TensorFlow.

Its ops are the Keras op modules every engine shares (``rosetta/backends/keras_common/ops/``:
spec op -> Keras layer, its source line and its weight layout), taken whole by ``source.py`` as
this backend's op table; ``lowering.py`` is that table's native face and ``apply_op``,
``weights.py`` the bindings that move weights across, ``optim.py`` the spec's optimisers,
``loader.py`` the ``tf.data`` pipeline, ``model.py`` the two faces of the contract with the
measured fast-path choices, and ``runtime.py`` the process settings (it selects Keras' TensorFlow
backend; importing it imports TensorFlow). Importing this package imports no framework.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.options import Option

NAME = "tensorflow"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: Keras mixed_bfloat16 per layer (model.py)

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "Keras"  # its column on the report's Rosetta page
COLOUR = "#56B4E9"  # its colour in the report's charts
#: the peak probe: (framework, a script timing an NxN matmul, fp32 and bf16) -> run.json
GEMM_PROBE = (
    "tensorflow",
    """
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
out = {}
for name, dt in (("fp32", tf.float32), ("bf16", tf.bfloat16)):
    a = tf.cast(tf.random.uniform((N, N)), dt); b = tf.cast(tf.random.uniform((N, N)), dt)
    out[name] = flop / best(lambda: tf.matmul(a, b).numpy()) / 1e9
print(json.dumps(out))
""",
)

#: the framework's own settings (rosetta.backends.options), set by
#: ``rosetta bench --option tensorflow.xla=VALUE``
OPTIONS = (
    Option(
        "xla",
        ("default", "on", "off"),
        "default",
        "XLA (jit_compile) on the train and predict steps: default chooses by the graph (on for "
        "a GRU on the CPU, off for convolutions and attention), on and off force it",
        "model.choose says why for each graph (benchmarks/lowering_tensorflow --xla)",
    ),
)
#: the lanes besides Rosetta's fast path (``rosetta bench --lanes default,fast``): the options
#: that make this framework run as it comes, its own plain defaults
LANES = {"default": {"xla": "off"}}  # tf.function without XLA, TensorFlow's own default
