"""A workload as a plain ``mindspore.nn.Cell`` with the spec's optimiser: the timed face and the
NumPy face.

The timed face is what a MindSpore user writes (its "functional" training loop): batches from a
``mindspore.dataset`` pipeline, a loss function ``ops.cross_entropy(net(x), y)`` (softmax, mean),
``mindspore.value_and_grad`` over the trainable parameters, the optimiser cell called with the
gradients, the loss returned as a tensor; features with ``net.set_train(False)``. The step and
the forward run through ``mindspore.jit`` (graph mode) by default, measured faster than PyNative,
MindSpore's default mode, on every workload; the option ``jit=off`` runs them in PyNative.
The NumPy face converts only through ``weights.py`` and ``loader.py``.

**The gated program.** ``train_step`` is the timed program and the gate's k steps run through
it: ``set_dropout(False)`` writes 0 into the rate parameter of every :class:`GatedDropout`, which
the same step reads (``lowering.py``).
"""

from __future__ import annotations

import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.mindspore import loader as native
from rosetta.backends.mindspore import optim, weights
from rosetta.backends.mindspore import runtime as settings
from rosetta.backends.mindspore.compat import ms
from rosetta.backends.mindspore.lowering import TABLE, Build, GatedDropout, Graph, LastStepGRU
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

nn, ops = ms.nn, ms.ops


class TrainStep(nn.Cell):
    """One optimiser step as a cell (MindSpore's own form of a training step, what
    ``mindspore.jit`` compiles once): the loss and its gradients by ``value_and_grad``, then the
    optimiser cell; returns the loss at the parameters before the step."""

    def __init__(self, net: nn.Cell, optimizer: nn.Cell, params: list) -> None:
        super().__init__()
        self.net, self.optimizer = net, optimizer
        self.grad = ms.value_and_grad(self.loss, None, params)

    def loss(self, x, y):
        return ops.cross_entropy(self.net(x), y)  # softmax, mean reduction

    def construct(self, x, y, *inputs):
        loss, grads = self.grad(x, y)
        self.optimizer(grads, *inputs)
        return loss


class MindSporeModel(Model):
    """``workload`` lowered to ``mindspore.nn`` (``self.net``), trained with the spec's
    optimiser written in MindSpore ops."""

    backend = "mindspore"

    def __init__(self, workload: Workload, params: Params, runtime: Runtime, *,
                 jit: bool | None = None) -> None:  # fmt: skip
        if runtime.dtype not in ("float32", "float64"):
            raise BackendError(
                f"backend 'mindspore' supports float32 and float64, not {runtime.dtype!r}"
            )
        if runtime.precision != "fp32":
            raise BackendError(
                f"backend 'mindspore' runs precision fp32, not {runtime.precision!r}"
            )
        self.workload = workload
        self.runtime = runtime
        self.target = settings.set_device(runtime.device)
        ms.set_seed(runtime.seed)  # the weights are canonical: the seed drives dropout
        ctx = Build(dtype=runtime.dtype)
        self.net: nn.Cell = driver.lower(TABLE, workload.graph, workload.input.shape, ctx)
        self.dropouts = [c for _, c in self.net.cells_and_names() if isinstance(c, GatedDropout)]
        self.dropout = True
        self.binds = weights.bindings(ctx.owners)
        self.names = [n for n, b in self.binds.items() if b.trainable]
        self.trainable = [self.binds[n].tensor for n in self.names]
        if jit is None:
            self.jit, self.jit_reason = jit_in_effect(
                runtime.option("jit"), workload.task, runtime.dtype
            )
        else:
            self.jit, self.jit_reason = bool(jit), "the build's jit option"
        self._grad = ms.value_and_grad(self._loss, None, self.trainable)  # the NumPy face
        if self.jit:  # graph mode has no ``del``: a Graph cell keeps its values (lowering.py)
            for _, cell in self.net.cells_and_names():
                if isinstance(cell, Graph):
                    cell.free_values = False
        self._forward = ms.jit(self.net) if self.jit else self.net
        self.net.set_train(False)
        self.optimizer = None
        self._step = None
        self.set_params(params)

    # -- helpers -------------------------------------------------------------------------------
    def _loss(self, x, y):
        return ops.cross_entropy(self.net(x), y)  # softmax, mean reduction

    def _trainable(self) -> None:
        if self.optimizer is None:
            raise BackendError(f"workload {self.workload.name!r} is forward-only")

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return native.native_loader(x, y, order, batch_size, self.runtime.dtype)

    def request_batch(self, x: np.ndarray) -> Batch:
        return native.request_batch(x, self.runtime.dtype)

    def train_step(self, batch: Batch) -> ms.Tensor:
        """One optimiser step (the timed program; the gate runs it with dropout rates 0)."""
        self._trainable()
        self.net.set_train(True)
        return self._step(batch[0], batch[1], *self.optimizer.inputs())  # the loss before the step

    def predict(self, batch: Batch) -> ms.Tensor:
        self.net.set_train(False)
        return self._forward(batch[0])

    def sync(self, value=None) -> None:
        ms.runtime.synchronize()

    def to_numpy(self, value) -> np.ndarray:
        return value if isinstance(value, np.ndarray) else np.asarray(value.asnumpy())

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        weights.load(self.binds, params)
        # fresh state: loading weights restarts training. The step built once keeps its compiled
        # graph (mindspore.jit compiles per cell: a new step cell recompiled, 25 s for the GRU),
        # its optimiser's state zeroed in place (the same Parameters the graph reads).
        if self._step is not None:
            self.optimizer.restart()
            return
        self.optimizer = optim.make_optimizer(self.workload.optimizer, self.trainable, self.names)
        if self.optimizer is not None:
            step = TrainStep(self.net, self.optimizer, self.trainable)
            self._step = ms.jit(step) if self.jit else step

    def get_params(self) -> Params:
        return weights.read(self.binds)

    def set_dropout(self, enabled: bool) -> None:
        """Write each dropout's rate (the spec's, or 0) into the parameter the step reads."""
        for d in self.dropouts:
            d.set_rate(d.spec_rate if enabled else 0.0)
        self.dropout = bool(enabled)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Loss and gradients through the timed forward (training mode, dropout rates 0)."""
        self._trainable()
        xb, yb = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        was = self.dropout
        self.set_dropout(False)
        try:
            self.net.set_train(True)
            loss, grads = self._grad(xb, yb)
        finally:
            self.set_dropout(was)
            self.net.set_train(False)
        native = {n: g.asnumpy() for n, g in zip(self.names, grads, strict=True)}
        return float(loss.asnumpy()), weights.grads_to_canonical(self.binds, native)

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return native.to_canonical(batch)

    def summary(self) -> str:
        return str(self.net)

    def manifest(self) -> dict:
        has_gru = any(isinstance(c, LastStepGRU) for _, c in self.net.cells_and_names())
        images = len(self.workload.input.shape) == 3
        if self.optimizer is None:
            gated = "n/a: forward only (the gate compares predict, the timed program itself)"
        else:
            gated = (
                "MindSporeModel.train_step: the same value_and_grad and optimiser call the "
                "timed loop makes, dropout off by writing 0 into every GatedDropout rate"
            )
        return {
            **self.runtime_manifest(),
            "device": settings.device_name(self.device),
            "device_reason": self.runtime.device_reason,
            "layout": "NCHW" if images else "NTC",
            "threads_source": settings.threads_source(),
            "compile": "mindspore.jit (graph mode)" if self.jit else "PyNative (eager)",
            "compile_reason": self.jit_reason,
            "autotune": "n/a",
            "fused_rnn": (
                "no: MindSpore's nn.GRU on the CPU is a loop of GRU cells (its fused kernels are "
                "the GPU's and Ascend's)" if has_gru else "n/a"
            ),  # fmt: skip
            "loader": "mindspore.dataset.GeneratorDataset of whole batches (one worker thread)",
            "optimizer": optim.describe(self.optimizer),
            "dropout": "GatedDropout: inverted dropout, its rate a parameter the step reads",
            "gated_program": gated,
            "mindspore": ms.__version__,
        }


def build(workload: Workload, params: Params, runtime: Runtime, *,
          jit: bool | None = None) -> MindSporeModel:  # fmt: skip
    """Lower ``workload`` to a ``mindspore.nn.Cell`` holding ``params`` (canonical), under
    ``runtime``. ``jit`` (benchmarks and tests only) overrides the backend's option ``jit``."""
    return MindSporeModel(workload, params, runtime, jit=jit)


def jit_in_effect(setting: str, task: str, dtype: str = "float32") -> tuple[bool, str]:
    """Whether a mindspore build runs its step through ``mindspore.jit``, and why: ``on`` and
    ``off`` are the user's; ``default`` is graph mode in float32, measured faster than PyNative
    on every workload (``benchmarks/lowering_mindspore.py`` times both in the same rounds), and
    PyNative in float64, which graph mode trains wrongly here (measured, MindSpore 2.10.0 CPU:
    the cnn's conv2 kernel 5e9x the float64 tolerance off the reference after three steps, the
    transformer's gate failing too, where PyNative passes both); the localiser's probes stay
    PyNative."""
    if task == "probe":
        return False, f"task {task!r}: a diagnostic cut of the graph (the localiser's), not timed"
    if setting == "off":
        return False, "asked for (mindspore.jit off): PyNative"
    if setting == "on":
        return True, "asked for (mindspore.jit on)"
    if dtype != "float32":
        return False, (
            f"default in {dtype}: PyNative (MindSpore's graph mode fails the float64 gate "
            "here)"
        )
    return True, "default: mindspore.jit (graph mode), measured faster than PyNative"
