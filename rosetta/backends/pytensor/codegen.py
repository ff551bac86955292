"""The PyTensor file: a symbolic ``forward(p, x, rngs)`` over a dict of ``shared`` variables keyed
by the spec's names, the loss, ``pytensor.grad``, the spec's SGD or Adam written out as the
``updates`` of a compiled step (PyTensor has no optimiser library: Theano's idiom), the features
function, and ``--check``. AdamW decays the parameters by the role in their name (the part after
the last dot), the shared variables being named by the spec's names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "PyTensor"
NEEDS = "NumPy and PyTensor"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "pytensor")


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    if isinstance(o, SGD):
        step = "(g + momentum * buf1)" if o.nesterov else "buf1"
        body = f"""    lr, momentum = c({o.lr}), c({o.momentum})

    def updates(params, grads):
        out = []
        for w, g in zip(params, grads):
            buf = pytensor.shared(np.zeros_like(w.get_value()))  # starts at 0: first buf = g
            buf1 = momentum * buf + g
            out += [(buf, buf1), (w, w - lr * {step})]
        return out

    return updates"""
    elif isinstance(o, (Adam, AdamW)):
        decoupled = isinstance(o, AdamW)  # AdamW: Adam with the weight decayed from itself
        consts, decay, w0 = f"    b1, b2 = c({o.beta1}), c({o.beta2})", "", "w"
        if decoupled:
            consts = f"""    b1, b2, wd = c({o.beta1}), c({o.beta2}), c({o.weight_decay})
    # the roles that decay (the part of a parameter's name after its last dot)
    decay = {tuple(o.decay)!r}"""
            decay = """
            # decoupled: the weight decays from itself, the moments never see it
            w0 = w - lr * wd * w if w.name.rsplit(".", 1)[-1] in decay else w"""
            w0 = "w0"
        body = f"""    lr, eps, one = c({o.lr}), c({o.eps}), c(1.0)
{consts}

    def updates(params, grads):
        t = pytensor.shared(np.asarray(0.0, dtype=dtype))  # the step count
        t1 = t + one
        out = [(t, t1)]
        for w, g in zip(params, grads):
            m = pytensor.shared(np.zeros_like(w.get_value()))
            v = pytensor.shared(np.zeros_like(w.get_value()))
            m1 = b1 * m + (one - b1) * g
            v1 = b2 * v + (one - b2) * g * g
            m_hat, v_hat = m1 / (one - b1**t1), v1 / (one - b2**t1){decay}
            out += [(m, m1), (v, v1), (w, {w0} - lr * m_hat / (pt.sqrt(v_hat) + eps))]
        return out

    return updates"""
    else:
        return ""
    return f'''

def loss_fn(logits, y):
    """Softmax cross-entropy, mean over the batch."""
    logp = pt.special.log_softmax(logits, axis=-1)
    return -logp[pt.arange(y.shape[0]), y].mean()


def make_optimizer(dtype):
    """{common.optimizer_comment(workload)}. Returns ``updates(params, grads)``: the (shared
    variable, new value) pairs of one step, its state in new shared variables."""

    def c(value):
        return pt.constant(np.asarray(value, dtype=dtype))

{body}


def make_train_step(p, x, y, rng, dtype):
    """One optimiser step as a compiled function of (x, y): the loss, its gradients by
    ``pytensor.grad``, the updates applied in place; ``rng`` None switches dropout off."""
    rngs = None if rng is None else [rng]
    loss = loss_fn(forward(p, x, rngs), y)
    params = [p[n] for n in TRAINABLE]
    updates = make_optimizer(dtype)(params, pytensor.grad(loss, params))
    if rngs is not None and len(rngs) > 1:
        updates.append((rng, rngs[-1]))  # the generator's state after this step's draws
    return pytensor.function([x, y], loss, updates=updates, mode=MODE)
'''


def _check(workload: Workload) -> str:
    if len(workload.input.shape) == 1:
        to_x = "np.ascontiguousarray(x, dtype=np.int32)"
        x_type = 'pt.tensor("x", dtype="int32", shape=(None, xt.shape[1]))'
    else:
        to_x = "np.ascontiguousarray(x.transpose(0, 2, 3, 1), dtype=dtype)  # (N, C, H, W) -> NHWC"
        x_type = 'pt.tensor("x", dtype=dtype, shape=(None, *xt.shape[1:]))'
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yv = pt.vector("y", dtype="int64")
        yt = y.astype(np.int64)
        params = [p[n] for n in TRAINABLE]
        loss = loss_fn(forward(p, xv, None), yv)  # dropout off
        grads = pytensor.grad(loss, params)
        loss_and_grads = pytensor.function([xv, yv], [loss, *grads], mode=MODE)
        value, *grads = loss_and_grads(xt, yt)
        out["loss"] = np.float64(value)
        out.update({f"grad:{n}": a for n, a in read_weights(dict(zip(TRAINABLE, grads))).items()})
        train_step = make_train_step(p, xv, yv, None, dtype)
        for _ in range(k):
            train_step(xt, yt)
        values = {n: p[n].get_value() for n in TRAINABLE}
        out.update({f"params:{n}": a for n, a in read_weights(values).items()})"""
    return f'''

def features_step(p, x):
    """The evaluation-mode forward (dropout off, BatchNorm on its running statistics) compiled
    as a function of the input variable ``x``."""
    return pytensor.function([x], forward(p, x, None), mode=MODE)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    p = load_weights(weights, dtype)
    xt = {to_x}
    xv = {x_type}
    out = {{"forward": np.asarray(features_step(p, xv)(xt))}}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated PyTensor file for ``workload``."""
    m = rendered.model
    forward = "\n".join(f"    {line.replace('{x}', 'x')}" for line in m.forward)
    if "pad" in m.helpers:
        # the convolutions' and poolings' batch size, read once off the input: a shape read
        # off a deep layer's output makes pt.alloc rewrite that whole graph at every padding
        forward = "    n = x.shape[0]  # the batch size\n" + forward
    return (
        common.header(workload, FRAMEWORK, "pytensor", NEEDS)
        + f'''
import argparse

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode

# the C linker (each op's C code, compiled once by g++ and cached on disk) with FAST_RUN's graph
# rewrites; PyTensor 3's own default links with Numba, which compiles each new graph far longer
MODE = Mode(linker="cvm", optimizer="fast_run")
{common.CHECK_IO}{rendered.helpers}

def forward(p, x, rngs=None):
    """The spec's model (see DESCRIPTION), symbolically: its layers in graph order.

    ``p``: the ``shared`` parameters by the spec's names (native layouts, see ``weight_table``);
    ``rngs``: a list holding a shared random generator when training (dropout draws), None for
    evaluation."""
{forward}
    return x


SHAPES = {common.shapes_literal(workload)}
TRAINABLE = {common.trainable_literal(workload)}


def weight_table():
    """(canonical name, its part, the key in ``p``, its part, canonical -> native,
    native -> canonical), one row per tensor of the canonical .npz."""
    return [
{common.weight_rows(m.weights)}
    ]


def load_weights(weights, dtype="float32"):
    """The canonical arrays ``weights`` (name -> array) as ``forward``'s ``p``: shared variables."""
    return {{
        key: pytensor.shared(np.asarray(to_native(weights[name][cpart]), dtype=dtype), name=key)
        for name, cpart, key, _, to_native, _ in weight_table()
    }}


def read_weights(values):
    """``values`` (key -> array: parameter values or gradients) in canonical names and layouts."""
    pieces = {{}}
    for name, cpart, key, npart, _, to_canonical in weight_table():
        if key in values:
            native = np.asarray(values[key])[npart]
            pieces.setdefault(name, []).append((cpart, to_canonical(native)))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + _check(workload)
        + common.main_source(workload, common.example_input(workload))
    )
