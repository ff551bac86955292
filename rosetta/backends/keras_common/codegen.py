"""The Keras file on the JAX and PyTorch engines: what both say the same way (the functional
``keras.Model``, the weight table, the spec's optimiser, the loss); ``keras_jax.py`` and
``keras_torch.py`` add the engine's training step and ``--check``.

The model's lines come from the shared Keras table (``rosetta/backends/keras_common/ops/``),
channels-last as Keras writes by default, whatever layout the backend itself runs in. The
optimiser: Keras' SGD with momentum (``v = m * v - lr * g; w += v``) is the spec's form at a
constant learning rate, so the stock one is used; Keras' Adam adds epsilon to ``sqrt(v)`` before
the bias correction, so the file writes the spec's Algorithm 1 out as a small
``keras.optimizers.Optimizer`` (``keras.ops`` only: the same class on every engine). A float64
check keeps float64 as float64: Keras' type promotion narrows it to float32 on these engines
(``keras_common/engine.py``, ``FLOAT64_NOTE``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

ADAM = '''

class Adam(keras.optimizers.Optimizer):
    """The spec's Adam (Kingma & Ba, Algorithm 1): w -= lr * m_hat / (sqrt(v_hat) + eps).

    keras.optimizers.Adam adds eps to sqrt(v) before the bias correction (an effective eps of
    eps * sqrt(1 - beta2**t)): the same away from |g| ~ eps, not the spec's rule there."""

    def __init__(self, lr, beta1, beta2, eps, weight_decay=None):
        # weight_decay: Keras' own decoupled decay, w -= w * wd * lr before each step
        super().__init__(learning_rate=lr, weight_decay=weight_decay, name="spec_adam")
        self.beta1, self.beta2, self.eps = beta1, beta2, eps

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self.m = self.add_optimizer_variables(variables, "m")
        self.v = self.add_optimizer_variables(variables, "v")

    def update_step(self, g, w, lr):
        dt = w.dtype
        i = self._get_variable_index(w)
        m, v = self.m[i], self.v[i]
        t = keras.ops.cast(self.iterations + 1, dt)
        g = keras.ops.cast(g, dt)
        self.assign(m, self.beta1 * m + (1 - self.beta1) * g)
        self.assign(v, self.beta2 * v + (1 - self.beta2) * g * g)
        m_hat = m / (1 - keras.ops.power(keras.ops.cast(self.beta1, dt), t))
        v_hat = v / (1 - keras.ops.power(keras.ops.cast(self.beta2, dt), t))
        self.assign_sub(w, keras.ops.cast(lr, dt) * m_hat / (keras.ops.sqrt(v_hat) + self.eps))
'''


def optimizer_source(workload: Workload) -> str:
    """``make_optimizer`` (and the spec's Adam where the workload trains with it) and
    ``loss_fn``; empty for a features workload."""
    o = workload.optimizer
    extra = ""
    if isinstance(o, SGD):
        nesterov = ", nesterov=True" if o.nesterov else ""
        call = f"keras.optimizers.SGD(learning_rate={o.lr}, momentum={o.momentum}{nesterov})"
        why = "Keras' SGD (v = m * v - lr * g; w += v) is that rule at a constant lr"
    elif isinstance(o, Adam):
        extra = ADAM
        call = f"Adam(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps})"
        why = "written out above: Keras' own Adam places eps differently"
    elif isinstance(o, AdamW):
        extra = ADAM
        call = (
            f"Adam(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps}, "
            f"weight_decay={o.weight_decay})\n"
            f"    decay = {tuple(o.decay)!r}  # the roles that decay\n"
            "    optimizer.exclude_from_weight_decay(\n"
            "        var_list=[v for name, _, v, *_ in weight_table(model)"
            ' if name.rsplit(".", 1)[-1] not in decay]\n'
            "    )"
        )
        why = (
            "Adam written out above (Keras' own places eps differently), with Keras' decoupled\n"
            "    weight_decay (w -= w * wd * lr before each step) on the spec's roles only"
        )
    else:
        return ""
    return f'''{extra}

def make_optimizer(model):
    """{common.optimizer_comment(workload)}.
    {why}."""
    optimizer = {call}
    optimizer.build(model.trainable_variables)
    return optimizer


def loss_fn(y, logits):
    """Softmax cross-entropy, mean over every label: per sample, or per position of a
    sequence (in the logits' dtype)."""
    return keras.ops.mean(keras.ops.sparse_categorical_crossentropy(y, logits, from_logits=True))
'''


def to_input(workload: Workload) -> str:
    """The expression turning a canonical ``x`` into the model's input (channels-last)."""
    if len(workload.input.shape) == 1:
        return "x.astype(np.int32)"
    return "x.transpose(0, 2, 3, 1).astype(dtype)  # (N, C, H, W) -> (N, H, W, C)"


def source(
    workload: Workload, rendered: Rendered, *, framework: str, backend: str, engine: str,
    engine_imports: str, step: str, check: str,
) -> str:  # fmt: skip
    """The whole generated Keras file for ``workload`` on ``engine`` (its imports, training
    step and check text given by the engine's module)."""
    m = rendered.model
    if len(workload.input.shape) == 1:
        inputs = f'keras.Input(shape={workload.input.shape!r}, dtype="int32")  # token ids (N, T)'
    else:
        c, h, w = workload.input.shape
        inputs = f"keras.Input(shape=({h}, {w}, {c}))  # channels-last: (N, H, W, C)"
    forward = "\n".join(f"    {line.replace('{x}', 'x')}" for line in m.forward)
    needs = f"NumPy, Keras and {framework.split(' on ')[-1]}"
    return (
        common.header(workload, framework, backend, needs)
        + f'''
import argparse
import os

os.environ["KERAS_BACKEND"] = "{engine}"  # Keras reads its engine once, at its import

{engine_imports}import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402
{common.CHECK_IO}{rendered.helpers}

def keep_float64():
    """Keras narrows float64 to float32 on the JAX and PyTorch engines (its type promotion follows
    JAX's default); a float64 check keeps float64."""
    from keras.src.backend.common import dtypes

    dtypes.BIT64_TO_BIT32_DTYPE["float64"] = "float64"


def build_model():
    """The spec's model (see DESCRIPTION): its layers in graph order."""
    inputs = {inputs}
    x = inputs
{forward}
    return keras.Model(inputs, x, name={common.q(workload.name)})


SHAPES = {common.shapes_literal(workload)}


def weight_table(model):
    """(canonical name, its part, the model's variable, its part, canonical -> native,
    native -> canonical), one row per tensor of the canonical .npz."""
    return [
{common.weight_rows(m.weights)}
    ]


def load_weights(model, weights):
    """Assign the canonical arrays ``weights`` (name -> array) to ``model``'s variables."""
    for name, cpart, var, npart, to_native, _ in weight_table(model):
        value = to_native(weights[name][cpart])
        if npart != ALL:  # one part of a variable (the GRU's bias rows)
            full = keras.ops.convert_to_numpy(var).copy()
            full[npart] = value
            value = full
        var.assign(np.asarray(value, dtype=var.dtype))


def read_weights(model, grads=None):
    """The model's variables (or their gradients, ``{{id(variable): gradient}}``) in canonical
    names and layouts."""
    pieces = {{}}
    for name, cpart, var, npart, _, to_canonical in weight_table(model):
        value = var if grads is None else grads.get(id(var))
        if value is not None:
            a = np.asarray(keras.ops.convert_to_numpy(value))
            pieces.setdefault(name, []).append((cpart, to_canonical(a[npart])))
    return assemble(pieces, SHAPES)
'''
        + optimizer_source(workload)
        + step
        + check
        + common.main_source(workload, common.example_input(workload))
    )
