"""The MindSpore file: a ``mindspore.nn.Cell`` with its ``construct``, the weight table, the
training or features step, and ``--check``.

The optimiser: MindSpore's ``nn.Adam`` puts epsilon outside the bias correction (Keras'
placement), ``nn.AdamWeightDecay`` has no bias correction, ``nn.Momentum`` holds its momentum as
a float32 attribute: the file writes the spec's rule out as a small class (hyper-parameters as
tensors of each parameter's dtype), the way the backend does (``optim.py``). The model is made in
the dtype ``check`` asks for (each cell takes ``dtype``); where MindSpore's CPU kernels lack
float64 (``Conv2D``, ``BatchNorm``) or compute it in float32 (``LSTM``, ``AvgPool``) the file's
helpers write the same function out in MindSpore ops for float64 only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "MindSpore"
NEEDS = "NumPy and MindSpore"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "mindspore")

#: MindSpore 2.10 with NumPy 2: its first Python scalar made a tensor leaves an ImportError set
#: (compat.py says how it was found); the file clears it once, as the backend does
IMPORT = '''
import mindspore as ms
from mindspore import nn, ops


def _clear_numpy_abi_error():
    """MindSpore 2.10's core was built against NumPy 1.x: with NumPy 2 its first Python scalar
    made a tensor prints an ImportError and leaves it pending, failing the next call. Take that
    conversion once here, silenced (Python's own excepthook, not a notebook's), and clear what it
    leaves."""
    import contextlib
    import io
    import sys

    hook, sys.excepthook = sys.excepthook, sys.__excepthook__
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            ms.Tensor(1.0, ms.float32)
        except Exception:
            pass
        try:
            ops.zeros((1,), ms.float32).asnumpy()
        except SystemError:
            pass
    sys.excepthook = hook


_clear_numpy_abi_error()
'''

OPTIMIZERS = '''

def _const(value, like):
    """value rounded once to like's dtype, a 0-d tensor."""
    return ms.Tensor(np.asarray(value, dtype=ms.dtype_to_nptype(like.dtype)))


class Momentum:
    """The spec's SGD with momentum: buf = momentum * buf + g; w -= lr * buf (nesterov:
    w -= lr * (g + momentum * buf)). nn.Momentum is this rule with momentum a float32
    attribute (0.899999976 in float64)."""

    def __init__(self, params, lr, momentum, nesterov=False):
        self.params, self.nesterov = list(params), nesterov
        self.lr, self.momentum = lr, momentum
        self.bufs = [ops.zeros(p.shape, p.dtype) for p in self.params]

    def step(self, grads):
        for i, (p, g) in enumerate(zip(self.params, grads)):
            lr, mu = _const(self.lr, p), _const(self.momentum, p)
            if not self.momentum:
                p.set_data(p - lr * g)
                continue
            self.bufs[i] = self.bufs[i] * mu + g
            step = g + mu * self.bufs[i] if self.nesterov else self.bufs[i]
            p.set_data(p - lr * step)


class Adam:
    """The spec's Adam (Kingma & Ba, Algorithm 1), and AdamW with weight_decay on the decayed
    parameters (w -= lr * weight_decay * w first, from the weight alone). nn.Adam puts epsilon
    outside the bias correction; nn.AdamWeightDecay has no bias correction."""

    def __init__(self, params, lr, beta1, beta2, eps, weight_decay=0.0, decayed=()):
        self.params = list(params)
        self.decayed = {id(p) for p in decayed}
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay = weight_decay
        self.m = [ops.zeros(p.shape, p.dtype) for p in self.params]
        self.v = [ops.zeros(p.shape, p.dtype) for p in self.params]
        self.t = 0

    def step(self, grads):
        self.t += 1
        c1, c2 = 1 - self.beta1**self.t, 1 - self.beta2**self.t  # in Python, rounded once
        for i, (p, g) in enumerate(zip(self.params, grads)):
            lr = _const(self.lr, p)
            if id(p) in self.decayed:
                p.set_data(p - lr * _const(self.weight_decay, p) * p)
            self.m[i] = self.m[i] * _const(self.beta1, p) + _const(1 - self.beta1, p) * g
            self.v[i] = self.v[i] * _const(self.beta2, p) + _const(1 - self.beta2, p) * (g * g)
            denom = ops.sqrt(self.v[i] / _const(c2, p)) + _const(self.eps, p)
            p.set_data(p - self.m[i] / _const(c1, p) * lr / denom)
'''


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    if isinstance(o, SGD):
        body = (
            f"    return Momentum(model.trainable_params(), lr={o.lr}, momentum={o.momentum}, "
            f"nesterov={o.nesterov})"
        )
    elif isinstance(o, AdamW):
        body = (
            f"    roles = {tuple(o.decay)!r}  # the canonical roles that decay\n"
            "    decayed = [tensor for name, _, tensor, _, _, _ in weight_table(model)\n"
            '               if name.rsplit(".", 1)[-1] in roles]\n'
            f"    return Adam(model.trainable_params(), lr={o.lr}, beta1={o.beta1}, "
            f"beta2={o.beta2}, eps={o.eps},\n"
            f"                weight_decay={o.weight_decay}, decayed=decayed)"
        )
    elif isinstance(o, Adam):
        body = (
            f"    return Adam(model.trainable_params(), lr={o.lr}, beta1={o.beta1}, "
            f"beta2={o.beta2}, eps={o.eps})"
        )
    else:
        return ""
    return f'''{OPTIMIZERS}

def make_optimizer(model):
    """{common.optimizer_comment(workload)}."""
{body}


def loss_and_grads(model, x, y):
    """Softmax cross-entropy (mean over the batch) and its gradient for every trainable
    parameter, in model.trainable_params() order."""
    grad_fn = ms.value_and_grad(lambda x, y: ops.cross_entropy(model(x), y), None,
                                model.trainable_params())
    return grad_fn(x, y)


def train_step(model, optimizer, x, y, training=True):
    """One optimiser step on (x, y); training=False switches dropout off (BatchNorm always
    normalises with its held statistics: use_batch_statistics=False)."""
    model.set_train(training)
    loss, grads = loss_and_grads(model, x, y)
    optimizer.step(grads)
    return loss
'''


def _check(workload: Workload, cls: str) -> str:
    ids = len(workload.input.shape) == 1
    to_x = "ms.Tensor(x.astype(np.int32))" if ids else "ms.Tensor(x.astype(dtype))"
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = ms.Tensor(y.astype(np.int32))
        model.set_train(False)  # dropout off
        loss, grads = loss_and_grads(model, xt, yt)
        out["loss"] = np.float64(loss.asnumpy())
        by_id = {id(p): g.asnumpy() for p, g in zip(model.trainable_params(), grads)}
        out.update({f"grad:{n}": a for n, a in read_weights(model, by_id).items()})
        optimizer = make_optimizer(model)
        for _ in range(k):
            train_step(model, optimizer, xt, yt, training=False)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its held statistics)."""
    model.set_train(False)
    return model(x)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    ms.set_seed(0)
    model = {cls}(getattr(ms, dtype))
    load_weights(model, weights)
    xt = {to_x}
    out = {{"forward": features_step(model, xt).asnumpy()}}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated MindSpore file for ``workload``."""
    m = rendered.model
    cls = common.class_name(workload)
    init = "\n".join(f"        {line}" for line in m.init)
    forward = "\n".join(f"        {line.replace('{x}', 'x')}" for line in m.forward)
    return (
        common.header(workload, FRAMEWORK, "mindspore", NEEDS)
        + f'''
import argparse

import numpy as np
{IMPORT}{common.CHECK_IO}{rendered.helpers}

class {cls}(nn.Cell):
    """The spec's model (see DESCRIPTION): its cells in graph order, made in ``dtype``."""

    def __init__(self, dtype=ms.float32):
        super().__init__()
{init}

    def construct(self, x):
{forward}
        return x


SHAPES = {common.shapes_literal(workload)}


def weight_table(model):
    """(canonical name, its part, the cell's parameter, its part, canonical -> native,
    native -> canonical), one row per tensor of the canonical .npz."""
    return [
{common.weight_rows(m.weights)}
    ]


def load_weights(model, weights):
    """Copy the canonical arrays ``weights`` (name -> array) into ``model``."""
    for name, cpart, tensor, npart, to_native, _ in weight_table(model):
        value = tensor.asnumpy().copy()
        value[npart] = to_native(weights[name][cpart])
        tensor.set_data(ms.Tensor(value))


def read_weights(model, grads=None):
    """The model's parameters (or, from ``grads``, {{id(parameter): array}}, their gradients)
    in canonical names and layouts."""
    pieces = {{}}
    for name, cpart, tensor, npart, _, to_canonical in weight_table(model):
        value = tensor.asnumpy() if grads is None else grads.get(id(tensor))
        if value is not None:
            pieces.setdefault(name, []).append((cpart, to_canonical(value[npart])))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + _check(workload, cls)
        + common.main_source(workload, common.example_input(workload))
    )
