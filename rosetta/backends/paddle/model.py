"""A workload as a plain ``paddle.nn.Layer`` with ``paddle.optimizer``: the timed face and the
NumPy face, and the fast-path choices.

The timed face is what a Paddle user writes: batches from a ``paddle.io.DataLoader``, forward,
``F.cross_entropy`` (softmax, mean), ``loss.backward()``, ``optimizer.step()``,
``optimizer.clear_grad()``, the loss returned as a tensor (no host read-back); features under
``paddle.no_grad()`` in ``eval()``. The NumPy face converts only through ``weights.py`` and
``loader.py``. Everything the model needs comes from its :class:`~rosetta.runtime.Runtime`.

**Fast-path choices** (to_static measured level with the dynamic graph: ``python -m benchmarks
fastpath_knob --backend paddle --knob paddle_static``, figures in ``static_in_effect``):

- ``paddle.jit.to_static``, the backend's option ``static`` (``default`` | ``on`` | ``off``,
  ``rosetta bench --paddle-static``; :func:`static_in_effect` says what
  ``default`` means and why): on, the network's ``forward`` becomes a static program (SOT
  bytecode translation, Paddle 3's default), the backward runs as its own static program and
  the optimiser stays eager, as in Paddle's own to_static training guide. Dropout's rate is a
  buffer (a program input), so the gate's dropout-off steps run the same program;
- forward-only workloads (ResNet-50's features) run through Paddle Inference with oneDNN,
  Paddle's deployment path on the CPU (option ``predictor``; ``predictor.py`` says what it is,
  where it applies and what it measured);
- layout NCHW, Paddle's default ``data_format`` (its CPU conv kernels' own layout);
- the GRU is ``nn.GRU``, which on the CPU runs Paddle's fused ``rnn`` kernel (one op over all
  steps), never a Python loop of cells;
- attention is composed from ``paddle.matmul`` and ``F.softmax`` (``lowering.SelfAttention``
  says why not ``F.scaled_dot_product_attention``: on the CPU it is the same composition, and
  NaN on a sequence of padding only); causal attention (no padding) is
  ``F.scaled_dot_product_attention(is_causal=True)`` in float32 and the same composition under a
  lower triangle in float64 (``lowering.CausalSelfAttention``); LayerNorm and GELU are
  ``nn.LayerNorm`` and the exact ``nn.GELU``, Paddle's own kernels;
- a tied LM head reads the embedding's own weight (``lowering.TiedLinear``): one Parameter, bound
  once (the embedding's), so the optimiser holds it once and its gradient is both uses' sum;
- a decoder generates (``prefill``/``decode``) in the dynamic graph under ``paddle.no_grad()``
  with a static KV cache (``lowering.Decoding``): per causal attention a (N, context, H, d) key
  and value buffer allocated at the prefill and written in place at the offset, the position
  table read from it; a decode step runs the network on its one new token.

**The gated program.** ``train_step`` is the timed program and the gate's k steps run through
it: ``set_dropout(False)`` writes 0 into the rate buffer of every :class:`GatedDropout`, which
the same step reads (``lowering.py``).
"""

from __future__ import annotations

import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.paddle import loader as native
from rosetta.backends.paddle import optim, predictor, weights
from rosetta.backends.paddle import runtime as settings
from rosetta.backends.paddle.compat import paddle
from rosetta.backends.paddle.lowering import (
    TABLE,
    Build,
    CausalSelfAttention,
    GatedDropout,
    SelfAttention,
    default_dtype,
)
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

nn, F = paddle.nn, paddle.nn.functional


class PaddleModel(Model):
    """``workload`` lowered to ``paddle.nn`` (``self.net``), trained with ``paddle.optimizer``."""

    backend = "paddle"

    def __init__(
        self, workload: Workload, params: Params, runtime: Runtime, *, static: bool | None = None
    ) -> None:
        if runtime.dtype not in ("float32", "float64"):
            raise BackendError(
                f"backend 'paddle' supports float32 and float64, not {runtime.dtype!r}"
            )
        if runtime.precision != "fp32":
            raise BackendError(f"backend 'paddle' runs precision fp32, not {runtime.precision!r}")
        self.workload = workload
        self.runtime = runtime
        self.place = settings.set_device(runtime.device)
        # the weights are canonical (set_params), so the seed drives the dropout masks
        paddle.seed(runtime.seed)
        ctx = Build()
        with default_dtype(runtime.dtype):
            self.net: nn.Layer = driver.lower(
                TABLE, workload.graph, workload.input.shape, ctx
            )  # an unknown op raises before anything is built
        self.decoding = ctx.decoding  # generating: the position offset and the KV caches
        self.batchnorms = [
            m for m in self.net.sublayers() if isinstance(m, (nn.BatchNorm1D, nn.BatchNorm2D))
        ]
        self.dropouts = [m for m in self.net.sublayers() if isinstance(m, GatedDropout)]
        self.dropout = True
        self.binds = weights.bindings(ctx.owners)
        if static is None:
            self.static, self.static_reason = static_in_effect(
                runtime.option("static"), workload.task
            )
        else:
            self.static, self.static_reason = bool(static), "the build's static option"
        self.forward = paddle.jit.to_static(self.net) if self.static else self.net
        self.infer, self.infer_reason = predictor.in_effect(
            runtime.option("predictor"), workload.task, runtime.dtype, self.device
        )
        self._predictor: predictor.Predictor | None = None  # built at the first predict
        self._training: bool | None = None
        self._mode(False)
        self.optimizer: optim.Optimizer | None = None
        self.set_params(params)

    # -- helpers -------------------------------------------------------------------------------
    def _mode(self, training: bool) -> None:
        """Dropout layers in training mode or not; BatchNorm stays in eval (the spec's
        inference-mode BatchNorm)."""
        if training != self._training:
            self.net.train() if training else self.net.eval()
            for bn in self.batchnorms:
                bn.eval()
            self._training = training

    def _trainable(self) -> None:
        if self.optimizer is None:
            raise BackendError(f"workload {self.workload.name!r} is forward-only")

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return native.native_loader(x, y, order, batch_size, self.runtime.dtype)

    def request_batch(self, x: np.ndarray) -> Batch:
        return native.request_batch(x, self.runtime.dtype)  # no DataLoader per request

    def train_step(self, batch: Batch) -> paddle.Tensor:
        """One optimiser step (the timed program; the gate runs it with dropout rates 0)."""
        self._trainable()
        self._mode(True)
        loss = F.cross_entropy(self.forward(batch[0]), batch[1])  # softmax, mean reduction
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return loss.detach()  # the loss at the parameters before this step

    def predict(self, batch: Batch) -> paddle.Tensor | np.ndarray:
        self._mode(False)
        if self.infer:  # Paddle Inference (predictor.py): the weights as last set
            if self._predictor is None:
                dtype = "int64" if batch[0].dtype == paddle.int64 else self.runtime.dtype
                try:
                    self._predictor = predictor.Predictor(
                        self.net, self.workload.input.shape, dtype, self.runtime.wanted_threads
                    )
                except Exception as exc:  # a graph paddle.jit.save cannot translate: say so
                    self.infer = False
                    self.infer_reason = predictor.export_failed(exc)
            if self.infer:
                return self._predictor(batch[0].numpy())
        with paddle.no_grad():
            return self.forward(batch[0])

    # -- generating face -----------------------------------------------------------------------
    GENERATES = True

    def prefill(self, prompts: np.ndarray) -> tuple[paddle.Tensor, paddle.Tensor]:
        ids = paddle.to_tensor(np.asarray(prompts, dtype=np.int64))  # (N, P), on the place
        self.decoding.start(capacity=self.workload.input.shape[0])  # the model's context
        return self._generate_step(ids)

    def decode(self, tokens: paddle.Tensor | np.ndarray) -> tuple[paddle.Tensor, paddle.Tensor]:
        if isinstance(tokens, np.ndarray):  # the gate's tokens; else the last step's, native
            tokens = paddle.to_tensor(tokens.astype(np.int64))
        return self._generate_step(tokens.astype("int64").unsqueeze(1))  # (N,) -> (N, 1)

    def _generate_step(self, ids: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """The dynamic-graph network over the positions after those seen, under
        ``paddle.no_grad()`` in ``eval()`` (never the to_static forward: the cache's offset
        moves every step)."""
        self._mode(False)
        self.decoding.active = True
        try:
            with paddle.no_grad():
                out = self.net(ids)  # (N, t, V)
        finally:
            self.decoding.active = False
        self.decoding.offset += ids.shape[1]
        last = out[:, -1]  # (N, V): the logits at the newest position
        return last, last.argmax(axis=-1)

    def sync(self, value=None) -> None:
        if self.device == "cuda":
            paddle.device.synchronize()  # written, not run here

    def to_numpy(self, value) -> np.ndarray:
        return value if isinstance(value, np.ndarray) else np.asarray(value.numpy())

    def peak_device_memory_bytes(self) -> int | None:
        """Peak GPU memory Paddle allocated since the last restart; None on the CPU (written,
        not run: no GPU here)."""
        if self.device != "cuda":
            return None
        return int(paddle.device.cuda.max_memory_allocated())

    def reset_peak_device_memory(self) -> bool:
        if self.device != "cuda":
            return False
        paddle.device.cuda.reset_max_memory_allocated()
        return True

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        weights.load(self.binds, params)
        self._predictor = None  # a predictor holds a snapshot of the weights: built again
        names = [n for n, b in self.binds.items() if b.trainable]
        trainable = [self.binds[n].tensor for n in names]
        # fresh state: loading weights restarts training
        self.optimizer = optim.make_optimizer(self.workload.optimizer, trainable, self.dtype, names)

    def get_params(self) -> Params:
        return weights.read(self.binds)

    def set_dropout(self, enabled: bool) -> None:
        """Write each dropout's rate (the spec's, or 0) into the buffer the step reads."""
        for d in self.dropouts:
            d.set_rate(d.spec_rate if enabled else 0.0)
        self.dropout = bool(enabled)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Loss and gradients through the timed forward (training mode, dropout rates 0)."""
        self._trainable()
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        was = self.dropout
        self.set_dropout(False)
        try:
            self._mode(True)
            self.optimizer.clear_grad(set_to_zero=False)
            loss = F.cross_entropy(self.forward(batch[0]), batch[1])
            loss.backward()
            grads = weights.read_grads(self.binds)
            self.optimizer.clear_grad(set_to_zero=False)
        finally:
            self.set_dropout(was)
        return float(loss.item()), grads

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return native.to_canonical(batch)

    def summary(self) -> str:
        return str(self.net)

    def manifest(self) -> dict:
        has_gru = any(isinstance(m, nn.GRU) for m in self.net.sublayers())
        images = len(self.workload.input.shape) == 3
        if self.static:
            compiled = "paddle.jit.to_static (SOT) of the network's forward"
            program = "the to_static forward (dropout rates are program inputs: no retrace)"
        else:
            compiled, program = "eager (dynamic graph)", "the dynamic-graph step"
        if self.optimizer is None:
            gated = "n/a: forward only (the gate compares predict, the timed program itself)"
            if self.infer:
                gated += ", through the Paddle Inference predictor"
        else:
            gated = (
                f"PaddleModel.train_step, {program}: the same forward/cross_entropy/backward/"
                "optimizer.step/clear_grad the timed loop calls, dropout off by writing 0 into "
                "every GatedDropout rate buffer (set_dropout)"
            )
        return {
            **self.runtime_manifest(),
            "device": settings.device_name(self.device),
            "device_reason": self.runtime.device_reason,
            "place": self.place,
            "layout": "NCHW" if images else "NTC (nn.GRU, time_major=False)" if has_gru else "NTC",
            "threads_source": settings.threads_source(),
            "blas": settings.blas(),
            "precision_mode": f"fp32: {self.dtype} throughout",
            "compile": compiled,
            "compile_reason": self.static_reason,
            "autotune": "n/a",
            "attention": _attention(self.net),
            "fused_rnn": "yes: nn.GRU -> Paddle's fused rnn kernel" if has_gru else "n/a",
            "loader": (
                "paddle.io.DataLoader(a Dataset of whole batches in the runner's order, "
                f"batch_size=None, num_workers={native.NUM_WORKERS}, use_buffer_reader=True)"
            ),
            "optimizer": optim.describe(self.optimizer),
            "dropout": "GatedDropout: inverted dropout, its rate a buffer the step reads",
            "features": (
                self._predictor.settings()
                if self._predictor
                else "Paddle Inference (oneDNN), built at the first predict"
                if self.infer
                else "paddle.no_grad(), eval()"
            ),  # fmt: skip
            "predictor": "paddle.inference (oneDNN)" if self.infer else "dynamic graph",
            "predictor_reason": self.infer_reason,
            "gated_program": gated,
            "paddle": paddle.__version__,
        }


def build(
    workload: Workload, params: Params, runtime: Runtime, *, static: bool | None = None
) -> PaddleModel:
    """Lower ``workload`` to a ``paddle.nn.Layer`` holding ``params`` (canonical), under
    ``runtime``. ``static`` (benchmarks and tests only; the runner passes none) overrides the
    backend's option ``static``."""
    return PaddleModel(workload, params, runtime, static=static)


def _attention(net: nn.Layer) -> str:
    """How the network's attention layers compute, for the manifest."""
    kinds = {type(m) for m in net.sublayers() if isinstance(m, SelfAttention)}
    forms = []
    if SelfAttention in kinds:
        forms.append(
            "composed: paddle.matmul, F.softmax, a boolean key padding mask (Paddle's CPU "
            "scaled_dot_product_attention is the same composition, NaN on a row of padding)"
        )
    for m in net.sublayers():
        if isinstance(m, CausalSelfAttention):
            forms.append(
                "causal: F.scaled_dot_product_attention(is_causal=True) (float32; on the CPU "
                "Paddle's _math_attention)"
                if m.fused
                else "causal: composed under a lower triangle (float64: the reference's order, "
                "later keys -inf)"
            )
            break
    return "; ".join(forms) or "n/a"


def static_in_effect(setting: str, task: str) -> tuple[bool, str]:
    """Whether a paddle build runs its layers through ``paddle.jit.to_static``, and why: ``on``
    and ``off`` are the user's (``--paddle-static``); ``default`` runs the dynamic graph, Paddle's
    own mode for training and the one its CPU kernels are written for. Measured alone on a 2-core
    Zen 4 (``python -m benchmarks fastpath_knob --backend paddle --knob paddle_static --values
    off,on``, the steady step interleaved in one process; on/off): cnn 1.002 [0.992, 1.007], gru
    0.992 [0.963, 1.042], resnet50 0.999 [0.989, 1.004]: no difference, as expected on this CPU
    build (no CINN), where a static program runs the same phi kernels and saves only Python
    dispatch, small against the convolutions and the fused GRU kernel; to_static adds its
    translation to the cold start. The localiser's cuts (task ``probe``) always run the dynamic
    graph (one model per op, never timed)."""
    if task == "probe":
        return False, f"task {task!r}: a diagnostic cut of the graph (the localiser's), not timed"
    if setting == "on":
        return True, "asked for (paddle_static on)"
    if setting == "off":
        return False, "asked for (paddle_static off)"
    return False, "default: the dynamic graph (to_static measured level with it on the CPU)"
