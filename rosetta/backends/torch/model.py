"""A workload as a plain ``nn.Module`` with ``torch.optim``: the timed face and the NumPy face.

The timed face is what a PyTorch user writes: batches from a ``DataLoader`` already on the
device, ``zero_grad(set_to_none=True)``, forward, ``F.cross_entropy`` (mean), ``backward``,
``optimizer.step()``, the loss returned as a tensor (no host read-back); features under
``torch.inference_mode()``. The NumPy face converts only through ``params.py`` and ``loader.py``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.torch import fastpath, lower
from rosetta.backends.torch import loader as native
from rosetta.backends.torch import params as weights
from rosetta.errors import BackendError
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import SGD, Adam, Workload

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class TorchModel(Model):
    """``workload`` lowered to ``torch.nn`` (``self.net``), trained with ``torch.optim``."""

    backend = "torch"

    def __init__(
        self,
        workload: Workload,
        params: Params,
        *,
        dtype: str = "float32",
        device: str = "cpu",
        seed: int = 0,
        compile: bool | None = None,
        layout: str | None = None,
    ) -> None:
        if dtype not in TORCH_DTYPES:
            raise BackendError(f"backend 'torch' supports float32 and float64, not {dtype!r}")
        self.workload = workload
        self.dtype = dtype
        self.device = device
        self.threads = fastpath.set_threads()
        self.cuda_settings = fastpath.setup_cuda() if device == "cuda" else {}
        torch.manual_seed(seed)  # dropout masks (the global generator, as a user's script)
        self.images = len(workload.input.shape) == 3
        self.layout = fastpath.memory_format(workload.name, device, layout) if self.images else ""
        fmt = torch.channels_last if self.layout == "NHWC" else torch.contiguous_format
        self.place = native.Placement(torch.device(device), TORCH_DTYPES[dtype], fmt)

        net = lower.build_net(workload.graph, workload.input.shape)  # raises on unknown ops
        self.net: nn.Sequential = net.to(device=self.place.device, dtype=self.place.dtype)
        if self.layout == "NHWC":
            self.net = self.net.to(memory_format=torch.channels_last)
        self.batchnorms = [
            m for m in self.net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
        ]
        self.binds = weights.bindings(lower.param_owners(workload.graph, self.net))
        self.compiled = fastpath.compile_wanted(compile)
        self.forward = torch.compile(self.net) if self.compiled else self.net
        self._training: bool | None = None
        self._mode(False)
        self.optimizer: torch.optim.Optimizer | None = None
        self.set_params(params)

    # -- helpers -------------------------------------------------------------------------------
    def _mode(self, training: bool) -> None:
        """Dropout on/off; BatchNorm stays in eval (the spec's inference-mode BatchNorm)."""
        if training != self._training:
            self.net.train(training)
            for bn in self.batchnorms:
                bn.eval()
            self._training = training

    def _make_optimizer(self) -> torch.optim.Optimizer | None:
        o = self.workload.optimizer
        trainable = [b.tensor for b in self.binds.values() if b.trainable]
        foreach = self.device == "cuda"  # PyTorch's own default: foreach on CUDA, loop on CPU
        if isinstance(o, SGD):
            return torch.optim.SGD(
                trainable, lr=o.lr, momentum=o.momentum, nesterov=o.nesterov, foreach=foreach
            )
        if isinstance(o, Adam):
            # torch.optim.Adam is Algorithm 1: lr * m_hat / (sqrt(v_hat) + eps), the spec's rule
            # (checked in float64 against numpy_ref.optim by tests/test_backend_torch.py)
            return torch.optim.Adam(
                trainable, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.eps, foreach=foreach
            )
        return None

    def _numpy_batch(self, x: np.ndarray, y: np.ndarray | None) -> Batch:
        return next(iter(self.loader(x, y, np.arange(len(x)), len(x))))

    def _loss(self, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(self.forward(batch[0]), batch[1])  # mean reduction

    def _step(self, batch: Batch) -> torch.Tensor:
        if self.optimizer is None:
            raise BackendError(f"workload {self.workload.name!r} is forward-only")
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(batch)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return native.native_loader(x, y, order, batch_size, self.place)

    def train_step(self, batch: Batch) -> torch.Tensor:
        self._mode(True)
        return self._step(batch)

    def predict(self, batch: Batch) -> torch.Tensor:
        self._mode(False)
        with torch.inference_mode():
            return self.forward(batch[0])

    def sync(self, value=None) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize(self.place.device)

    def to_numpy(self, value) -> np.ndarray:
        return value.detach().to("cpu").numpy()

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        weights.load(self.binds, params)
        self.optimizer = self._make_optimizer()  # fresh state: loading weights restarts training

    def get_params(self) -> Params:
        return weights.read(self.binds)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        if self.optimizer is None:
            raise BackendError(f"workload {self.workload.name!r} is forward-only")
        self._mode(False)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(self._numpy_batch(x, y))
        loss.backward()
        grads = weights.read_grads(self.binds)
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.item()), grads

    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        batch = self._numpy_batch(x, y)
        self._mode(False)
        for _ in range(k):
            self._step(batch)
        return self.get_params()

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return native.to_canonical(batch)

    def summary(self) -> str:
        return str(self.net)

    def peak_device_memory_bytes(self) -> int | None:
        """Peak CUDA memory allocated by this process, or None on the CPU."""
        if self.device != "cuda":
            return None
        return int(torch.cuda.max_memory_allocated(self.place.device))

    def manifest(self) -> dict:
        cuda = self.device == "cuda"
        device = f"cuda ({torch.cuda.get_device_name(self.place.device)})" if cuda else "cpu"
        has_gru = any(isinstance(m, nn.GRU) for m in self.net.modules())
        if self.images:
            layout = "NHWC (channels_last)" if self.layout == "NHWC" else "NCHW"
        else:
            layout = "NTC (batch_first=True)"
        opt = self.optimizer
        if opt is None:
            optimizer = "n/a (forward only, torch.inference_mode())"
        else:
            flags = {
                k: opt.defaults.get(k)
                for k in ("foreach", "fused", "nesterov")
                if k in opt.defaults
            }
            optimizer = f"torch.optim.{type(opt).__name__} {flags}; the spec's rule, no deviation"
        return {
            "backend": self.backend,
            "device": device,
            "dtype": self.dtype,
            "layout": layout,
            "threads": self.threads[0],
            "interop_threads": self.threads[1],
            "compile": "torch.compile (inductor)" if self.compiled else "eager",
            "autotune": "cudnn.benchmark=True" if cuda else "n/a",
            "tf32": self.cuda_settings.get("tf32", "n/a"),
            "fused_rnn": _fused_rnn(cuda) if has_gru else "n/a",
            "loader": (
                "torch.utils.data.DataLoader(TensorDataset, batch sampler over the runner's "
                f"order, batch_size=None, num_workers={native.NUM_WORKERS}, "
                f"pin_memory={cuda}){', non_blocking copies one batch ahead' if cuda else ''}"
            ),
            "optimizer": optimizer,
            "features": "torch.inference_mode()",
            "torch": torch.__version__,
        }


def _fused_rnn(cuda: bool) -> str:
    if cuda and torch.backends.cudnn.is_available():
        return "yes: nn.GRU -> cuDNN fused GRU"
    return "yes: nn.GRU -> ATen's C++ GRU (one op over all steps, no Python loop)"
