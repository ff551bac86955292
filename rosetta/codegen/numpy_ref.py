"""The plain-NumPy file: the reference's own kernels and optimisers (copied verbatim from
``rosetta/backends/numpy_ref/``, so the file computes exactly what the reference computes),
layer factories over them, the model as ``sequential([...])``, and ``--check``."""

from __future__ import annotations

import ast
from pathlib import Path

import rosetta.backends
from rosetta.codegen import Rendered, common
from rosetta.spec.workload import SGD, Adam, Workload

FRAMEWORK = "NumPy"
NEEDS = "NumPy"
KERNELS = ("conv.py", "nn.py", "rnn.py")  # every top-level definition, verbatim
OPTIM = ("_checked_grad", "_pairs", "SGD", "Adam")  # from optim.py


def _definitions(file: str, names: tuple[str, ...] | None = None) -> str:
    """Top-level classes, functions and constants of a numpy_ref module (no imports, no module
    docstring), or only ``names``."""
    path = Path(rosetta.backends.__file__).parent / "numpy_ref" / file
    text = path.read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    out = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if names is not None and getattr(node, "name", None) not in names:
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        out.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n\n".join(out)


LAYERS = '''

# -- layers: layer(x, ctx) -> (y, back); back(dy) -> dx, adding parameter gradients to ctx ----
class Ctx:
    """Parameters, the gradient sink, the mode and the dropout rng of one pass."""

    def __init__(self, params, training, rng):
        self.params, self.training, self.rng, self.grads = params, training, rng, {}

    def acc(self, name, grad):
        self.grads[name] = self.grads[name] + grad if name in self.grads else grad


def conv2d(name, stride, padding, bias):
    def layer(x, ctx):
        b = ctx.params[f"{name}.bias"] if bias else None
        y, cache = conv2d_forward(x, ctx.params[f"{name}.kernel"], b, stride, padding)

        def back(dy):
            dx, dw, db = conv2d_backward(dy, cache)
            ctx.acc(f"{name}.kernel", dw)
            if bias:
                ctx.acc(f"{name}.bias", db)
            return dx

        return y, back

    return layer


def maxpool2d(kernel, stride, padding):
    def layer(x, ctx):
        y, cache = maxpool2d_forward(x, kernel, stride, padding)
        return y, lambda dy: maxpool2d_backward(dy, cache)

    return layer


def relu():
    def layer(x, ctx):
        y, cache = relu_forward(x)
        return y, lambda dy: relu_backward(dy, cache)

    return layer


def dropout(rate):
    def layer(x, ctx):
        mask = dropout_mask(x.shape, rate, ctx.rng) if ctx.training and rate > 0 else None
        y, cache = dropout_forward(x, rate, mask)
        return y, lambda dy: dropout_backward(dy, cache)

    return layer


def flatten():
    def layer(x, ctx):
        y, cache = flatten_forward(x)  # (N, C, H, W) -> (N, C*H*W), channel-major
        return y, lambda dy: flatten_backward(dy, cache)

    return layer


def dense(name, bias):
    def layer(x, ctx):
        b = ctx.params[f"{name}.bias"] if bias else None
        y, cache = dense_forward(x, ctx.params[f"{name}.kernel"], b)

        def back(dy):
            dx, dw, db = dense_backward(dy, cache)
            ctx.acc(f"{name}.kernel", dw)
            if bias:
                ctx.acc(f"{name}.bias", db)
            return dx

        return y, back

    return layer


def batchnorm(name, eps):
    def layer(x, ctx):
        p = ctx.params
        y, cache = batchnorm_forward(
            x, p[f"{name}.gamma"], p[f"{name}.beta"], p[f"{name}.mean"], p[f"{name}.var"], eps
        )

        def back(dy):
            dx, dgamma, dbeta = batchnorm_backward(dy, cache)
            ctx.acc(f"{name}.gamma", dgamma)
            ctx.acc(f"{name}.beta", dbeta)
            return dx

        return y, back

    return layer


def global_avgpool():
    def layer(x, ctx):
        y, cache = global_avgpool_forward(x)  # (N, C, H, W) -> (N, C)
        return y, lambda dy: global_avgpool_backward(dy, cache)

    return layer


def embedding(name):
    def layer(x, ctx):
        y, cache = embedding_forward(x, ctx.params[f"{name}.table"])  # (N, T) -> (N, T, E)

        def back(dy):
            ctx.acc(f"{name}.table", embedding_backward(dy, cache))
            return None  # token ids have no gradient

        return y, back

    return layer


def gru(name):
    roles = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")

    def layer(x, ctx):
        y, cache = gru_forward(x, *(ctx.params[f"{name}.{r}"] for r in roles))  # (N, H)

        def back(dy):
            dx, *grads = gru_backward(dy, cache)
            for r, g in zip(roles, grads):
                ctx.acc(f"{name}.{r}", g)
            return dx

        return y, back

    return layer


def sequential(layers):
    """Layers in order; the backward plays their closures in reverse."""

    def layer(x, ctx):
        tape = []
        for f in layers:
            x, back = f(x, ctx)
            tape.append(back)

        def back(dy):
            for b in reversed(tape):
                dy = b(dy)
            return dy

        return x, back

    return layer


def residual(body, shortcut):
    """body(x) + shortcut(x); the output gradient flows into both branches."""

    def layer(x, ctx):
        main, main_back = body(x, ctx)
        side, side_back = shortcut(x, ctx)
        return main + side, lambda dy: main_back(dy) + side_back(dy)

    return layer
'''


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    if isinstance(o, SGD):
        call = f"SGD(lr={o.lr}, momentum={o.momentum}, nesterov={o.nesterov})"
    elif isinstance(o, Adam):
        call = f"Adam(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps})"
    else:
        return ""
    return f'''

def make_optimizer():
    """{common.optimizer_comment(workload)}."""
    return {call}


def loss_and_grads(net, params, x, y, training, rng):
    """Softmax cross-entropy (mean) and the gradient of every trainable parameter."""
    ctx = Ctx(params, training, rng)
    logits, back = net(x, ctx)
    loss, cache = softmax_cross_entropy_forward(logits, y)
    back(softmax_cross_entropy_backward(cache))
    return loss, {{n: ctx.grads[n] for n in TRAINABLE}}


def train_step(net, params, optimizer, x, y, rng, training=True):
    """One optimiser step on (x, y), in place on ``params``; training=False: dropout off."""
    loss, grads = loss_and_grads(net, params, x, y, training, rng)
    optimizer.step(params, grads)
    return loss
'''


def _check(workload: Workload) -> str:
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        y = np.asarray(y, dtype=np.int64)
        loss, grads = loss_and_grads(net, params, x, y, False, rng)
        out["loss"] = np.float64(loss)
        out.update({f"grad:{n}": g for n, g in grads.items()})
        optimizer = make_optimizer()
        for _ in range(k):
            train_step(net, params, optimizer, x, y, rng, training=False)
        out.update({f"params:{n}": a.copy() for n, a in params.items()})"""
    return f'''

def features_step(net, params, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    y, _ = net(x, Ctx(params, False, None))
    return y


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    rng = np.random.default_rng(0)
    net = build()
    params = {{n: np.array(weights[n], dtype=dtype) for n in SHAPES}}
    if not np.issubdtype(x.dtype, np.integer):
        x = x.astype(dtype)
    out = {{"forward": features_step(net, params, x)}}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated NumPy file for ``workload``."""
    m = rendered.model
    model = "\n".join(f"    {line}" for line in ("return " + m.forward[0], *m.forward[1:]))
    kernels = "\n\n\n".join(_definitions(f) for f in KERNELS)
    return (
        common.header(workload, FRAMEWORK, "numpy_ref", NEEDS)
        + f'''
import argparse
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
{common.CHECK_IO}

# -- the reference's kernels (rosetta/backends/numpy_ref/{{conv,nn,rnn}}.py, verbatim) ----------
{kernels}


# -- the reference's optimisers (rosetta/backends/numpy_ref/optim.py, verbatim) ---------------
{_definitions("optim.py", OPTIM)}
{LAYERS}

def build():
    """The spec's model (see DESCRIPTION): its layers in graph order."""
{model}


SHAPES = {common.shapes_literal(workload)}
TRAINABLE = {common.trainable_literal(workload)}
'''
        + _optimizer(workload)
        + _check(workload)
        + common.main_source(workload, common.example_input(workload))
    )
