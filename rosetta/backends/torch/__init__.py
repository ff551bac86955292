"""Backend ``torch``: the spec lowered to ``torch.nn``, trained with ``torch.optim``.

``lowering.py`` is the Rosetta of PyTorch (op -> ``nn`` module), ``weights.py`` every weight
conversion, ``loader.py`` the ``DataLoader``, ``optim.py`` the spec's optimisers as
``torch.optim``, ``runtime.py`` the process settings (threads, TF32, cuDNN autotune),
``model.py`` the ``Model`` with its two faces and the measured fast-path choices. PyTorch is
imported only when this backend is used, never by the core.
"""

from rosetta.backends.base import BackendAPI

NAME = "torch"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: torch.autocast (model.py), CPU and CUDA

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op
