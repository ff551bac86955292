"""The reference model: a workload's graph lowered through the NumPy table, interpreted eagerly.

Its native values are NumPy arrays, so both faces of the contract are the same here: a native
batch is a tuple of canonical arrays and ``to_numpy`` is ``np.asarray``.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.numpy_ref import loader, nn, optim, runtime, weights
from rosetta.backends.numpy_ref.layers import Decode
from rosetta.backends.numpy_ref.lowering import TABLE, Ctx
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec.graph import walk
from rosetta.spec.ops import Attention
from rosetta.spec.workload import Workload


class ReferenceModel(Model):
    """A workload interpreted in NumPy: the trusted answer for every other backend."""

    backend = "numpy_ref"
    table = TABLE  # the lowering table (a planted-defect test swaps one entry in a subclass)

    def __init__(self, workload: Workload, params: Params, runtime: Runtime):
        if runtime.dtype not in ("float32", "float64"):
            raise BackendError(
                f"backend 'numpy_ref' supports float32 and float64, not {runtime.dtype!r}"
            )
        self.workload = workload
        self.runtime = runtime
        self.rng = np.random.default_rng(runtime.seed)  # dropout masks, one draw per step
        self.dropout = True  # set_dropout: the gate runs train_step itself with dropout off
        self.trainable = [p.name for p in workload.param_specs if p.trainable]
        self.net = driver.lower(self.table, workload.graph, workload.input.shape, None)
        self.params: Params = {}
        self.set_params(params)

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return loader.native_loader(x, y, order, batch_size, self.dtype)

    def train_step(self, batch: Batch) -> np.ndarray:
        loss, grads = self._loss_and_grads(batch[0], batch[1], training=self.dropout)
        self.optimizer.step(self.params, grads)
        return np.asarray(loss)

    def predict(self, batch: Batch) -> np.ndarray:
        ctx = Ctx(self.params, training=False, rng=self.rng, backward=False)  # no tape
        out, _ = self.net(loader.as_input(batch[0], self.dtype), ctx)
        return out

    def to_numpy(self, value) -> np.ndarray:
        return np.asarray(value)

    # -- generating face -----------------------------------------------------------------------
    GENERATES = True

    def prefill(self, prompts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._decode = Decode()
        return self._generate_step(prompts)

    def decode(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._generate_step(np.asarray(tokens)[:, None])  # (N,) -> (N, 1)

    def _generate_step(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The graph over the positions after those seen (``Ctx.decode``), forward only."""
        ctx = Ctx(self.params, training=False, rng=self.rng, backward=False, decode=self._decode)
        out, _ = self.net(loader.as_input(ids, self.dtype), ctx)  # (N, t, V)
        self._decode.offset += ids.shape[1]
        last = out[:, -1]  # (N, V): the logits at the newest position
        return last, last.argmax(axis=-1)

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        self.params = weights.load(self.workload, params, self.dtype)
        self.optimizer = optim.make_optimizer(self.workload.optimizer)

    def get_params(self) -> Params:
        return weights.read(self.params)

    def _ctx(self, training: bool) -> Ctx:
        return Ctx(self.params, training=training, rng=self.rng)

    def _loss_and_grads(self, x: np.ndarray, y: np.ndarray, training: bool) -> tuple[float, Params]:
        if self.workload.task != "train":
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )
        ctx = self._ctx(training)
        logits, back = self.net(loader.as_input(x, self.dtype), ctx)
        loss, cache = nn.softmax_cross_entropy_forward(logits, np.asarray(y, dtype=np.int64))
        back(nn.softmax_cross_entropy_backward(cache))
        return float(loss), {k: ctx.grads[k] for k in self.trainable}

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        return self._loss_and_grads(x, y, training=False)

    def set_dropout(self, enabled: bool) -> None:
        self.dropout = enabled

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(a) for a in batch)

    def manifest(self) -> dict:
        return {
            **self.runtime_manifest(),
            "device": "cpu",
            "layout": "NCHW" if len(self.workload.input.shape) == 3 else "NTC",
            "blas": runtime.blas_manifest(),
            "compile": "eager (a Python interpreter over the graph, one NumPy call per op)",
            **(
                {
                    "attention": "rosetta.backends.numpy_ref.seq: stable masked softmax, "
                    "written out",
                    "attention_reason": "the reference: every step written out in NumPy",
                }
                if any(
                    isinstance(op, Attention)
                    for op, _, _ in walk(self.workload.graph, self.workload.input.shape)
                )
                else {"attention": "n/a", "attention_reason": "n/a"}
            ),
            "autotune": "n/a",
            "fused_rnn": "n/a (a Python loop over time steps)",
            "loader": "NumPy fancy indexing (np.take) per batch",
            "optimizer": "rosetta.backends.numpy_ref.optim: the spec's rules, written out",
            "gated_program": "ReferenceModel.train_step (dropout off through set_dropout)",
        }


def build(workload: Workload, params: Params, runtime: Runtime) -> ReferenceModel:
    """Interpret ``workload`` in NumPy with ``params`` (canonical names); CPU only."""
    return ReferenceModel(workload, params, runtime)
