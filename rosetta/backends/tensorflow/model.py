"""``KerasModel``: a workload lowered to a ``keras.Model``, with both faces of the contract.

The timed face is ``tf.function``-compiled (XLA where ``fastpath`` chose it): ``train_step`` runs
forward, softmax cross-entropy, ``GradientTape`` and the optimiser in one graph and returns the
loss tensor; ``predict`` calls the model with ``training=False``. The NumPy face converts at the
bindings (``convert.py``) and runs the same compiled step with dropout off.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.tensorflow import optim, runtime
from rosetta.backends.tensorflow.fastpath import FastPath, has_gru
from rosetta.backends.tensorflow.loader import TFLoader
from rosetta.backends.tensorflow.lowering import build_keras_model
from rosetta.errors import BackendError
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload


def softmax_cross_entropy(logits, labels):
    """Mean softmax cross-entropy over integer labels (the spec's loss)."""
    per_sample = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_mean(per_sample)


class KerasModel(Model):
    """A workload as a Keras 3 model on TensorFlow (see the module docstring)."""

    backend = "tensorflow"

    def __init__(
        self,
        workload: Workload,
        params: Params,
        *,
        dtype: str,
        device: str,
        seed: int,
        fast: FastPath,
    ):
        if dtype not in ("float32", "float64"):
            raise BackendError(f"backend 'tensorflow' supports float32 and float64, not {dtype!r}")
        self.workload = workload
        self.dtype = dtype
        self.device = device
        self.fast = fast
        self.tf_device = runtime.tf_device(device)
        with tf.device(self.tf_device):
            self.net, self.bindings = build_keras_model(workload, dtype, fast.data_format, seed)
            self.optimizer = optim.make_optimizer(workload.optimizer)
            if self.optimizer is not None:
                self.optimizer.build(self.net.trainable_variables)
        self._trainable = {p.name for p in workload.param_specs if p.trainable}
        self._loader = TFLoader(
            image_dtype=dtype,
            channels_last=fast.data_format == "channels_last",
            tf_device=self.tf_device,
        )
        jit = fast.jit_compile
        self._step_fn = tf.function(self._step, jit_compile=jit)
        self._grads_fn = tf.function(self._loss_grads, jit_compile=jit)
        self._predict_fn = tf.function(self._forward, jit_compile=jit)
        self.set_params(params)

    # -- compiled functions ----------------------------------------------------------------------
    def _forward(self, x):
        return self.net(x, training=False)

    def _loss_grads(self, x, y, training: bool = False):
        variables = self.net.trainable_variables
        with tf.GradientTape() as tape:
            loss = softmax_cross_entropy(self.net(x, training=training), y)
        grads = tape.gradient(loss, variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]  # embedding: IndexedSlices -> dense

    def _step(self, x, y, training: bool):
        variables = self.net.trainable_variables
        with tf.GradientTape() as tape:
            loss = softmax_cross_entropy(self.net(x, training=training), y)
        grads = tape.gradient(loss, variables)
        self.optimizer.apply(grads, variables)
        return loss

    # -- timed face ------------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return self._loader.dataset(x, y, order, batch_size)

    def train_step(self, batch: Batch):
        self._need_training()
        with tf.device(self.tf_device):
            return self._step_fn(batch[0], batch[1], True)

    def predict(self, batch: Batch):
        with tf.device(self.tf_device):
            return self._predict_fn(batch[0])

    def sync(self, value=None) -> None:
        # CPU eager execution is synchronous; on a GPU wait for every queued kernel
        if self.device == "cuda":
            tf.test.experimental.sync_devices()

    def to_numpy(self, value) -> np.ndarray:
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)

    # -- NumPy face ------------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        for b in self.bindings:
            arrays = b.to_native(*(np.asarray(params[n], dtype=self.dtype) for n in b.names))
            for var, a in zip(b.variables, arrays, strict=True):
                var.assign(a)
        if self.optimizer is not None:  # loading weights starts training afresh
            for var in self.optimizer.variables:
                var.assign(tf.zeros_like(var))

    def get_params(self) -> Params:
        out: Params = {}
        for b in self.bindings:
            out.update(zip(b.names, b.to_canonical(*(v.numpy() for v in b.variables)), strict=True))
        return {k: np.array(v) for k, v in out.items()}

    def _native_xy(self, x: np.ndarray, y: np.ndarray):
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        return batch[0], batch[1]

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        self._need_training()
        with tf.device(self.tf_device):
            loss, grads = self._grads_fn(*self._native_xy(x, y))
        by_var = {
            id(v): g.numpy() for v, g in zip(self.net.trainable_variables, grads, strict=True)
        }
        out: Params = {}
        for b in self.bindings:
            # buffers (BatchNorm statistics) have no gradient: zeros, then dropped by name
            arrays = [by_var.get(id(v), np.zeros(v.shape, self.dtype)) for v in b.variables]
            canon = zip(b.names, b.to_canonical(*arrays), strict=True)
            out.update((n, g) for n, g in canon if n in self._trainable)
        return float(loss.numpy()), out

    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        self._need_training()
        xb, yb = self._native_xy(x, y)
        with tf.device(self.tf_device):
            for _ in range(k):
                self._step_fn(xb, yb, False)
        return self.get_params()

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return self._loader.to_numpy(batch)

    def _need_training(self) -> None:
        if self.optimizer is None:
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )

    # -- description -----------------------------------------------------------------------------
    def manifest(self) -> dict:
        image = len(self.workload.input.shape) == 3
        fused = self._fused_rnn() if has_gru(self.workload) else "n/a"
        return {
            "backend": self.backend,
            "device": runtime.device_name(self.device),
            "dtype": self.dtype,
            "layout": ("NHWC" if self.fast.data_format == "channels_last" else "NCHW")
            if image
            else "NTC",
            "threads": runtime.THREADS,
            "compile": "tf.function+xla" if self.fast.jit_compile else "tf.function",
            "compile_reason": self.fast.why_jit,
            "autotune": "cuDNN autotune (TensorFlow default)" if self.device == "cuda" else "n/a",
            "fused_rnn": fused,
            "loader": "tf.data: index batches (drop_remainder) -> gather + layout map -> "
            "prefetch(AUTOTUNE)" + (" -> prefetch_to_device" if self.device == "cuda" else ""),
            "optimizer": optim.describe(self.workload.optimizer),
            "inference": "model(x, training=False) in a tf.function; BatchNorm on moving stats",
            "versions": f"tensorflow {tf.__version__}, keras {keras.__version__}",
        }

    def _fused_rnn(self) -> str:
        """Whether the GRU ran cuDNN's fused kernel: the traced graphs are searched for it."""
        xla = ", compiled by XLA" if self.fast.jit_compile else ""
        if self.device != "cuda":
            return (
                f"no: no GPU; Keras' GRU loop (tf.while_loop){xla} (configuration cuDNN-eligible)"
            )
        traced = set()
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
        """Peak GPU memory TensorFlow allocated (``None`` on the CPU)."""
        if self.device != "cuda":
            return None
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
