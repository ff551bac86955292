"""Backend ``torch``: the spec lowered to ``torch.nn``, trained with ``torch.optim``.

``lower.py`` is the Rosetta of PyTorch (op -> ``nn`` module), ``params.py`` every weight
conversion, ``loader.py`` the ``DataLoader``, ``fastpath.py`` the measured fast-path choices,
``model.py`` the ``Model`` with its two faces. PyTorch is imported only when this backend is
used (``available()`` tries it), never by the core.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np

from rosetta.backends.base import PARAM_FREE_OPS, Params, unsupported
from rosetta.errors import BackendError
from rosetta.spec.workload import Workload

NAME = "torch"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")


def available() -> tuple[bool, str]:
    """Whether ``import torch`` works here, and why not."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return False, f"torch does not import: {exc}"
    return True, ""


def versions() -> dict[str, str]:
    """torch's version (and CUDA/cuDNN where built with them)."""
    import torch

    out = {"torch": torch.__version__}
    if torch.version.cuda:
        out["cuda"] = str(torch.version.cuda)
        out["cudnn"] = str(torch.backends.cudnn.version())
    try:
        out["numpy"] = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        pass
    return out


def cuda_available() -> bool:
    """Whether PyTorch sees a CUDA GPU."""
    import torch

    return bool(torch.cuda.is_available())


def build(
    workload: Workload,
    params: Params,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    compile: bool | None = None,
    layout: str | None = None,
):
    """Lower ``workload`` to an ``nn.Module`` on ``device`` holding ``params`` (canonical).

    ``compile`` (default ``$ROSETTA_TORCH_COMPILE`` or eager) wraps the module in
    ``torch.compile``; ``layout`` (``NCHW``/``NHWC``) overrides the measured CPU memory format."""
    from rosetta.backends.torch.model import TorchModel

    if device not in DEVICES:
        raise BackendError(f"backend 'torch' runs on {', '.join(DEVICES)}, not {device!r}")
    return TorchModel(
        workload, params, dtype=dtype, device=device, seed=seed, compile=compile, layout=layout
    )


def run_op(
    op: object,
    x: np.ndarray,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    training: bool = False,
) -> np.ndarray:
    """One parameter-free op through the lowering table, NumPy in and out."""
    import torch

    from rosetta.backends.torch.lower import lower_op
    from rosetta.backends.torch.model import TORCH_DTYPES

    if not isinstance(op, PARAM_FREE_OPS):
        raise unsupported(NAME, op)
    x = np.asarray(x)
    module = lower_op(op, tuple(x.shape[1:]), at_input=True).train(training)
    torch.manual_seed(seed)
    xt = torch.as_tensor(x, dtype=TORCH_DTYPES[dtype], device=device)
    with torch.no_grad():
        return module(xt).to("cpu").numpy()
