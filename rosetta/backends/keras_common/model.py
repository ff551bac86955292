"""The Keras model's engine-neutral half: the functional ``keras.Model`` the shared lowering makes,
its NumPy face, and the base class of the Keras backends on JAX and PyTorch.

``functional(...)`` is the graph through the driver and a backend's table, applied to a
``keras.Input`` (TensorFlow's ``KerasModel`` and :class:`KerasEngineModel` both call it).
:class:`KerasEngineModel` holds what Keras does the same on every engine: the dropout gate (a
non-trainable boolean ``keras.Variable``), the spec's optimiser (``optim.py``), the loss
(``keras.losses.SparseCategoricalCrossentropy``, mean over the batch, computed in float32 under
bf16), ``set_params``/``get_params`` through the bindings, and the manifest. Its engine subclass
(``keras_jax/model.py``, ``keras_torch/model.py``) supplies the timed face: the loader, the
training step, the forward pass and the gradients.

**The training step** is the engine backend's option ``step`` (``--option keras_jax.step=...``):

- ``keras``: Keras' own training API, ``model.compile(optimizer, loss)`` and
  ``model.train_on_batch(x, y)`` per batch (``fit`` runs whole epochs and cannot serve the
  contract's one-batch ``train_step``; both call the same compiled ``train_function``);
- ``custom``: the backend's own step over the same Keras model, optimiser and loss.

``default`` was chosen from what Keras' own documentation and source say ``train_on_batch``
does per call, which a per-batch timed step pays every time and ``fit`` pays once per epoch: it
returns the logs as Python floats (``pythonify_logs``: a host read-back of the loss, and so a
device sync on an accelerator, inside every step), resets and updates its metrics (the loss
tracker), and on JAX gathers every variable into a state tuple and writes every one back
(``jax_state_sync``) around each call, where a stateless step keeps the state on the device
between steps (Keras' guide "Writing a training loop from scratch in JAX" and ``fit`` itself do
so). On PyTorch the custom step is Keras' own ``TorchTrainer.train_step`` (forward,
``loss.backward()``, ``optimizer.apply``) without the tracker and the read-back. Then measured
(``python -m benchmarks fastpath_knob --backend keras_torch --knob keras_step --values
custom,keras``, the steady step interleaved in one process, alone on a 2-core Zen 4): on
PyTorch on the CPU Keras' own step was as fast or faster in every comparison (keras/custom: cnn
0.890 [0.867, 0.926] and 0.971 [0.920, 1.013] in two runs, gru 1.026 [0.979, 1.063] and 0.942
[0.903, 0.991]), where the read-back costs no sync, so it is the default there; on JAX the two are
level (cnn 1.003 [0.969, 1.027], gru 0.986 [0.961, 1.003]) and the stateless step stays; on a GPU
the custom step stays on both engines for the sync (written, not run). The manifest records which
step ran, and why (:func:`rosetta.backends.keras_common.engine.step_in_effect`).

**Generating** (a decoder): :class:`KerasEngineModel`'s ``prefill``/``decode`` run
``keras_common/decoding.py``'s step over the shared layers' static KV cache through the engine's
:meth:`KerasEngineModel.generate_step`, on the engine's own path as its timed step runs: a
jitted stateless call on JAX, the eager call under ``torch.no_grad`` on PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Model, Params, hwc_flatten_at_output
from rosetta.backends.keras_common import optim, weights
from rosetta.backends.keras_common.decoding import KV, generate_step
from rosetta.backends.keras_common.engine import FLOAT64_NOTE, step_in_effect
from rosetta.backends.keras_common.lowering import ATTENTION_NOTE, CAUSAL_ATTENTION_NOTE, Ctx
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import Workload

__all__ = ["KerasEngineModel", "KerasFastPath", "functional", "step_in_effect"]

#: the Keras dtype policy of each mixed-precision policy (per layer, never global)
KERAS_POLICIES = {"bf16": "mixed_bfloat16"}


def functional(
    workload: Workload, table: driver.LoweringTable, ctx: Ctx, dtype: str
) -> tuple[keras.Model, list[weights.Binding]]:
    """The graph through the driver and ``table``, applied to a ``keras.Input``: a functional
    ``keras.Model`` and its weight bindings (graph order). Images arrive in ``ctx.data_format``."""
    net = driver.lower(table, workload.graph, workload.input.shape, ctx)
    ctx.forward = net  # the same layers as a function of tensors: a generation step calls it
    shape = tuple(workload.input.shape)
    if workload.input.dtype == "int32":
        inputs = keras.Input(shape=shape, dtype="int32", name="tokens")  # (T,), batch-major
    else:
        native = shape  # (F,) or (T, E): a cut's activations (the localiser's suffixes)
        if len(shape) == 3 and ctx.data_format == "channels_last":
            native = (*shape[1:], shape[0])  # (C, H, W) -> (H, W, C)
        inputs = keras.Input(shape=native, dtype=dtype, name="images")  # (H, W, C)|(C, H, W)
    return keras.Model(inputs, net(inputs), name=f"rosetta_{workload.name}"), ctx.bindings


def check_policy(backend: str, runtime: Runtime) -> None:
    """One line where ``runtime``'s dtype and precision are not what a Keras model runs."""
    if runtime.dtype not in ("float32", "float64"):
        raise BackendError(
            f"backend {backend!r} supports float32 and float64, not {runtime.dtype!r}"
        )
    if runtime.precision != "fp32" and (
        runtime.precision not in KERAS_POLICIES or runtime.dtype != "float32"
    ):
        raise BackendError(
            f"backend {backend!r} runs bf16 over float32 master weights only; got precision "
            f"{runtime.precision!r} with dtype {runtime.dtype!r} (use --dtype float32)"
        )


@dataclass(frozen=True)
class KerasFastPath:
    """The choices one Keras-engine model runs with (see the module docstrings)."""

    data_format: str  # "channels_last" | "channels_first"
    step: str  # "keras" (train_on_batch) | "custom"
    why_step: str
    why_layout: str


class KerasEngineModel(Model):
    """A workload as a Keras 3 functional model on the JAX or PyTorch engine: the engine-neutral
    half (see the module docstring); a subclass supplies the engine's timed face."""

    backend = "keras"
    engine = ""
    table: driver.LoweringTable

    def native_layers(self) -> dict:
        """The engine's own layers for some ops (``Ctx.native``); none by default."""
        return {}

    def make_gate(self):
        """The dropout gate (``Ctx.dropout_on``): a boolean ``keras.Variable`` read inside the
        compiled step, so ``set_dropout`` retraces nothing; an eager engine may hand a Python
        flag instead (``lowering.EagerGate``)."""
        return keras.Variable(True, trainable=False, dtype="bool", name="dropout_on")

    def make_optimizer(self, spec) -> keras.optimizers.Optimizer | None:
        """The spec's optimiser on this engine (``keras_common/optim.py``'s by default)."""
        return optim.make_optimizer(spec)

    def __init__(self, workload: Workload, params: Params, runtime: Runtime, fast: KerasFastPath):
        check_policy(self.backend, runtime)
        self.workload = workload
        self.runtime = runtime
        self.fast = fast
        self._trainable = {p.name for p in workload.param_specs if p.trainable}
        layer_dtype = KERAS_POLICIES.get(runtime.precision, runtime.dtype)
        self._context = int(workload.input.shape[0])  # the positions a generation may fill
        self._gen: tuple[dict[str, KV], int] | None = None  # (the KV cache, positions seen)
        with self.scope():
            self._gate = self.make_gate()
            self._ctx = ctx = Ctx(
                layer_dtype,
                fast.data_format,
                self._gate,
                seed=runtime.seed,
                backend=self.backend,
                identifier_names=True,
                native=self.native_layers(),
            )
            self.net, self.bindings = functional(workload, self.table, ctx, runtime.dtype)
            self.optimizer = self.make_optimizer(workload.optimizer)
            if isinstance(self.optimizer, optim.SpecAdamW):  # AdamW: the spec's decay set
                self.optimizer.decay_only(
                    optim.decayed_variables(workload.optimizer, self.bindings)
                )
            loss_dtype = "float32" if runtime.precision == "bf16" else runtime.dtype
            self.loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, dtype=loss_dtype
            )
            if self.optimizer is not None:
                self.optimizer.build(self.net.trainable_variables)
                if fast.step == "keras":
                    self._compile_keras_step()
        self.set_params(params)

    def _compile_keras_step(self) -> None:
        """``model.compile`` for the ``keras`` step. ``train_on_batch`` reports the loss through
        the loss tracker compile makes (a ``keras.metrics.Mean`` in ``floatx``): for a float64
        model floatx is float64 while compile makes it (then restored), else the reported loss
        would be rounded to float32."""
        floatx = keras.config.floatx()
        keras.config.set_floatx("float64" if self.dtype == "float64" else floatx)
        try:
            self.net.compile(optimizer=self.optimizer, loss=self.loss, jit_compile=self.keras_jit())
        finally:
            keras.config.set_floatx(floatx)

    # -- what an engine supplies -------------------------------------------------------------
    def scope(self):
        """A context manager entered around every build and call (device, precision mode)."""
        raise NotImplementedError

    def keras_jit(self) -> bool:
        """``jit_compile`` of Keras' own train function (the ``keras`` step)."""
        raise NotImplementedError

    def before_read(self) -> None:
        """Bring the Keras variables up to date (an engine that holds the state elsewhere)."""

    def after_write(self) -> None:
        """The Keras variables were assigned: take them up (an engine that holds the state)."""

    def generate_step(self, ids, offset: int, cache: dict[str, KV] | None):
        """One generation step on this engine (``decoding.generate_step``): the logits (N, V)
        and greedy token (N,) of the newest of the positions ``ids`` (N, t) from ``offset``
        on, and the cache after it. The default runs the lowered layers as they are called."""
        with self.scope():
            ctx = self._ctx
            return generate_step(ctx.forward, ctx.decoding, ids, offset, self._context, cache)

    # -- the generating face: a static KV cache (keras_common/decoding.py) ---------------------
    GENERATES = True

    def prefill(self, prompts: np.ndarray):
        with self.scope():
            ids = keras.ops.convert_to_tensor(np.asarray(prompts, dtype=np.int32))  # (N, P)
        logits, nxt, cache = self.generate_step(ids, 0, None)
        self._gen = (cache, int(ids.shape[1]))
        return logits, nxt

    def decode(self, tokens):
        cache, offset = self._gen
        with self.scope():
            ids = keras.ops.reshape(keras.ops.cast(tokens, "int32"), (-1, 1))  # (N,) -> (N, 1)
        logits, nxt, cache = self.generate_step(ids, offset, cache)
        self._gen = (cache, offset + 1)
        return logits, nxt

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        from rosetta.spec.weights import check_weights

        check_weights(self.workload, params)
        self.before_read()
        with self.scope():
            weights.load(self.bindings, params, self.dtype)
            if self.optimizer is not None:  # loading weights starts training afresh
                for var in self.optimizer.variables:
                    var.assign(keras.ops.zeros(var.shape, dtype=var.dtype))
        self.after_write()

    def get_params(self) -> Params:
        self.before_read()
        return weights.read(self.bindings)

    def set_dropout(self, enabled: bool) -> None:
        self.before_read()
        self._gate.assign(bool(enabled))  # read inside the compiled step: no retracing
        self.after_write()

    def output_to_canonical(self, out: np.ndarray) -> np.ndarray:
        """channels_last images (N, H, W, C) -> (N, C, H, W); an NHWC flatten's H, W, C rows ->
        the spec's C, H, W order. Sequences are batch-major (N, T, E) already."""
        channels_last = self.fast.data_format == "channels_last"
        chw = hwc_flatten_at_output(self.workload, channels_last)
        if chw is not None:
            return weights.flat_hwc_to_chw(out, chw)
        return weights.images_to_canonical(out, self.fast.data_format)

    def canonical_grads(self, by_var: dict[int, np.ndarray]) -> Params:
        """Gradients keyed by ``id(variable)`` in canonical names and layouts."""
        return weights.grads(self.bindings, by_var, self._trainable, self.dtype)

    def need_training(self) -> None:
        if self.optimizer is None:
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )

    # -- description ---------------------------------------------------------------------------
    def keras_manifest(self) -> dict:
        """The manifest entries every Keras engine states the same way."""
        image = len(self.workload.input.shape) == 3
        step = (
            "keras: model.compile(optimizer, loss) + model.train_on_batch(x, y) per batch"
            if self.fast.step == "keras"
            else "custom: the backend's own step over the Keras model, optimiser and loss"
        )
        return {
            **self.runtime_manifest(),
            "engine": self.engine,
            "keras_backend": keras.backend.backend(),
            "layout": ("NHWC" if self.fast.data_format == "channels_last" else "NCHW")
            if image
            else "NTC",
            "layout_reason": self.fast.why_layout,
            "keras_step": step,
            "keras_step_reason": self.fast.why_step,
            "precision_mode": (
                "bf16 (Keras mixed_bfloat16 policy on every layer this model builds: float32 "
                "variables, bfloat16 compute; fp32 optimiser state and loss; no global policy)"
                if self.runtime.precision == "bf16"
                else f"fp32: {self.dtype} throughout"
                + (f" ({FLOAT64_NOTE})" if self.dtype == "float64" else "")
            ),
            "attention": self._attention_note(),
            "optimizer": optim.describe(self.workload.optimizer)
            + (f" ({self.optimizer.HOW})" if hasattr(self.optimizer, "HOW") else ""),
            "inference": "model(x, training=False); BatchNorm on moving stats",
            "versions": f"keras {keras.__version__} on {keras.backend.backend()}",
        }

    def _attention_note(self) -> str:
        """How the workload's attention runs: the encoder's, the decoder's causal one, or n/a."""
        if self._has(ops.Attention):
            return ATTENTION_NOTE
        return CAUSAL_ATTENTION_NOTE if self._has(ops.CausalAttention) else "n/a"

    def _has(self, kind: type) -> bool:
        """Whether the workload's graph holds an op of ``kind``."""
        w = self.workload
        return any(isinstance(n, kind) for n, _, _ in walk(w.graph, w.input.shape))

    def summary(self) -> str:
        lines: list[str] = []
        self.net.summary(print_fn=lambda line, *a, **k: lines.append(line), line_length=100)
        return "\n".join(lines)
