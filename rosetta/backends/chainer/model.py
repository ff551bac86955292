"""A workload lowered to a ``chainer.Sequential``: the two faces of the backend contract.

Both faces run one step function, the way a Chainer user's loop does: forward, loss,
``cleargrads``, ``loss.backward()``, ``optimizer.update()``, under one Chainer configuration
(``runtime.step_config``: ``type_check`` off). The gate's k steps go through ``train_step``
itself (the base class's ``deterministic_steps``) with dropout's rate set to 0 inside that same
step (``set_dropout``); Chainer is define-by-run, so there is no trace or compiled program to
keep apart. Dropout masks come from the model's own generator, seeded with ``runtime.seed``.
``predict`` runs in test mode without building a graph. Canonical arrays are converted at the
boundary (``weights.py``). A decoder generates (``prefill``/``decode``) eagerly in test mode
without a graph: each causal attention keeps a static KV cache of the whole context, allocated at
the prefill and written at the offset (``lowering.Decoding``), so a decode step runs one position.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.chainer import compat, loader, lowering, optim, weights
from rosetta.backends.chainer import runtime as rt
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

chainer = compat.load()
F = chainer.functions


class ChainerModel(Model):
    """``workload`` as a Chainer ``Sequential`` (``self.net``) on a CPU (NumPy) or GPU (CuPy)."""

    backend = "chainer"

    def __init__(
        self, workload: Workload, params: Params, runtime: Runtime, *, type_check: bool = False
    ) -> None:
        if runtime.dtype not in ("float32", "float64"):
            raise BackendError(
                f"backend 'chainer' supports float32 and float64, not {runtime.dtype!r}"
            )
        self.workload = workload
        self.runtime = runtime
        self.placement = rt.place(runtime.device)
        self.type_check = type_check  # Chainer's per-call input checks (benchmarks only)
        self.tokens = workload.input.dtype == "int32"  # token ids: time-major in Chainer
        self.switch = lowering.DropoutSwitch(rt.uniform_source(self.placement, runtime.seed))
        ctx = lowering.Ctx(runtime.dtype, self.switch)
        with chainer.using_config("dtype", np.dtype(runtime.dtype)):  # parameters in dtype
            self.net = driver.lower(lowering.TABLE, workload.graph, workload.input.shape, ctx)
        self.net.to_device(self.placement.device)
        self.owners = ctx.owners  # (op, link) of every parameter-owning op
        self.decoding = ctx.decoding  # generating: shared by positions and causal attentions
        self.layout = ctx.layout  # token sequences time-major, or batch-major (attention)
        self.trainable = [p.name for p in workload.param_specs if p.trainable]
        self.optimizer = None
        self.set_params(params)

    def _config(self, *, train: bool, backprop: bool = True):
        return rt.step_config(
            self.placement, train=train, backprop=backprop, type_check=self.type_check
        )

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return loader.native_batches(
            x, y, order, batch_size, float_dtype=self.dtype, device=self.placement.device
        )

    def _loss(self, x, t):
        return softmax_cross_entropy(self.net(x), t)

    def train_step(self, batch: Batch):
        self._need_training()
        with self._config(train=True):
            loss = self._loss(batch[0], batch[1])
            self.net.cleargrads()
            loss.backward()
            self.optimizer.update()
        return loss.array  # 0-d array, left on the device

    def predict(self, batch: Batch):
        with self._config(train=False, backprop=False):
            return self.net(batch[0]).array

    # -- generating face -----------------------------------------------------------------------
    GENERATES = True

    def prefill(self, prompts: np.ndarray):
        """The forward over every prompt position, each causal attention's keys and values
        written into its static cache (the model's whole context, allocated here)."""
        ids = np.asarray(prompts, dtype=np.int32).T  # (N, P) -> time-major (P, N), the loader's
        self.decoding.start(capacity=self.workload.input.shape[0])  # the model's context
        return self._generate_step(self.placement.device.send(np.ascontiguousarray(ids)))

    def decode(self, tokens):
        """One new position per sample: ``tokens`` (N,) (native or NumPy) read at the offset."""
        ids = self.placement.device.send(tokens).astype(np.int32, copy=False)
        return self._generate_step(ids[None, :])  # (N,) -> time-major (1, N)

    def _generate_step(self, ids):
        """The network over the positions after those seen (time-major ids (t, N)), in test
        mode without a graph; returns the newest position's logits (N, V) and its argmax (N,)."""
        self.decoding.active = True
        try:
            with self._config(train=False, backprop=False):
                out = self.net(ids).array  # (N, t, V): batch-major (a model with attention)
        finally:
            self.decoding.active = False
        self.decoding.offset += ids.shape[0]
        last = out[:, -1]  # (N, V): the logits at the newest position
        return last, last.argmax(axis=-1)

    def sync(self, value=None) -> None:
        if self.placement.kind == "cuda":  # written, not run (no GPU here)
            from chainer.backends import cuda

            cuda.cupy.cuda.Device().synchronize()  # every queued kernel, any stream

    def to_numpy(self, value) -> np.ndarray:
        return np.asarray(chainer.backend.CpuDevice().send(value))

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        weights.load(self.owners, params, self.dtype, self.placement.device)
        self.optimizer = optim.make_optimizer(self.workload)  # fresh state
        if self.optimizer is not None:
            self.optimizer.setup(self.net)
            optim.set_decay(self.optimizer, self.workload, self.owners)

    def get_params(self) -> Params:
        return weights.read(self.owners)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        self._need_training()
        xb, tb = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        with self._config(train=False):  # dropout off: evaluation mode, the same functions
            loss = self._loss(xb, tb)
            self.net.cleargrads()
            loss.backward()
        grads = weights.read(self.owners, grad=True)
        return float(self.to_numpy(loss.array)), {k: grads[k] for k in self.trainable}

    def set_dropout(self, enabled: bool) -> None:
        self.switch.enabled = bool(enabled)  # read by every dropout layer inside train_step

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        arrays = [self.to_numpy(a) for a in batch]
        if self.tokens:
            arrays[0] = arrays[0].T  # time-major (T, N) -> canonical (N, T)
        return tuple(arrays)

    def output_to_canonical(self, out: np.ndarray) -> np.ndarray:
        """A time-major sequence (T, N, E) (the embedding's output, what ``F.n_step_gru``
        reads) -> (N, T, E); a batch-major one (a model with attention: a language model's
        logits (N, T, V)), images (NCHW) and the GRU's state (N, H) are canonical already."""
        if out.ndim == 3 and self.layout.time_major:
            return np.ascontiguousarray(out.transpose(1, 0, 2))  # (T, N, E) -> (N, T, E)
        return out

    def _need_training(self) -> None:
        if self.workload.task != "train" or self.optimizer is None:
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )

    # -- description ---------------------------------------------------------------------------
    def manifest(self) -> dict:
        has_gru = any(isinstance(op, ops.GRU) for op, _ in self.owners)
        cuda = self.placement.kind == "cuda"
        check = "on" if self.type_check else "off"
        return {
            **self.runtime_manifest(),
            "device": self.placement.name,
            "layout": self._layout(),
            "blas": rt.blas_manifest(),
            "compile": f"define-by-run (eager); chainer.config.type_check {check}",
            **self._attention_manifest(),
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
            "dropout": "F.dropout with masks from a generator seeded by runtime.seed",
            "gated_program": (
                "ChainerModel.train_step itself (define-by-run: forward, loss, cleargrads, "
                f"backward, optimizer.update under train=True, type_check {check}), with "
                "set_dropout(False) setting every F.dropout's rate to 0 inside it (masks of "
                "ones); nothing is traced or compiled"
                if self.workload.task == "train"
                else f"ChainerModel.predict (forward-only workload; type_check {check})"
            ),
            "compat": compat.applied(),
        }

    def _layout(self) -> str:
        if not self.tokens:
            return "NCHW"
        return "TNC (time-major)" if self.layout.time_major else "NTC (batch-major: ids TN -> NT)"

    def _attention_manifest(self) -> dict:
        """How attention runs: composed from Chainer's functions (it has no fused attention),
        under the masks of the graph's attentions."""
        kinds = {type(op) for op, _ in self.owners}
        masks = [
            what
            for kind, what in (
                (ops.Attention, "masked scores"),
                (ops.CausalAttention, "causally masked scores (lower-triangular)"),
            )
            if kind in kinds
        ]
        if not masks:
            return {"attention": "n/a", "attention_reason": "n/a"}
        return {
            "attention": f"composed: F.matmul, F.softmax over {' and '.join(masks)}, F.where "
            "(ids TN -> NT)",
            "attention_reason": "Chainer has no fused attention function",
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
        from chainer.backends import cuda  # written, not run (no GPU here)

        return int(cuda.cupy.get_default_memory_pool().total_bytes())


def softmax_cross_entropy(logits, labels):
    """``F.softmax_cross_entropy``, mean over every row: a language model's (N, T, K) logits and
    (N, T) labels as N*T rows (Chainer reads axis 1 of a 3-d input as the classes); a
    classifier's (N, K) and (N,) pass unchanged."""
    if logits.ndim > 2:
        logits = F.reshape(logits, (-1, logits.shape[-1]))  # (N, T, K) -> (N*T, K)
        labels = labels.reshape(-1)  # (N, T) -> (N*T,)
    return F.softmax_cross_entropy(logits, labels)  # normalize: mean over the rows


OPTIONS = ("type_check",)


def build(workload: Workload, params: Params, runtime: Runtime, **options) -> ChainerModel:
    """Lower ``workload`` to a Chainer chain on ``runtime.device`` holding ``params`` (canonical
    names). The one option, ``type_check=True``, turns Chainer's per-call input checks on in
    every step (the ``lowering_chainer`` benchmark measures their cost; the runner never
    passes it)."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise BackendError(
            f"backend 'chainer' has no build option {unknown[0]!r}; valid: {', '.join(OPTIONS)}"
        )
    return ChainerModel(workload, params, runtime, type_check=bool(options.get("type_check")))
