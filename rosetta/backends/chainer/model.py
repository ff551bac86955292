"""A workload lowered to a ``chainer.Sequential``: the two faces of the backend contract.

The timed face runs the lowered chain the way a Chainer user's loop does: forward, loss,
``cleargrads``, ``loss.backward()``, ``optimizer.update()``, with Chainer's ``type_check`` off;
``predict`` runs in test mode under ``no_backprop_mode``. The NumPy face converts canonical
arrays at the boundary (``weights.py``) and keeps ``type_check`` on.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.base import THREADS_ENV, Batch, Model, Params, threads_setting
from rosetta.backends.chainer import compat, device, loader, lowering, optim, threads, weights
from rosetta.errors import BackendError
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

chainer = compat.load()
F = chainer.functions


class ChainerModel(Model):
    """``workload`` as a Chainer ``Sequential`` (``self.net``) on a CPU (NumPy) or GPU (CuPy)."""

    backend = "chainer"

    def __init__(self, workload: Workload, params: Params, dtype: str, placement) -> None:
        if dtype not in ("float32", "float64"):
            raise BackendError(f"backend 'chainer' supports float32 and float64, not {dtype!r}")
        self.workload = workload
        self.dtype = dtype
        self.placement = placement
        self.tokens = workload.input.dtype == "int32"  # token ids: time-major in Chainer
        self.device = placement.kind
        threads.apply()  # $ROSETTA_THREADS, also where NumPy was loaded before the runner's env
        for node, _, _ in walk(workload.graph, workload.input.shape):
            if type(node) not in lowering.LOWERINGS:
                raise lowering.unsupported(self.backend, node)
        self.net = lowering.build_chain(workload.graph, workload.input.shape, dtype)
        self.net.to_device(placement.device)
        self.layers = list(lowering.named_layers(workload.graph, self.net))
        self.trainable = [p.name for p in workload.param_specs if p.trainable]
        self.optimizer = None
        self.type_check = False  # in timed steps (see device.py); the NumPy face keeps it on
        self.set_params(params)

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return loader.native_batches(
            x, y, order, batch_size, float_dtype=self.dtype, device=self.placement.device
        )

    def _loss(self, x, t):
        return F.softmax_cross_entropy(self.net(x), t)  # mean over the batch

    def _step(self, x, t):
        loss = self._loss(x, t)
        self.net.cleargrads()
        loss.backward()
        self.optimizer.update()
        return loss

    def train_step(self, batch: Batch):
        self._need_training()
        with device.step_config(self.placement, train=True, type_check=self.type_check):
            return self._step(batch[0], batch[1]).array  # 0-d array, left on the device

    def predict(self, batch: Batch):
        cfg = device.step_config(
            self.placement, train=False, backprop=False, type_check=self.type_check
        )
        with cfg:
            return self.net(batch[0]).array

    def sync(self, value=None) -> None:
        if self.placement.kind == "cuda":
            from chainer.backends import cuda

            cuda.cupy.cuda.Device().synchronize()  # every queued kernel, any stream

    def to_numpy(self, value) -> np.ndarray:
        return np.asarray(chainer.backend.CpuDevice().send(value))

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        for op, link in self.layers:
            for path, value in weights.to_native(op, params).items():
                target = weights.attribute(link, path)
                array = target.array if isinstance(target, chainer.Variable) else target
                if array.shape != value.shape:
                    raise BackendError(
                        f"chainer: {op.name} {path} is {array.shape}, got {value.shape}"
                    )
                array[...] = self.placement.device.send(np.asarray(value, dtype=self.dtype))
        self.optimizer = optim.make_optimizer(self.workload)  # fresh state
        if self.optimizer is not None:
            self.optimizer.setup(self.net)

    def _read(self, link, grad: bool):
        def read(path: str) -> np.ndarray:
            target = weights.attribute(link, path)
            if isinstance(target, chainer.Variable):
                target = target.grad if grad else target.array
            return np.array(chainer.backend.CpuDevice().send(target))  # a host copy

        return read

    def get_params(self) -> Params:
        out: Params = {}
        for op, link in self.layers:
            out.update(weights.to_canonical(op, self._read(link, grad=False)))
        return out

    def _native(self, x: np.ndarray, y: np.ndarray | None = None) -> tuple:
        return next(iter(self.loader(x, y, np.arange(len(x)), len(x))))

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        self._need_training()
        xb, tb = self._native(x, y)
        with device.step_config(self.placement, train=False, type_check=True):
            loss = self._loss(xb, tb)
            self.net.cleargrads()
            loss.backward()
        grads: Params = {}
        for op, link in self.layers:
            grads.update(weights.to_canonical(op, self._read(link, grad=True)))
        return float(self.to_numpy(loss.array)), {k: grads[k] for k in self.trainable}

    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        self._need_training()
        xb, tb = self._native(x, y)
        with device.step_config(self.placement, train=False, type_check=True):
            for _ in range(k):
                self._step(xb, tb)
        return self.get_params()

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        arrays = [self.to_numpy(a) for a in batch]
        if self.tokens:
            arrays[0] = arrays[0].T  # time-major (T, N) -> canonical (N, T)
        return tuple(arrays)

    def _need_training(self) -> None:
        if self.workload.task != "train" or self.optimizer is None:
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )

    # -- description ---------------------------------------------------------------------------
    def manifest(self) -> dict:
        has_gru = any(isinstance(op, ops.GRU) for op, _ in self.layers)
        cuda = self.placement.kind == "cuda"
        blas = threads.current()
        return {
            "backend": self.backend,
            "device": self.placement.name,
            "dtype": self.dtype,
            "layout": "TNC (time-major)" if self.tokens else "NCHW",
            "threads": (
                f"{blas} (NumPy's OpenBLAS threads: $OPENBLAS/OMP_NUM_THREADS set by the runner "
                f"before NumPy loads; ${THREADS_ENV}={threads_setting()} applied in-process)"
                if blas is not None
                else f"BLAS default (${THREADS_ENV}={threads_setting()})"
            ),
            "compile": "define-by-run (eager); chainer.config.type_check off in timed steps",
            "autotune": "cuDNN use_cudnn=always, autotune=True" if cuda else "n/a",
            "fused_rnn": (
                (
                    "cuDNN fused GRU (F.n_step_gru)"
                    if cuda
                    else "no: F.n_step_gru's CPU path loops over time steps in Python"
                )
                if has_gru
                else "n/a"
            ),
            "loader": "chainer.iterators.SerialIterator + concat_examples + to_device",
            "optimizer": optim.describe(self.workload),
            "compat": compat.applied(),
        }

    def summary(self) -> str:
        lines = [str(self.net), "", "parameters (Chainer's names, shapes, dtype):"]
        total = 0
        for name, param in self.net.namedparams():
            lines.append(f"  {name:<40} {tuple(param.shape)!s:<20} {param.dtype}")
            total += param.size
        lines.append(f"  total: {total:,} parameters")
        return "\n".join(lines)

    def peak_device_memory_bytes(self) -> int | None:
        """CuPy's memory pool size on a GPU (it only grows: the peak held); None on the CPU."""
        if self.placement.kind != "cuda":
            return None
        from chainer.backends import cuda

        return int(cuda.cupy.get_default_memory_pool().total_bytes())
