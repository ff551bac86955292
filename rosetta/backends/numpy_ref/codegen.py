"""The plain-NumPy file: the reference's own kernels, layers and optimisers (copied verbatim
from ``rosetta/backends/numpy_ref/``, so the file computes exactly what the reference computes:
nothing of the reference is kept here as a string), the model as ``sequential([...])``, and
``--check``."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

import rosetta.backends
from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "NumPy"
NEEDS = "NumPy"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy",)
KERNELS = ("conv.py", "nn.py", "rnn.py", "seq.py")  # every top-level definition, verbatim
OPTIM = ("_checked_grad", "_pairs", "SGD", "Adam", "AdamW")  # from optim.py


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


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    if isinstance(o, SGD):
        call = f"SGD(lr={o.lr}, momentum={o.momentum}, nesterov={o.nesterov})"
    elif isinstance(o, Adam):
        call = f"Adam(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps})"
    elif isinstance(o, AdamW):
        call = (
            f"AdamW(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps}, "
            f"weight_decay={o.weight_decay}, decays=lambda name: name.rsplit('.', 1)[-1] in "
            f"{tuple(o.decay)!r})"
        )
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
    generated = common.generated_check(workload, "generate(net, params, x[:, :{prompt}], {new})")
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
    out = {{"forward": features_step(net, params, x)}}{generated}{train}
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
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
{common.CHECK_IO}

# -- the reference's kernels (rosetta/backends/numpy_ref/{{conv,nn,rnn,seq}}.py, verbatim) ------
{kernels}


# -- the reference's optimisers (rosetta/backends/numpy_ref/optim.py, verbatim) ---------------
{_definitions("optim.py", OPTIM)}


# -- the reference's layers (rosetta/backends/numpy_ref/layers.py, verbatim) ------------------
# layer(x, ctx) -> (y, back); back(dy) -> dx, adding parameter gradients to ctx
{_definitions("layers.py")}


def build():
    """The spec's model (see DESCRIPTION): its layers in graph order."""
{model}


SHAPES = {common.shapes_literal(workload)}
TRAINABLE = {common.trainable_literal(workload)}
'''
        + _optimizer(workload)
        + (GENERATE if common.is_language_model(workload) else "")
        + _check(workload)
        + common.main_source(workload, common.example_input(workload))
    )


#: a decoder's greedy loop in the generated file: the reference's own (``ReferenceModel.prefill``
#: and ``decode``), the layers reading ``Ctx.decode`` (positions seen, each attention's cache)
GENERATE = '''

def generate(net, params, prompts, new_tokens):
    """Greedy decoding with a KV cache: the prompts (N, P) once, then one token a step, each
    reading the cached keys and values (ctx.decode); the new tokens, (N, new_tokens)."""
    state = Decode()
    tokens, ids = [], prompts
    for _ in range(new_tokens):
        logits, _ = net(ids, Ctx(params, False, None, backward=False, decode=state))
        state.offset += ids.shape[1]
        tokens.append(logits[:, -1].argmax(axis=-1))  # (N,): the greedy next token
        ids = tokens[-1][:, None]
    return np.stack(tokens, axis=1)
'''
