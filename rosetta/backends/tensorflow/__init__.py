"""Backend ``tensorflow``: the spec lowered to a Keras 3 model on TensorFlow.

``lowering.py`` is the Rosetta of Keras (spec op -> Keras layer), ``weights.py`` every layout
conversion, ``optim.py`` the spec's optimisers, ``loader.py`` the ``tf.data`` pipeline,
``model.py`` the two faces of the contract with the measured fast-path choices, and
``runtime.py`` the process settings (it selects Keras' TensorFlow backend; importing it imports
TensorFlow). Importing this package imports no framework.
"""

from rosetta.backends.base import BackendAPI

NAME = "tensorflow"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: Keras mixed_bfloat16 per layer (model.py)

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op
