"""Backend ``chainer``: the spec lowered to a ``chainer.Sequential`` (Chainer 7.8 on NumPy 2).

Each op of the spec is one module of ``ops/``, the Rosetta of Chainer op by op (conv2d ->
``L.Convolution2D``, maxpool2d -> ``F.max_pooling_2d``, dense -> ``L.Linear``, batchnorm ->
``L.BatchNormalization``, embedding -> ``L.EmbedID``, gru -> ``L.NStepGRU``, ...): its ``build``,
its ``render`` (the same as source text) and its canonical <-> Chainer weight conversion side by
side. ``source.py`` finds them (``OPS``) and composes their text; ``lowering.py`` holds the
build context, the links they share and how layers compose; ``weights.py`` loads and reads
parameters through the op modules' conversions; ``optim.py`` ``MomentumSGD`` and ``SpecAdam``;
``loader.py`` Chainer's iterators; ``runtime.py`` NumPy's BLAS threads and the device (NumPy or
CuPy); ``compat.py`` the NumPy-2 compatibility layer every other module imports Chainer through;
``model.py`` the ``Model``; ``codegen.py`` the template of the file ``rosetta code`` writes.
Nothing imports Chainer until ``available()``, ``build()`` or ``run_op()`` is called.
"""

from rosetta.backends.base import BackendAPI
from rosetta.backends.numpy_ref import GEMM_PROBE as NUMPY_GEMM_PROBE

NAME = "chainer"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32",)
#: why a known policy is not in ``PRECISIONS`` (the reason a skipped cell carries)
UNSUPPORTED_PRECISIONS = {
    "bf16": (
        "Chainer computes in its arrays' dtype and has no bfloat16: on the CPU its arrays are "
        "NumPy's (no bfloat16 dtype), and its own mixed precision (chainer.mixed16) is float16 "
        "on CuPy"
    ),
}

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "Chainer"  # its column on the report's Rosetta page
COLOUR = "#CC79A7"  # its colour in the report's charts
GEMM_PROBE = NUMPY_GEMM_PROBE  # Chainer's GEMM is NumPy's (CPU)
