"""Backend ``chainer``: the spec lowered to a ``chainer.Sequential`` (Chainer 7.8 on NumPy 2).

``lowering.py`` is the Rosetta of Chainer (op -> ``L.Convolution2D``, ``F.max_pooling_2d``,
``L.Linear``, ``L.BatchNormalization``, ``L.EmbedID``, ``L.NStepGRU``, ...); ``weights.py`` the
canonical <-> Chainer layouts; ``optim.py`` ``MomentumSGD`` and ``SpecAdam``; ``loader.py``
Chainer's iterators; ``runtime.py`` NumPy's BLAS threads and the device (NumPy or CuPy);
``compat.py`` the NumPy-2 compatibility layer every other module imports Chainer through;
``model.py`` the ``Model``. Nothing imports Chainer until ``available()``, ``build()`` or
``run_op()`` is called.
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
