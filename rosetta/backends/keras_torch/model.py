"""``KerasTorchModel``: a workload as a Keras 3 functional model on the PyTorch engine.

The engine-neutral half (lowering, bindings, optimiser, loss, the choice of training step) is
``keras_common/model.py``. What is PyTorch's own:

- **The custom step** is Keras' own ``TorchTrainer.train_step`` without its bookkeeping: the
  model called in training mode, the loss, ``loss.backward()`` on the variables' torch
  parameters (their ``.grad`` cleared first), and ``optimizer.apply`` under ``torch.no_grad()``;
  it returns the loss as a detached tensor (nothing read back). Eager, as Keras runs it on this
  engine (``jit_compile="auto"`` resolves to off on torch; ``torch.compile`` through Keras is
  documented as experimental). The ``keras`` step is ``model.train_on_batch``.
- **Dropout** is gated by a non-trainable boolean ``keras.Variable`` read in the call
  (``lowering.GatedDropout``): ``set_dropout`` assigns it, and the gate's k steps run this very
  step with it off.
- The variables are Keras' (torch parameters on the device); ``predict`` runs under
  ``torch.no_grad()`` in evaluation mode.
- **Generating** (a decoder): the shared step (``keras_common/decoding.py``) eagerly under
  ``torch.no_grad()``, as ``predict``: the offset a Python int, so ``keras.ops.slice_update``
  writes the new keys and values by plain slicing; the fused core (``FusedSelfAttention``)
  reads the cache under the boolean mask of the slots written so far.
"""

from __future__ import annotations

# Keras' engine is chosen (runtime.py) before anything imports keras
from rosetta.backends.keras_torch import runtime as trt  # isort: split

import keras
import numpy as np
import torch

from rosetta.backends import driver
from rosetta.backends.base import Batch
from rosetta.backends.keras_common.decoding import KV
from rosetta.backends.keras_common.model import KerasEngineModel, KerasFastPath, step_in_effect
from rosetta.backends.keras_torch import loader as loader_mod
from rosetta.backends.keras_torch.lowering import DATA_FORMAT, TABLE, WHY_LAYOUT
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import Workload


class KerasTorchModel(KerasEngineModel):
    """A workload as a Keras model on PyTorch (see the module docstring)."""

    backend = "keras_torch"
    engine = "torch"
    table = TABLE

    def __init__(self, workload: Workload, params, runtime: Runtime, fast: KerasFastPath):
        self._kdev = trt.keras_device(runtime.device)
        self._place = loader_mod.placement(self._kdev, runtime.dtype)
        torch.manual_seed(runtime.seed)  # FusedDropout's stream, as the torch backend seeds it
        super().__init__(workload, params, runtime, fast)

    def scope(self):
        return keras.device(self._kdev)

    def make_gate(self):
        """A Python flag: Keras on PyTorch runs the model eagerly, so the dropout layers choose
        in Python and select nothing over the activations (``keras_common.lowering.EagerGate``)."""
        from rosetta.backends.keras_common.lowering import EagerGate

        return EagerGate(True)

    def make_optimizer(self, spec):
        """Adam and AdamW updating every variable at once (``keras_torch/optim.py``)."""
        from rosetta.backends.keras_torch.optim import make_optimizer

        return make_optimizer(spec)

    def native_layers(self) -> dict:
        """PyTorch's own dropout kernel (its generator seeded at construction, from the
        runtime's seed), and its fused GRU and attention where the options ``gru`` and
        ``attention`` choose them (``gru_in_effect``, ``attention_in_effect``)."""
        from rosetta.backends.keras_torch.lowering import (
            FusedDropout,
            FusedSelfAttention,
            fused_gru,
        )

        native = {"dropout": FusedDropout}
        if gru_in_effect(self.runtime)[0] == "fused":
            native["gru"] = fused_gru
        if attention_in_effect(self.runtime)[0] == "fused":
            native["attention"] = FusedSelfAttention
        return native

    def keras_jit(self) -> bool:
        return False  # Keras' "auto" on torch: eager

    # -- the step ----------------------------------------------------------------------------------
    def _loss(self, x, y, training: bool):
        return self.loss(y, self.net(x, training=training))

    def _custom_step(self, x, y):
        variables = self.net.trainable_variables
        for v in variables:
            v.value.grad = None
        loss = self._loss(x, y, training=True)
        loss.backward()
        with torch.no_grad():
            self.optimizer.apply([v.value.grad for v in variables], variables)
        return loss.detach()

    # -- timed face ------------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return loader_mod.native_loader(x, y, order, batch_size, self._place)

    def train_step(self, batch: Batch):
        self.need_training()
        with self.scope():
            if self.fast.step == "keras":
                logs = self.net.train_on_batch(batch[0], batch[1], return_dict=True)
                return logs["loss"]  # a Python float: train_on_batch reads it back itself
            return self._custom_step(batch[0], batch[1])

    def predict(self, batch: Batch):
        with self.scope(), torch.no_grad():
            return self.net(batch[0], training=False)

    def generate_step(self, ids, offset: int, cache: dict[str, KV] | None):
        with torch.no_grad():
            return super().generate_step(ids, offset, cache)

    def sync(self, value=None) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def to_numpy(self, value) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            value = value.detach().to("cpu")
            if value.dtype == torch.bfloat16:  # NumPy has no bfloat16: exact widening
                value = value.float()
            return value.numpy()
        return np.asarray(value)

    # -- NumPy face ------------------------------------------------------------------------------
    def loss_and_grads(self, x: np.ndarray, y: np.ndarray):
        self.need_training()
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        variables = self.net.trainable_variables
        with self.scope():
            for v in variables:
                v.value.grad = None
            loss = self._loss(batch[0], batch[1], training=False)
            loss.backward()
        by_var = {id(v): self.to_numpy(v.value.grad) for v in variables}
        for v in variables:
            v.value.grad = None
        return float(self.to_numpy(loss)), self.canonical_grads(by_var)

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return loader_mod.to_canonical(batch)

    # -- description -----------------------------------------------------------------------------
    def manifest(self) -> dict:
        w = self.workload
        kinds = {type(n) for n, _, _ in walk(w.graph, w.input.shape)}
        return {
            **self.keras_manifest(),
            "device": trt.device_name(self.device),
            "interop_threads": trt.interop_threads(),
            "compile": "eager (Keras' jit_compile auto is off on torch)",
            "autotune": "cuDNN autotune off (Keras' default)" if self.device == "cuda" else "n/a",
            "fused_rnn": gru_in_effect(self.runtime)[1] if ops.GRU in kinds else "n/a",
            "fused_attention": (
                attention_in_effect(self.runtime)[1]
                if kinds & {ops.Attention, ops.CausalAttention}
                else "n/a"
            ),
            "generation": (
                "eager under torch.no_grad, as predict (keras_common/decoding.py): a static KV "
                "cache (N, context, heads, d) per causal attention written at the offset (a "
                "Python int) with keras.ops.slice_update, read by the attention core under the "
                "mask of the slots written"
                if ops.CausalAttention in kinds
                else "n/a"
            ),
            "loader": (
                "the torch backend's DataLoader: whole-batch index gather, no workers "
                f"(NUM_WORKERS={loader_mod.NUM_WORKERS})"
                + (", pinned, one batch ahead" if self.device == "cuda" else "")
            ),
            "gated_program": (
                "the eager custom step the timed loop calls (dropout gate off)"
                if self.fast.step == "custom" and self.optimizer is not None
                else "model.train_on_batch (dropout gate off)"
                if self.optimizer is not None
                else "model(x, training=False) under torch.no_grad (forward-only workload)"
            ),
        }


def build(workload: Workload, params, runtime: Runtime, *, keras_step: str | None = None):
    """Lower ``workload`` to a Keras model on PyTorch holding ``params`` (canonical names), under
    the configured ``runtime``; ``keras_step`` overrides the runtime's (benchmarks only)."""
    driver.check_lowerable(TABLE, workload.graph)
    step, why = step_in_effect(keras_step or runtime.option("step"), "torch", runtime.device)
    fast = KerasFastPath(DATA_FORMAT, step, why, WHY_LAYOUT)
    with keras.device(trt.keras_device(runtime.device)):
        return KerasTorchModel(workload, params, runtime, fast)


__all__ = ["KerasTorchModel", "build"]


def attention_in_effect(runtime: Runtime) -> tuple[str, str]:
    """The attention core the option ``attention`` chooses, and why: ``default`` is ``fused``
    (PyTorch's ``scaled_dot_product_attention``, ``lowering.FusedSelfAttention``; causal: with
    ``is_causal=True``, as the ``torch`` backend's default) at every precision, ``keras`` the
    shared layer's ``keras.ops`` composition."""
    if runtime.option("attention") == "keras":
        return "keras", "no: keras.ops matmul, where, softmax, matmul (the shared SelfAttention)"
    return "fused", (
        "yes: torch.nn.functional.scaled_dot_product_attention, a boolean key mask (causal: "
        "is_causal=True)"
    )


def gru_in_effect(runtime: Runtime) -> tuple[str, str]:
    """The GRU the option ``gru`` chooses, and why: ``default`` is ``fused`` (PyTorch's
    ``nn.GRU``, ``lowering.fused_gru``) in float32 and float64, and Keras' own layer under a
    bf16 policy (the torch module's parameters stay in one dtype, where Keras' mixed policy
    computes in bf16 over float32 variables)."""
    chosen = runtime.option("gru")
    if chosen == "keras" or (chosen == "default" and runtime.precision != "fp32"):
        return "keras", "no: Keras' GRU, a loop over time steps (its cuDNN path on GPUs only)"
    if runtime.precision != "fp32":
        raise BackendError("backend 'keras_torch': gru=fused runs fp32 only; use gru=keras")
    return "fused", "yes: PyTorch's nn.GRU (one aten::gru) in keras.layers.TorchModuleWrapper"
