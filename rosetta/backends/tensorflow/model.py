"""``KerasModel``: a workload lowered to a ``keras.Model``, with both faces of the contract.

The timed face is one ``tf.function`` (XLA where the fast path chose it): ``train_step`` runs
forward in training mode, softmax cross-entropy, ``GradientTape`` and the optimiser in one graph
and returns the loss tensor; ``predict`` calls the model with ``training=False``. Dropout in that
trace is gated by a boolean ``tf.Variable`` (``keras_common.lowering.GatedDropout``), so
``set_dropout`` and the base class's ``deterministic_steps`` run *the same trace* the timed loop
runs, without retracing. The NumPy face converts at the bindings (``weights.py``).

**Fast-path choices**, keyed by what the graph contains (never by workload name), measured with
``python -m benchmarks lowering_tensorflow --xla --layout`` (interleaved, median ratio [95%
interval], 5 rounds) on the 2-core development CPU, 2 threads, while shared (load average
15-16); the manifest records which choice ran and why:

- **Layout** of a graph with convolutions: ``channels_last`` (NHWC) on the CPU: the CNN's train
  step in NHWC takes 0.75 [0.65, 0.83] of its time in NCHW (570 vs 756 ms; TensorFlow's CPU
  kernels want NHWC). ``channels_first`` (NCHW) on a GPU, cuDNN's native layout (written, not
  run). Token graphs are batch-major ``NTC``.
- **XLA** (``jit_compile``), XLA/no-XLA steady ratio and cold first steps: the CNN (a graph of
  convolutions) 4.51 [3.97, 5.83] (2.64 s vs 0.58 s; cold 15.0 s vs 2.1 s); ResNet-50 features
  (convolutions) 1.18 [1.02, 1.43] (6.9 s vs 5.9 s; cold 19.4 s vs 9.7 s); the GRU network 0.29
  [0.24, 1.22] (93 ms vs 318 ms; cold 8.8 s vs 2.8 s), its 150-step loop fuses. So: **on for a
  graph with a GRU on the CPU, off for a graph without one** (oneDNN's convolutions win). On a
  GPU a GRU runs cuDNN's fused kernel, which XLA cannot compile: off there.
- **XLA for attention** (a graph with attention, no GRU): off, the no-GRU default, until
  ``python -m benchmarks fastpath_transformer`` (XLA on/off on the transformer's train step,
  interleaved) says otherwise; the build option ``jit_compile`` is the switch it times.
- **One trace for every batch size** (an ``input_signature`` with the batch dimension
  unspecified), so the gate's smaller batch runs the very trace the timed loop runs. Its cost,
  dynamic/static batch dimension, train step at batch 64, 2 threads, interleaved, *loaded
  machine* (load ~10, to be re-measured alone): CNN 1.04, GRU (XLA) 1.14 and 1.07 in two runs.
- **Generating** (a decoder's ``prefill``/``decode``): two ``tf.function`` steps over the
  shared layers' KV cache (``keras_common/decoding.py``), the prefill's (ids (N, P)) and the
  decode step's (ids (N, 1), the offset an int32 scalar, the cache in and out), each one trace
  for every batch, prompt length and position (an ``input_signature``), XLA as the train
  step's (the graph's choice, ``jit_compile``: off for attention without a GRU); the manifest's
  ``generation`` says which ran.
- **GRU**: Keras' cuDNN-eligible configuration (tanh, sigmoid, reset_after, bias, no unroll), so
  the fused kernel runs wherever TensorFlow sees a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params, hwc_flatten_at_output
from rosetta.backends.keras_common.decoding import cache_layout, generate_step
from rosetta.backends.keras_common.lowering import ATTENTION_NOTE, CAUSAL_ATTENTION_NOTE
from rosetta.backends.keras_common.model import KERAS_POLICIES, functional
from rosetta.backends.tensorflow import optim, weights
from rosetta.backends.tensorflow import runtime as tf_runtime
from rosetta.backends.tensorflow.loader import TFLoader
from rosetta.backends.tensorflow.lowering import TABLE, Ctx, data_format_for
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

LAYOUTS = {"NHWC": "channels_last", "NCHW": "channels_first"}


@dataclass(frozen=True)
class FastPath:
    """The choices one model runs with (see the module docstring for the measurements)."""

    data_format: str  # "channels_last" | "channels_first"
    jit_compile: bool  # XLA on the train and predict steps
    why_jit: str


def has_op(workload: Workload, kind: type | tuple[type, ...]) -> bool:
    """Whether the workload's graph (residual branches opened) contains an op of ``kind`` (one
    of the kinds, a tuple)."""
    return any(isinstance(n, kind) for n, _, _ in walk(workload.graph, workload.input.shape))


def choose(
    workload: Workload, device: str, layout: str | None = None, jit_compile: bool | None = None
) -> FastPath:
    """The fast path for ``workload`` on ``device``, from what its graph contains;
    ``layout``/``jit_compile`` override it (benchmarks only)."""
    if layout is not None and layout not in LAYOUTS:
        raise BackendError(f"backend 'tensorflow': layout must be NHWC or NCHW, not {layout!r}")
    data_format = LAYOUTS[layout] if layout else data_format_for(device, image=True)
    if jit_compile is not None:
        why = "asked for"
    elif has_op(workload, ops.GRU):
        jit_compile = device == "cpu"
        why = (
            "graph has a GRU, on the CPU: XLA fuses its time loop (measured faster)"
            if jit_compile
            else "graph has a GRU, on a GPU: cuDNN's fused kernel, which XLA cannot compile"
        )
    elif has_op(workload, (ops.Attention, ops.CausalAttention)):
        jit_compile = False
        why = (
            "graph has attention, no GRU: XLA off, the default of a graph without a GRU "
            "(python -m benchmarks fastpath_transformer times XLA on/off on its train step)"
        )
    else:
        jit_compile = False
        why = "graph has no GRU: TensorFlow's oneDNN convolutions measured faster than XLA's"
    return FastPath(data_format, bool(jit_compile), why)


def softmax_cross_entropy(logits, labels):
    """Mean softmax cross-entropy over integer labels (the spec's loss), in float32 whatever
    the logits' compute dtype (mixed precision keeps the loss fp32)."""
    if logits.dtype == tf.bfloat16:
        logits = tf.cast(logits, tf.float32)
    per_sample = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_mean(per_sample)


class KerasModel(Model):
    """A workload as a Keras 3 model on TensorFlow (see the module docstring)."""

    backend = "tensorflow"

    def __init__(self, workload: Workload, params: Params, runtime: Runtime, fast: FastPath):
        if runtime.dtype not in ("float32", "float64"):
            raise BackendError(
                f"backend 'tensorflow' supports float32 and float64, not {runtime.dtype!r}"
            )
        if runtime.precision != "fp32" and (
            runtime.precision not in KERAS_POLICIES or runtime.dtype != "float32"
        ):
            raise BackendError(
                f"backend 'tensorflow' runs bf16 over float32 master weights only; got precision "
                f"{runtime.precision!r} with dtype {runtime.dtype!r} (use --dtype float32)"
            )
        self.workload = workload
        self.runtime = runtime
        self.fast = fast
        self.tf_device = tf_runtime.tf_device(runtime.device)
        with tf.device(self.tf_device):
            self._dropout_on = tf.Variable(True, trainable=False, name="dropout_on")
            self.net, self.bindings = self._lower()
            self.optimizer = optim.make_optimizer(workload.optimizer)
            if isinstance(self.optimizer, optim.SpecAdamW):
                self.optimizer.decay_only(
                    optim.decayed_variables(workload.optimizer, self.bindings)
                )
            if self.optimizer is not None:
                self.optimizer.build(self.net.trainable_variables)
        self._trainable = {p.name for p in workload.param_specs if p.trainable}
        self._loader = TFLoader(
            image_dtype=self.dtype,
            channels_last=fast.data_format == "channels_last",
            tf_device=self.tf_device,
        )
        # one trace per function whatever the batch size (the gate's batch is smaller than the
        # timed loop's), so deterministic_steps runs the very trace the timed loop runs
        jit = fast.jit_compile
        x_spec = tf.TensorSpec((None, *self.net.input_shape[1:]), self.net.inputs[0].dtype)
        # labels: one per sample (N,), or one per position (N, T) with (N, T, K) logits
        y_spec = tf.TensorSpec((None, *self.net.output_shape[1:-1]), tf.int64)
        compile_ = dict(jit_compile=jit, input_signature=(x_spec, y_spec))
        self._step_fn = tf.function(self._step, **compile_)  # the timed program
        self._grads_fn = tf.function(self._loss_grads, **compile_)
        self._predict_fn = tf.function(self._forward, jit_compile=jit, input_signature=(x_spec,))
        self._make_generation_fns(jit)
        self.set_params(params)

    def _lower(self) -> tuple[keras.Model, list[weights.Binding]]:
        """The graph through the driver and ``TABLE``, applied to a ``keras.Input``: a
        functional ``keras.Model`` and its weight bindings (graph order; the shared
        ``keras_common.model.functional``)."""
        w = self.workload
        # bf16: each layer this model builds takes Keras' "mixed_bfloat16" policy (float32
        # variables, bfloat16 compute), passed as the layer's dtype: no global policy is set, so
        # no other model of the process is touched
        layer_dtype = KERAS_POLICIES.get(self.runtime.precision, self.dtype)
        self._ctx = Ctx(
            layer_dtype,
            self.fast.data_format,
            self._dropout_on,
            seed=self.runtime.seed,
            backend=self.backend,
        )
        return functional(w, TABLE, self._ctx, self.dtype)

    # -- compiled functions ----------------------------------------------------------------------
    def _forward(self, x):
        return self.net(x, training=False)

    def _loss_grads(self, x, y):
        variables = self.net.trainable_variables
        with tf.GradientTape() as tape:
            loss = softmax_cross_entropy(self.net(x, training=False), y)
        grads = tape.gradient(loss, variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]  # embedding: IndexedSlices -> dense

    def _step(self, x, y):
        variables = self.net.trainable_variables
        with tf.GradientTape() as tape:  # training mode: dropout as self._dropout_on says
            loss = softmax_cross_entropy(self.net(x, training=True), y)
        grads = tape.gradient(loss, variables)
        self.optimizer.apply(grads, variables)
        return loss

    def _make_generation_fns(self, jit: bool) -> None:
        """The prefill's and the decode step's ``tf.function`` (a decoder's only), XLA as
        ``jit``; one trace each for every batch, prompt length and position."""
        self._gen: tuple[dict, int] | None = None  # (the cache, the positions seen)
        self._context = int(self.workload.input.shape[0])
        layout = cache_layout(self.workload, self._ctx.layer_name)
        if not layout:
            return
        cache_dtype = tf.bfloat16 if self.runtime.precision == "bf16" else tf.as_dtype(self.dtype)
        ids = tf.TensorSpec((None, None), tf.int32)  # (N, t): the new positions' tokens
        kv = {
            name: (tf.TensorSpec((None, *shape), cache_dtype),) * 2  # (N, context, heads, d)
            for name, shape in layout.items()
        }
        offset = tf.TensorSpec((), tf.int32)
        self._prefill_fn = tf.function(self._prefill, jit_compile=jit, input_signature=(ids,))
        self._decode_fn = tf.function(
            self._decode, jit_compile=jit, input_signature=(ids, offset, kv)
        )

    def _prefill(self, ids):
        forward, decoding = self._ctx.forward, self._ctx.decoding
        return generate_step(forward, decoding, ids, tf.constant(0), self._context)

    def _decode(self, ids, offset, cache):
        forward, decoding = self._ctx.forward, self._ctx.decoding
        return generate_step(forward, decoding, ids, offset, self._context, cache)

    def tracing_count(self) -> int:
        """How many times the timed step has been traced (1 once warm, whatever the gate)."""
        return self._step_fn.experimental_get_tracing_count()

    # -- timed face ------------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return self._loader.dataset(x, y, order, batch_size)

    def request_batch(self, x: np.ndarray) -> Batch:
        return self._loader.batch(x)  # no tf.data pipeline per request

    def train_step(self, batch: Batch):
        self._need_training()
        with tf.device(self.tf_device):
            return self._step_fn(batch[0], batch[1])

    def predict(self, batch: Batch):
        with tf.device(self.tf_device):
            return self._predict_fn(batch[0])

    # -- the generating face: a static KV cache, two tf.function steps ----------------------------
    GENERATES = True

    def prefill(self, prompts: np.ndarray):
        ids = tf.convert_to_tensor(np.asarray(prompts, dtype=np.int32))  # (N, P)
        with tf.device(self.tf_device):
            logits, nxt, cache = self._prefill_fn(ids)
        self._gen = (cache, ids.shape[1])
        return logits, nxt

    def decode(self, tokens):
        cache, offset = self._gen
        with tf.device(self.tf_device):
            ids = tf.reshape(tf.cast(tokens, tf.int32), (-1, 1))  # (N,) -> (N, 1)
            at = tf.constant(offset, tf.int32)
            logits, nxt, cache = self._decode_fn(ids, at, cache)
        self._gen = (cache, offset + 1)
        return logits, nxt

    def sync(self, value=None) -> None:
        # CPU eager execution is synchronous; on a GPU wait for every queued kernel (not run here)
        if self.device == "cuda":
            tf.test.experimental.sync_devices()

    def to_numpy(self, value) -> np.ndarray:
        if getattr(value, "dtype", None) == tf.bfloat16:  # NumPy has no bfloat16: exact widening
            value = tf.cast(value, tf.float32)
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)

    # -- NumPy face ------------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        weights.load(self.bindings, params, self.dtype)
        if self.optimizer is not None:  # loading weights starts training afresh
            for var in self.optimizer.variables:
                var.assign(tf.zeros_like(var))

    def get_params(self) -> Params:
        return weights.read(self.bindings)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        self._need_training()
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        with tf.device(self.tf_device):
            loss, grads = self._grads_fn(batch[0], batch[1])
        variables = self.net.trainable_variables
        by_var = {id(v): g.numpy() for v, g in zip(variables, grads, strict=True)}
        return float(loss.numpy()), weights.grads(
            self.bindings, by_var, self._trainable, self.dtype
        )

    def set_dropout(self, enabled: bool) -> None:
        self._dropout_on.assign(bool(enabled))  # read inside the trace: no retracing

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return self._loader.to_numpy(batch)

    def output_to_canonical(self, out: np.ndarray) -> np.ndarray:
        """channels_last images (N, H, W, C) -> (N, C, H, W); an NHWC flatten's H, W, C rows ->
        the spec's C, H, W order. Sequences are batch-major (N, T, E) already."""
        channels_last = self.fast.data_format == "channels_last"
        chw = hwc_flatten_at_output(self.workload, channels_last)
        if chw is not None:
            return weights.flat_hwc_to_chw(out, chw)
        return weights.images_to_canonical(out, self.fast.data_format)

    def _need_training(self) -> None:
        if self.optimizer is None:
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )

    # -- description -----------------------------------------------------------------------------
    def manifest(self) -> dict:
        image = len(self.workload.input.shape) == 3
        intra, inter = tf_runtime.threads()
        xla = "tf.function+xla" if self.fast.jit_compile else "tf.function"
        return {
            **self.runtime_manifest(),
            "device": tf_runtime.device_name(self.device),
            "layout": ("NHWC" if self.fast.data_format == "channels_last" else "NCHW")
            if image
            else "NTC",
            "inter_op_threads": inter,
            "intra_op_threads": intra,
            "compile": xla,
            "compile_reason": self.fast.why_jit,
            "precision_mode": (
                "bf16 (Keras mixed_bfloat16 policy on every layer this model builds: float32 "
                "variables, bfloat16 compute; fp32 optimiser state and loss; no global policy)"
                if self.runtime.precision == "bf16"
                else f"fp32: {self.dtype} throughout"
            ),
            **self._attention_manifest(xla),
            "autotune": "cuDNN autotune (TensorFlow default)" if self.device == "cuda" else "n/a",
            "fused_rnn": self._fused_rnn() if has_op(self.workload, ops.GRU) else "n/a",
            "loader": "tf.data: index batches (drop_remainder) -> gather + layout map -> "
            "prefetch(AUTOTUNE)" + (" -> prefetch_to_device" if self.device == "cuda" else ""),
            "optimizer": optim.describe(self.workload.optimizer)
            + (f" ({self.optimizer.HOW})" if hasattr(self.optimizer, "HOW") else ""),
            "inference": "model(x, training=False) in a tf.function; BatchNorm on moving stats",
            "gated_program": self._gated_program(xla),
            "generation": self._generation_manifest(xla),
            "versions": f"tensorflow {tf.__version__}, keras {keras.__version__}",
        }

    def _attention_manifest(self, xla: str) -> dict:
        """The attention form that ran and why ("n/a" without an attention op)."""
        if has_op(self.workload, ops.Attention):
            note = ATTENTION_NOTE
        elif has_op(self.workload, ops.CausalAttention):
            note = CAUSAL_ATTENTION_NOTE
        else:
            return {"attention": "n/a", "attention_reason": "n/a"}
        return {
            "attention": f"composed (keras_common's SelfAttention, keras.ops); in {xla}",
            "attention_reason": f"{note}; XLA: compile_reason",
        }

    def _generation_manifest(self, xla: str) -> str:
        """How a decoder generates ("n/a" without a causal attention)."""
        if not has_op(self.workload, ops.CausalAttention):
            return "n/a"
        return (
            f"prefill and decode step each one {xla} trace (the train step's XLA choice, "
            "compile_reason): a static KV cache (N, context, heads, d) per causal attention, "
            "written at the offset with keras.ops.slice_update, the position embedding read "
            "from the offset (keras_common/decoding.py); one trace for every batch, prompt "
            "length and position (input_signature, the offset an int32 scalar)"
        )

    def _gated_program(self, xla: str) -> str:
        if self.optimizer is None:
            return (
                f"KerasModel.predict's {xla} trace (model(x, training=False)); forward-only "
                "workload: the gate compares its outputs, no train step"
            )
        return (
            f"KerasModel.train_step's {xla} trace (model(x, training=True), loss, GradientTape, "
            "optimizer.apply; batch dimension unspecified, so one trace for every batch size), "
            "dropout off through a tf.Variable the trace reads (set_dropout), not retraced"
        )

    def _fused_rnn(self) -> str:
        """Whether the GRU ran cuDNN's fused kernel: the traced graphs are searched for it."""
        xla = ", compiled by XLA" if self.fast.jit_compile else ""
        if self.device != "cuda":
            return (
                f"no: no GPU; Keras' GRU loop (tf.while_loop){xla} (configuration cuDNN-eligible)"
            )
        traced = set()  # written, not run: no GPU here
        for fn in (self._step_fn, self._predict_fn):
            for cf in getattr(fn, "_list_all_concrete_functions", lambda: [])():
                traced |= {op.type for op in cf.graph.get_operations()}
                for f in cf.graph._functions.values():  # the while/cond bodies
                    traced |= {n.op for n in f.definition.node_def}
        if not traced:
            return "not traced yet (cuDNN-eligible configuration, GPU visible)"
        ran = any(t.startswith("CudnnRNN") for t in traced)
        return "yes: cuDNN GRU kernel (CudnnRNNV3)" if ran else f"no: Keras' GRU loop{xla}"

    def summary(self) -> str:
        lines: list[str] = []
        self.net.summary(print_fn=lambda line, *a, **k: lines.append(line), line_length=100)
        return "\n".join(lines)

    def peak_device_memory_bytes(self) -> int | None:
        """Peak GPU memory TensorFlow allocated (``None`` on the CPU; written, not run)."""
        if self.device != "cuda":
            return None
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])

    def reset_peak_device_memory(self) -> bool:
        """Restart TensorFlow's GPU peak (``reset_memory_stats``); False on the CPU (written, not
        run: no GPU here)."""
        if self.device != "cuda":
            return False
        tf.config.experimental.reset_memory_stats("GPU:0")
        return True


def build(
    workload: Workload,
    params: Params,
    runtime: Runtime,
    *,
    layout: str | None = None,
    jit_compile: bool | None = None,
) -> KerasModel:
    """Lower ``workload`` to a ``keras.Model`` holding ``params`` (canonical names), under the
    configured ``runtime``. ``layout`` (``"NHWC"``/``"NCHW"``) and ``jit_compile`` override the
    fast path (``choose``); the benchmarks use them, the runner does not."""
    driver.check_lowerable(TABLE, workload.graph)
    if jit_compile is None and runtime.option("xla") != "default":  # the backend's option
        jit_compile = runtime.option("xla") == "on"
    fast = choose(workload, runtime.device, layout=layout, jit_compile=jit_compile)
    return KerasModel(workload, params, runtime, fast)
