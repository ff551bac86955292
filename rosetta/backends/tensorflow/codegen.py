"""The Keras file (TensorFlow backend): a functional ``keras.Model``, the weight table, the
training step under ``tf.GradientTape`` (or the features step), and ``--check``.

The optimiser: Keras' SGD with momentum (``v = m * v - lr * g; w += v``) is the spec's form at a
constant learning rate (``v = -lr * buf``), so the stock one is used. Keras' Adam adds epsilon to
``sqrt(v)`` before the bias correction, not to ``sqrt(v_hat)`` as the spec's Algorithm 1 does, so
the file writes the spec's Adam out as a small class."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "Keras (TensorFlow)"
NEEDS = "NumPy and TensorFlow/Keras"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "tensorflow", "keras")

ADAM = '''

class Adam:
    """The spec's Adam (Kingma & Ba, Algorithm 1): w -= lr * m_hat / (sqrt(v_hat) + eps).

    keras.optimizers.Adam adds eps to sqrt(v) before the bias correction (an effective eps of
    eps * sqrt(1 - beta2**t)): the same away from |g| ~ eps, not the spec's rule there."""

    def __init__(self, variables, lr, beta1, beta2, eps, weight_decay=0.0, decayed=()):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay, self.decayed = weight_decay, {id(v) for v in decayed}  # AdamW
        self.m = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in variables]
        self.v = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in variables]
        self.t = tf.Variable(0.0, dtype=tf.float64, trainable=False)

    def apply_gradients(self, grads_and_vars):
        self.t.assign_add(1.0)
        for (g, w), m, v in zip(grads_and_vars, self.m, self.v):
            g = tf.convert_to_tensor(g)  # an embedding's gradient comes as IndexedSlices

            def c(value, dt=g.dtype):  # a float64 scalar rounded once to the variable's dtype
                return tf.cast(tf.convert_to_tensor(value, tf.float64), dt)

            if id(w) in self.decayed:  # AdamW: decoupled, before the step, never in m or v
                w.assign_sub(c(self.lr) * c(self.weight_decay) * w)
            m.assign(c(self.beta1) * m + c(1 - self.beta1) * g)
            v.assign(c(self.beta2) * v + c(1 - self.beta2) * g * g)
            m_hat = m / c(1 - self.beta1**self.t)
            v_hat = v / c(1 - self.beta2**self.t)
            w.assign_sub(c(self.lr) * m_hat / (tf.sqrt(v_hat) + c(self.eps)))
'''


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    extra = ""
    if isinstance(o, SGD):
        nesterov = ", nesterov=True" if o.nesterov else ""
        call = (
            f"keras.optimizers.SGD(\n        learning_rate=lambda: np.float64({o.lr}), "
            f"momentum=np.float64({o.momentum}){nesterov}\n    )"
        )
        why = (
            "Keras' SGD (v = m * v - lr * g; w += v) is that rule at a constant lr. The\n"
            "    hyper-parameters are float64 scalars (a Python float would reach a float64\n"
            "    model rounded to float32 first) and lr a callable, for the same reason"
        )
    elif isinstance(o, Adam):
        extra = ADAM
        call = (
            f"Adam(model.trainable_variables, lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, "
            f"eps={o.eps})"
        )
        why = "written out above: Keras' own Adam places eps differently"
    elif isinstance(o, AdamW):
        extra = ADAM
        call = (
            f"Adam(model.trainable_variables, lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, "
            f"eps={o.eps}, weight_decay={o.weight_decay},\n        decayed=[t for name, _, t, *_ "
            f"in weight_table(model) if name.rsplit('.', 1)[-1] in {tuple(o.decay)!r}])"
        )
        why = "written out above (with the decay): Keras' AdamW places eps differently"
    else:
        return ""
    return f'''{extra}

def make_optimizer(model):
    """{common.optimizer_comment(workload)}.
    {why}."""
    return {call}


def loss_fn(y, logits):
    """Softmax cross-entropy, mean over every label: per sample, or per position of a
    sequence (in the logits' dtype)."""
    return keras.ops.mean(keras.ops.sparse_categorical_crossentropy(y, logits, from_logits=True))


def make_train_step(model, optimizer):
    """One optimiser step on (x, y) as a compiled function; training=False: dropout off."""

    @tf.function
    def train_step(x, y, training=True):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=training))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return train_step
'''


def _check(workload: Workload) -> str:
    if len(workload.input.shape) == 1:
        to_x = "x.astype(np.int32)"
    else:
        to_x = "x.transpose(0, 2, 3, 1).astype(dtype)  # (N, C, H, W) -> (N, H, W, C)"
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = y.astype(np.int64)
        with tf.GradientTape() as tape:
            loss = loss_fn(yt, model(xt, training=False))
        variables = model.trainable_variables
        grads = {id(v): g for v, g in zip(variables, tape.gradient(loss, variables))}
        out["loss"] = np.float64(loss.numpy())
        out.update({f"grad:{n}": a for n, a in read_weights(model, grads).items()})
        train_step = make_train_step(model, make_optimizer(model))
        for _ in range(k):
            train_step(xt, yt, training=False)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    return model(x, training=False)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    keras.config.set_floatx(dtype)
    keras.utils.set_random_seed(0)
    model = build_model()
    load_weights(model, weights)
    xt = {to_x}
    out = {{"forward": keras.ops.convert_to_numpy(features_step(model, xt))}}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated Keras file for ``workload``."""
    m = rendered.model
    if len(workload.input.shape) == 1:
        inputs = f'keras.Input(shape={workload.input.shape!r}, dtype="int32")  # token ids (N, T)'
    else:
        c, h, w = workload.input.shape
        inputs = f"keras.Input(shape=({h}, {w}, {c}))  # channels-last: (N, H, W, C)"
    forward = "\n".join(f"    {line.replace('{x}', 'x')}" for line in m.forward)
    return (
        common.header(workload, FRAMEWORK, "tensorflow", NEEDS)
        + f'''
import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402
{common.CHECK_IO}{rendered.helpers}

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
            a = keras.ops.convert_to_numpy(tf.convert_to_tensor(value))
            pieces.setdefault(name, []).append((cpart, to_canonical(a[npart])))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + _check(workload)
        + common.main_source(workload, common.example_input(workload))
    )
