"""``KerasJaxModel``: a workload as a Keras 3 functional model on the JAX engine.

The engine-neutral half (lowering, bindings, optimiser, loss, the choice of training step) is
``keras_common/model.py``. What is JAX's own:

- **The state lives on the device, as JAX arrays**: ``(trainable, non_trainable, optimizer)``
  values in Keras' variable order. The custom step is Keras' stateless API under ``jax.jit``:
  ``model.stateless_call`` (training mode; the non-trainable state carries the dropout seed
  generators and the dropout gate), ``jax.value_and_grad`` of the loss, and
  ``optimizer.stateless_apply``; the trainable values and the optimiser state are *donated*
  (XLA updates them in place). Keras' variables are written from the state only when something
  reads them (``before_read``: ``get_params``, the ``keras`` step), and taken up again after
  they are written (``after_write``).
- **Dropout** is gated by a non-trainable boolean ``keras.Variable`` (``lowering.GatedDropout``):
  ``set_dropout`` assigns it and takes the state up again, so the gate's k steps run the very
  executable the timed loop runs, with the gate's value as an input (no retrace).
- ``predict`` and ``loss_and_grads`` are jitted stateless calls on the same state; float64 models
  run every call inside ``jax.enable_x64`` (the ``jax`` backend's ``precision_scope``).
- **Generating** (a decoder): the prefill and the decode step are jitted stateless calls of the
  shared step (``keras_common/decoding.py``) on the same state, the variables' values mapped in
  by ``keras.StatelessScope`` (what ``stateless_call`` does), the offset an int32 input and the
  KV cache donated (XLA writes the new keys and values in place); one executable per input
  shape, as the ``jax`` backend's.
- The ``keras`` step (``--keras-step keras``): ``model.train_on_batch`` under Keras' own
  ``jit_compile=True`` train function.
"""

from __future__ import annotations

# Keras' engine is chosen (runtime.py) before anything imports keras
from rosetta.backends.keras_jax import runtime as jrt  # isort: split

import contextlib

import jax
import keras
import numpy as np

from rosetta.backends import driver
from rosetta.backends.base import Batch
from rosetta.backends.keras_common.decoding import KV, generate_step
from rosetta.backends.keras_common.model import KerasEngineModel, KerasFastPath, step_in_effect
from rosetta.backends.keras_jax import loader as loader_mod
from rosetta.backends.keras_jax.lowering import DATA_FORMAT, TABLE, WHY_LAYOUT
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import Workload


class KerasJaxModel(KerasEngineModel):
    """A workload as a Keras model on JAX (see the module docstring)."""

    backend = "keras_jax"
    engine = "jax"
    table = TABLE

    def __init__(self, workload: Workload, params, runtime: Runtime, fast: KerasFastPath):
        self._jdev = jrt.jax_device(runtime.device)
        self._state: tuple | None = None  # (trainable, non_trainable, optimizer) JAX arrays
        self._stale = False  # True while the state is newer than Keras' variables
        self._last = None  # the output of the last dispatched program (what sync waits on)
        super().__init__(workload, params, runtime, fast)
        net, loss, opt = self.net, self.loss, self.optimizer

        def loss_of(tv, ntv, x, y, training):
            logits, ntv = net.stateless_call(tv, ntv, x, training=training)
            return loss(y, logits), ntv

        def step(tv, ntv, ov, x, y):
            (value, ntv), grads = jax.value_and_grad(loss_of, has_aux=True)(tv, ntv, x, y, True)
            tv, ov = opt.stateless_apply(ov, grads, tv)
            return value, tv, ntv, ov

        def grads(tv, ntv, x, y):
            (value, _), g = jax.value_and_grad(loss_of, has_aux=True)(tv, ntv, x, y, False)
            return value, g

        def forward(tv, ntv, x):
            return net.stateless_call(tv, ntv, x, training=False)[0]

        ctx, context = self._ctx, self._context

        def generate(tv, ntv, ids, offset, cache):
            state = [
                *zip(net.trainable_variables, tv, strict=True),
                *zip(net.non_trainable_variables, ntv, strict=True),
            ]
            with keras.StatelessScope(state_mapping=state):  # the values, as stateless_call
                return generate_step(ctx.forward, ctx.decoding, ids, offset, context, cache)

        self._prefill_fn = jax.jit(lambda tv, ntv, ids: generate(tv, ntv, ids, 0, None))
        self._decode_fn = jax.jit(generate, donate_argnums=(4,))  # the cache: written in place
        self._step_fn = jax.jit(step, donate_argnums=(0, 2)) if opt is not None else None
        self._grads_fn = jax.jit(grads) if opt is not None else None
        self._predict_fn = jax.jit(forward)

    # -- the engine's hooks ----------------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self):
        with jrt.precision_scope(self.runtime.dtype), jax.default_device(self._jdev):
            yield

    def keras_jit(self) -> bool:
        return True  # Keras' "auto" on JAX: its train function under jax.jit

    def _variables(self) -> tuple[list, list, list]:
        opt = self.optimizer.variables if self.optimizer is not None else []
        return self.net.trainable_variables, self.net.non_trainable_variables, list(opt)

    def after_write(self) -> None:
        self._state = tuple([v.value for v in group] for group in self._variables())
        self._stale = False

    def before_read(self) -> None:
        if self._state is None or not self._stale:
            return
        with self.scope():
            for group, values in zip(self._variables(), self._state, strict=True):
                for var, value in zip(group, values, strict=True):
                    var.assign(value)
        self._stale = False

    # -- timed face ------------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return loader_mod.device_loader(
            x, y, order, batch_size, device=self._jdev, dtype=self.dtype,
            data_format=self.fast.data_format,
        )  # fmt: skip

    def train_step(self, batch: Batch):
        self.need_training()
        if self.fast.step == "keras":
            self.before_read()
            with self.scope():
                logs = self.net.train_on_batch(batch[0], batch[1], return_dict=True)
            self.after_write()
            return logs["loss"]  # a Python float: train_on_batch reads it back itself
        tv, ntv, ov = self._state
        with self.scope():
            loss, tv, ntv, ov = self._step_fn(tv, ntv, ov, batch[0], batch[1])
        self._state = (tv, ntv, ov)
        self._stale = True
        self._last = loss
        return loss

    def predict(self, batch: Batch):
        tv, ntv, _ = self._state
        with self.scope():
            self._last = self._predict_fn(tv, ntv, batch[0])
        return self._last

    def generate_step(self, ids, offset: int, cache: dict[str, KV] | None):
        tv, ntv, _ = self._state
        with self.scope():
            if cache is None:
                out = self._prefill_fn(tv, ntv, ids)
            else:
                at = jax.device_put(np.int32(offset), self._jdev)
                out = self._decode_fn(tv, ntv, ids, at, cache)
        self._last = out[1]
        return out

    def sync(self, value=None) -> None:
        """Wait for ``value`` or, without one, for the last program dispatched (JAX's calls
        return before the device is done)."""
        value = self._last if value is None else value
        if value is not None and not isinstance(value, float):
            jax.block_until_ready(value)

    def to_numpy(self, value) -> np.ndarray:
        out = np.asarray(value)
        return out.astype(np.float32) if out.dtype.name == "bfloat16" else out

    # -- NumPy face ------------------------------------------------------------------------------
    def loss_and_grads(self, x: np.ndarray, y: np.ndarray):
        self.need_training()
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        tv, ntv, _ = self._state
        with self.scope():
            loss, grads = self._grads_fn(tv, ntv, batch[0], batch[1])
        by_var = {
            id(v): np.asarray(g) for v, g in zip(self.net.trainable_variables, grads, strict=True)
        }
        return float(np.asarray(loss)), self.canonical_grads(by_var)

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return loader_mod.to_canonical(batch, self.fast.data_format)

    # -- description -----------------------------------------------------------------------------
    def manifest(self) -> dict:
        s = jrt.settings()
        jit = "jax.jit (Keras' train_on_batch, jit_compile=True)"
        if self.fast.step == "custom":
            jit = "jax.jit of a stateless step (stateless_call + value_and_grad + stateless_apply)"
        w = self.workload
        has_gru = any(isinstance(n, ops.GRU) for n, _, _ in walk(w.graph, w.input.shape))
        return {
            **self.keras_manifest(),
            "device": str(self._jdev),
            "compile": jit,
            "autotune": "XLA autotuning (default)" if self.device == "cuda" else "n/a",
            "fused_rnn": (
                "no: Keras' GRU loop (lax.scan); Keras on JAX has a cuDNN path on GPUs only"
                if has_gru
                else "n/a"
            ),
            "loader": (
                "host np.take + layout -> jax.device_put, prefetching "
                f"{loader_mod.PREFETCH_DEPTH} batches"
            ),
            "gated_program": (
                "the jitted stateless train step the timed loop calls (dropout gate off, an "
                "input of the same executable)"
                if self.fast.step == "custom" and self.optimizer is not None
                else "model.train_on_batch's train function (dropout gate off)"
                if self.optimizer is not None
                else "the jitted stateless forward (forward-only workload)"
            ),
            "generation": (
                "jax.jit of the stateless prefill and decode step (keras.StatelessScope over "
                "the state; keras_common/decoding.py): a static KV cache (N, context, heads, d) "
                "per causal attention written at the offset with keras.ops.slice_update, "
                "donated; one executable per input shape"
                if self._has(ops.CausalAttention)
                else "n/a"
            ),
            "xla_flags": s.xla_flags,
            "jax_platforms": s.platforms,
            "threads_note": s.note or "n/a",
        }


def build(workload: Workload, params, runtime: Runtime, *, keras_step: str | None = None):
    """Lower ``workload`` to a Keras model on JAX holding ``params`` (canonical names), under
    the configured ``runtime``; ``keras_step`` overrides the runtime's (benchmarks only)."""
    driver.check_lowerable(TABLE, workload.graph)
    step, why = step_in_effect(keras_step or runtime.option("step"), "jax")
    fast = KerasFastPath(DATA_FORMAT, step, why, WHY_LAYOUT)
    with jrt.precision_scope(runtime.dtype), jax.default_device(jrt.jax_device(runtime.device)):
        return KerasJaxModel(workload, params, runtime, fast)


__all__ = ["KerasJaxModel", "build"]
