"""``PyTensorModel``: a workload as compiled PyTensor functions over ``shared`` parameters.

The graph is lowered once into symbolic layers (``lowering.py``); three programs are compiled
from it with the linker of the runtime (``runtime.resolve_linker``), each on first use and then
kept for the life of the model (PyTensor's functions take any batch size, so one compile serves
every batch):

- ``train``: the training forward (dropout drawn from the model's ``RandomStream``), softmax
  cross-entropy (mean), ``pytensor.grad`` of every trainable parameter and the optimiser as the
  function's ``updates`` (``optim.py``): one call is one step, the parameters and the optimiser
  state updated in place, the loss returned. Dropout is switched by a ``shared`` scalar the
  function reads (``set_dropout``): the gate's k steps run this very function with it off;
- ``grads``: the same forward and loss with the gradients returned instead of applied
  (``loss_and_grads``, dropout switched off the same way);
- ``predict``: the evaluation forward.

``compile_log`` records each compilation with its seconds (reported in the manifest as
``compile_s``; it lands in the cell's cold start and, for the gate, outside every clock).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params, hwc_flatten_at_output
from rosetta.backends.pytensor import loader as native
from rosetta.backends.pytensor import lowering, optim
from rosetta.backends.pytensor import runtime as settings
from rosetta.backends.pytensor.weights import (
    ParamLayout,
    flat_to_canonical,
    image_to_canonical,
)
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

settings.load()
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy of ``logits`` (N, K) against integer ``labels`` (N,)."""
    logp = pt.special.log_softmax(logits, axis=-1)
    # rows indexed by the labels' own length: ``arange(logits.shape[0])`` beside ``labels`` made
    # PyTensor check at every step that the two lengths broadcast (an Assert and 5 more nodes)
    return -pt.mean(logp[pt.arange(labels.shape[0]), labels])


class PyTensorModel(Model):
    """A workload as compiled PyTensor functions (see the module docstring)."""

    backend = "pytensor"

    def __init__(self, workload: Workload, params: Params, runtime: Runtime) -> None:
        if runtime.dtype not in ("float32", "float64"):
            raise BackendError(
                f"backend 'pytensor' supports float32 and float64, not {runtime.dtype!r}"
            )
        self.workload = workload
        self.runtime = runtime
        self.linker = settings.resolve_linker(runtime.option("linker"))
        self._mode = settings.mode(self.linker, runtime.threads)
        self.images = len(workload.input.shape) == 3
        self._ctx = lowering.Ctx(runtime.dtype, seed=runtime.seed)
        self._forward = driver.lower(
            lowering.TABLE, workload.graph, workload.input.shape, self._ctx
        )  # an unknown op raises here, before anything is compiled
        self._playout = ParamLayout.for_workload(workload)
        self._shared = self._ctx.params
        self._trainable = [p.name for p in workload.param_specs if p.trainable]
        in_dtype = "int32" if workload.input.dtype == "int32" else runtime.dtype
        self._x = lowering.input_variable(workload.input.shape, in_dtype)
        self._y = pt.vector("y", dtype="int64")
        self._state = optim.State(())
        self._opt_desc = "n/a (forward only)"
        self._graphs: dict[str, tuple[list, list, list]] = {}
        if workload.task == "train":
            self._training_graphs()
        self._graphs["predict"] = ([self._x], [self._forward(self._x, lowering.Run(False))], [])
        self._fns: dict[str, Any] = {}
        self.compile_log: list[tuple[str, float]] = []
        self.set_params(params)

    def _training_graphs(self) -> None:
        run = lowering.Run(True, [])
        logits = self._forward(self._x, run)
        loss = softmax_cross_entropy(logits, self._y)
        params = [self._shared[n] for n in self._trainable]
        grads = pytensor.grad(loss, params)
        updates, self._state, self._opt_desc = optim.updates(
            self.workload.optimizer, params, grads, self.runtime.dtype
        )
        xy = [self._x, self._y]
        draws = list(run.update(self._ctx).items())  # the dropout generator's next state
        self._graphs["train"] = (xy, [loss], [*updates, *draws])
        self._graphs["grads"] = (xy, [loss, *grads], draws)

    def _fn(self, name: str) -> Any:
        """The compiled program ``name``, compiled on first use and kept."""
        fn = self._fns.get(name)
        if fn is None:
            if name not in self._graphs:
                raise BackendError(f"workload {self.workload.name!r} is forward-only")
            inputs, outputs, updates = self._graphs[name]
            t0 = time.perf_counter()
            fn = pytensor.function(inputs, outputs, updates=updates, mode=self._mode, name=name)
            self.compile_log.append((name, time.perf_counter() - t0))
            self._fns[name] = fn
        return fn

    @property
    def compile_count(self) -> int:
        """How many programs were compiled so far (constant in a steady state)."""
        return len(self.compile_log)

    # -- the timed face ----------------------------------------------------------------------
    def loader(
        self, x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int
    ) -> Iterable[Batch]:
        return native.host_batches(x, y, order, batch_size, dtype=self.dtype)

    def train_step(self, batch: Batch) -> Any:
        (loss,) = self._fn("train")(batch[0], batch[1])
        return loss  # a 0-d ndarray: the loss at the parameters before this step

    def predict(self, batch: Batch) -> Any:
        (out,) = self._fn("predict")(batch[0])
        return out

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def set_dropout(self, enabled: bool) -> None:
        """Write 1 (the spec's rates) or 0 (every unit kept, scale 1) into the shared switch
        the compiled step reads: the same function runs either way."""
        self._ctx.dropout_on.set_value(np.asarray(1 if enabled else 0, dtype=self.dtype))

    # -- the NumPy face ----------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        for name, var in self._shared.items():
            var.set_value(self._playout.native(name, np.asarray(params[name]), self.dtype))
        self._state.reset()  # fresh optimiser state: loading weights restarts training

    def get_params(self) -> Params:
        return {
            n: self._playout.canonical(n, v.get_value(borrow=True)) for n, v in self._shared.items()
        }

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        xb, yb = native.native_batch(x, y, self.dtype)
        on = bool(self._ctx.dropout_on.get_value())
        self.set_dropout(False)
        try:
            loss, *grads = self._fn("grads")(xb, yb)
        finally:
            self.set_dropout(on)
        return float(loss), {
            n: self._playout.canonical(n, np.asarray(g))
            for n, g in zip(self._trainable, grads, strict=True)
        }

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return native.to_canonical(batch)

    def output_to_canonical(self, out: np.ndarray) -> np.ndarray:
        """NHWC images -> (N, C, H, W); an NHWC flatten's H, W, C rows -> C, H, W; a time-major
        sequence (T, N, E) (the embedding's output) -> (N, T, E)."""
        chw = hwc_flatten_at_output(self.workload, True)
        if chw is not None:
            return flat_to_canonical(out, chw)
        if out.ndim == 4:
            return image_to_canonical(out)
        if out.ndim == 3:
            return np.ascontiguousarray(out.transpose(1, 0, 2))  # (T, N, E) -> (N, T, E)
        return out

    # -- what ran ------------------------------------------------------------------------------
    def ops_run(self) -> dict:
        """Per compiled function, how many of its ops run as C thunks and which run Python's
        ``perform`` (by op): read off the function's VM, not assumed. With no BLAS linked (a pip
        install) PyTensor's ``Dot22``, ``BatchedDot`` and ``Softmax`` fall back to ``perform``:
        13, 4 and 2 of the transformer's 192 predict thunks. The Numba linker has no C thunks."""
        from collections import Counter

        if self.linker.name != "cvm":
            return {"all": f"compiled by {self.linker.name}: no C or Python thunks to count"}
        out = {}
        for name, fn in self._fns.items():
            thunks = getattr(getattr(fn, "vm", None), "thunks", None)
            if thunks is None:
                continue
            nodes = fn.maker.fgraph.toposort()
            python = Counter(
                type(n.op).__name__ for n, t in zip(nodes, thunks, strict=False)
                if not hasattr(t, "cthunk")
            )  # fmt: skip
            out[name] = {"c": len(thunks) - sum(python.values()), "python": dict(python)}
        return out

    def manifest(self) -> dict:
        s = settings.settings()
        has_gru = any(n.endswith(".recurrent_kernel") for n in self._shared)
        has_attention = any(n.endswith(".query_kernel") for n in self._shared)
        linker = {
            "cvm": "C ops (compiled by the C++ compiler) under PyTensor's C VM",
            "numba": "each op and the loop between them compiled by Numba (LLVM)",
        }[self.linker.name]
        return {
            **self.runtime_manifest(),
            "device": "cpu",
            "device_reason": self.runtime.device_reason,
            "layout": (
                "NHWC (HWIO kernels)"
                if self.images
                else "NT ids -> TNC (time-major: the scan's order, every sequence op's)"
            ),
            "compile": f"pytensor.function, linker {self.linker.name} ({linker}), FAST_RUN",
            "linker": self.linker.name,
            "linker_reason": self.linker.reason,
            "compiler": s["compiler"],
            "compiledir": s["compiledir"],
            "blas": s["blas"],
            "ops_run": self.ops_run(),
            "attention": (
                "composed in PyTensor ops: projections as one dot each, batched matmul "
                "(BatchedDot) over (N, heads), pt.special.softmax (max subtracted) over the key "
                "padding mask (switch), rows of padding only zeroed"
                if has_attention
                else "n/a"
            ),
            "autotune": "n/a",
            "fused_rnn": "no: pytensor scan over time, one dot per step" if has_gru else "n/a",
            "conv": (
                "im2col in PyTensor ops: KH*KW strided taps concatenated, one dot (PyTensor 3 "
                "has no CNN convolution op)"
                if self.images
                else "n/a"
            ),
            "loader": "host batches (np.take, NHWC, model dtype): PyTensor's inputs are ndarrays",
            "optimizer": self._opt_desc,
            "gated_program": (
                "the compiled 'train' function train_step calls (loss, pytensor.grad, optimiser "
                "updates), dropout off through the shared dropout_on switch it reads; toggling "
                "compiles nothing"
                if self.workload.task == "train"
                else "n/a: forward only (the gate compares predict, the timed program itself)"
            ),
            "precision_mode": f"fp32: {self.dtype} throughout",
            "dropout_rng": f"pt.random.shared_rng(seed={self.runtime.seed}), threaded site to site",
            "compile_s": {name: round(sec, 3) for name, sec in self.compile_log},
            "compile_count": self.compile_count,
            "pytensor": pytensor.__version__,
        }

    def summary(self) -> str:
        """Parameters (native shapes, conversions) and the ops of the compiled forward."""
        lines = [f"PyTensor model {self.workload.name}: {self.dtype}, linker {self.linker.name}"]
        lines.append(f"{'parameter':<34} {'native shape':<20} conversion")
        for n, v in self._shared.items():
            shape = str(tuple(v.get_value(borrow=True).shape))
            lines.append(f"{n:<34} {shape:<20} {self._playout.description.get(n, '')}")
        counts: dict[str, int] = {}
        for node in self._fn("predict").maker.fgraph.apply_nodes:
            name = type(node.op).__name__
            counts[name] = counts.get(name, 0) + 1
        lines.append(f"compiled forward: {sum(counts.values())} apply nodes")
        lines.append(", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
        return "\n".join(lines)


def build(workload: Workload, params: Params, runtime: Runtime) -> PyTensorModel:
    """Lower ``workload`` to PyTensor graphs holding ``params`` (canonical names) under the
    resolved ``runtime``; the programs compile on first use, with the runtime's linker."""
    return PyTensorModel(workload, params, runtime)
