"""The spec's optimisers on Keras, on any engine: Keras' own SGD, and Algorithm 1 Adam as a small
Optimizer (only ``keras.ops``: the same rule on TensorFlow, JAX and PyTorch).

Hyper-parameters are handed to Keras as ``np.float64`` scalars (a ``float`` subclass, so Keras
accepts them) and the learning rate as a callable (harmless on JAX and PyTorch): TensorFlow
turns a Python float into a float32 tensor before any cast, so Keras'
``ops.cast(0.9, "float64")`` is 0.8999999761581421 and a float64 model would be updated with
float32-rounded momentum and learning rate (~3e-8 relative, above the spec's float64 bound of
1e-8). A float64 scalar is cast exactly, and rounded once to float32 for float32 variables.

- **SGD**: ``keras.optimizers.SGD`` unchanged. Its form ``v = m*v - lr*g; w += v`` equals the
  spec's ``buf = m*buf + g; w -= lr*buf`` at constant lr (``v = -lr*buf``); the float64 test
  (``tests/test_backend_tensorflow.py``) shows it, and the conformance suite's float64 gate on
  every Keras engine.
- **Adam**: Keras' Adam puts epsilon outside the bias correction
  (``w -= lr*sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v)+eps)``); ``SpecAdam`` implements the spec's
  Kingma & Ba Algorithm 1, ``w -= lr * m_hat / (sqrt(v_hat) + eps)``, densely (an embedding
  row without gradient still decays its moments and moves, as in the reference).
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
from keras import ops

from rosetta.spec.workload import SGD, Adam, AdamW


class SpecAdam(keras.optimizers.Optimizer):
    """Adam as Kingma & Ba's Algorithm 1 (the spec's form; PyTorch and Optax use it too)."""

    def __init__(
        self,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        name: str = "spec_adam",
        dense: Callable | None = None,
    ):
        super().__init__(learning_rate=_constant(lr), name=name)
        self._dense = dense or _identity  # TensorFlow: an embedding's IndexedSlices -> dense
        self.beta1 = np.float64(beta1)
        self.beta2 = np.float64(beta2)
        self.eps = np.float64(eps)

    def build(self, variables) -> None:
        if self.built:
            return
        super().build(variables)
        self._m = self.add_optimizer_variables(variables, "m")
        self._v = self.add_optimizer_variables(variables, "v")

    def update_step(self, gradient, variable, learning_rate) -> None:
        self._adam_step(gradient, variable, learning_rate)

    def _adam_step(self, gradient, variable, learning_rate) -> None:
        """Algorithm 1 on one variable (an engine may run it as its own kernel)."""
        dt = variable.dtype
        g = ops.cast(self._dense(gradient), dt)
        i = self._get_variable_index(variable)
        m, v = self._m[i], self._v[i]
        hi = _wide(dt)
        t = ops.cast(self.iterations + 1, hi)
        b1, b2 = ops.cast(self.beta1, dt), ops.cast(self.beta2, dt)
        self.assign(m, b1 * m + ops.cast(1.0 - self.beta1, dt) * g)
        self.assign(v, b2 * v + ops.cast(1.0 - self.beta2, dt) * (g * g))
        # bias corrections in float64, rounded once to the variable's dtype (as the reference)
        m_hat = m / ops.cast(1.0 - ops.power(ops.cast(self.beta1, hi), t), dt)
        v_hat = v / ops.cast(1.0 - ops.power(ops.cast(self.beta2, hi), t), dt)
        step = ops.cast(learning_rate, dt) * m_hat / (ops.sqrt(v_hat) + ops.cast(self.eps, dt))
        self.assign_sub(variable, step)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(beta1=float(self.beta1), beta2=float(self.beta2), eps=float(self.eps))
        return config


class SpecAdamW(SpecAdam):
    """AdamW, decoupled (PyTorch's and Optax's form): ``w -= lr * wd * w`` on the variables
    :meth:`decay_only` names (the spec's decay roles), then Algorithm 1's step (which never sees
    the decay). Keras' own AdamW has Keras' Adam's epsilon placement, so it is not used."""

    def __init__(
        self,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        dense: Callable | None = None,
    ):
        super().__init__(lr, beta1, beta2, eps, name="spec_adamw", dense=dense)
        self.decay_rate = np.float64(weight_decay)
        self._decayed: set = set()

    def decay_only(self, variables) -> None:
        """The variables that decay (the spec's ``decay`` roles); every other takes Adam's step."""
        self._decayed = {self._var_key(v) for v in variables}  # the key update_step sees

    def update_step(self, gradient, variable, learning_rate) -> None:
        if self._var_key(variable) in self._decayed:
            dt = variable.dtype
            decay = ops.cast(learning_rate, dt) * ops.cast(self.decay_rate, dt)
            self.assign_sub(variable, decay * variable)
        self._adam_step(gradient, variable, learning_rate)


def decayed_variables(spec, bindings) -> list:
    """The Keras variables of the canonical parameters ``spec`` (AdamW) decays."""
    out = []
    for b in bindings:
        found = b.variables
        if len(found) == len(b.names):  # one variable per canonical name (not the GRU's bias)
            out += [v for n, v in zip(b.names, found, strict=True) if spec.decays(n)]
    return out


def _identity(x):
    return x


def _wide(dtype) -> str:
    """The dtype of Adam's bias corrections: float64 (rounded once to the variable's dtype, as
    the reference), except on JAX outside its x64 mode, which has no float64 (a float32 model
    there: the corrections in float32, within float32's tolerance)."""
    if keras.backend.backend() == "jax" and str(dtype) != "float64":
        return "float32"
    return "float64"


def _constant(lr: float):
    """A constant learning rate Keras casts exactly (see the module docstring)."""
    value = np.float64(lr)
    return lambda: value


def make_optimizer(spec, dense: Callable | None = None) -> keras.optimizers.Optimizer | None:
    """The Keras optimiser for the spec's ``SGD``/``Adam`` (``None`` for forward-only work);
    ``dense`` makes a gradient dense where the engine hands out sparse ones (TensorFlow)."""
    if isinstance(spec, SGD):
        return keras.optimizers.SGD(
            learning_rate=_constant(spec.lr),
            momentum=np.float64(spec.momentum),
            nesterov=spec.nesterov,
        )
    if isinstance(spec, Adam):
        return SpecAdam(spec.lr, spec.beta1, spec.beta2, spec.eps, dense=dense)
    if isinstance(spec, AdamW):
        return SpecAdamW(spec.lr, spec.beta1, spec.beta2, spec.eps, spec.weight_decay, dense=dense)
    return None


def describe(spec) -> str:
    """The optimiser line of the manifest."""
    if isinstance(spec, SGD):
        return (
            "keras.optimizers.SGD (v = m*v - lr*g; w += v: the spec's form at constant lr), "
            "hyper-parameters passed as float64 so none is rounded through float32"
        )
    if isinstance(spec, Adam):
        return (
            "SpecAdam (a keras Optimizer): Kingma & Ba Algorithm 1, "
            "w -= lr*m_hat/(sqrt(v_hat)+eps), "
            "dense; Keras' Adam (eps outside the bias correction) is not used"
        )
    if isinstance(spec, AdamW):
        return (
            "SpecAdamW (a keras Optimizer): w -= lr*wd*w on the spec's decay roles, then "
            "Algorithm 1; Keras' AdamW (eps outside the bias correction) is not used"
        )
    return "n/a (forward only)"
