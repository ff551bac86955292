"""The Chainer file: a ``chainer.Chain`` with its ``forward``, the weight table, the training or
features step, and ``--check``.

The optimiser: Chainer's ``MomentumSGD`` (``v = m * v - lr * g; w += v``) is the spec's SGD at
a constant learning rate, so the stock one is used. Chainer's ``Adam`` puts epsilon outside the
bias correction (``lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t)``, ``w -= lr_t * m / (sqrt(v)
+ eps)``), so the file writes the spec's Adam out as a small class."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "Chainer"
NEEDS = "NumPy and Chainer"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "chainer")

ADAM = '''

class Adam:
    """The spec's Adam (Kingma & Ba, Algorithm 1): w -= lr * m_hat / (sqrt(v_hat) + eps).

    chainer.optimizers.Adam computes lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t) and
    w -= lr_t * m / (sqrt(v) + eps): the same away from |g| ~ eps, not the spec's rule there."""

    def __init__(self, lr, beta1, beta2, eps, weight_decay=0.0, decayed=()):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay, self.decayed = weight_decay, {id(p) for p in decayed}  # AdamW

    def setup(self, model):
        self.target, self.t, self.m, self.v = model, 0, {}, {}
        return self

    def update(self):
        """One step from the gradients in ``param.grad`` (after ``loss.backward()``)."""
        self.t += 1
        for name, param in self.target.namedparams():
            if param.grad is None:
                continue
            w, g, dt = param.array, param.grad, param.array.dtype.type
            m = self.m.setdefault(name, np.zeros_like(w))
            v = self.v.setdefault(name, np.zeros_like(w))
            if id(param) in self.decayed:  # AdamW: decoupled, before the step
                w -= dt(self.lr) * dt(self.weight_decay) * w
            m *= dt(self.beta1)
            m += dt(1 - self.beta1) * g
            v *= dt(self.beta2)
            v += dt(1 - self.beta2) * (g * g)
            m_hat = m / dt(1 - self.beta1**self.t)
            v_hat = v / dt(1 - self.beta2**self.t)
            w -= dt(self.lr) * m_hat / (np.sqrt(v_hat) + dt(self.eps))
'''


def _cross_entropy(workload: Workload, logits: str, labels: str) -> str:
    """The loss expression of the generated file: a label per token (a language model's
    (N, T, K) logits) reshapes both to N*T rows (Chainer reads axis 1 of a 3-d input as the
    classes); a classifier's passes as is."""
    if len(workload.output_shape) == 2:
        return (
            f"F.softmax_cross_entropy(F.reshape({logits}, (-1, {workload.output_shape[-1]})), "
            f"{labels}.reshape(-1))  # mean over every token"
        )
    return f"F.softmax_cross_entropy({logits}, {labels})  # mean over the batch"


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    extra = ""
    if isinstance(o, SGD):
        if o.nesterov:
            call = f"chainer.optimizers.NesterovAG(lr={o.lr}, momentum={o.momentum})"
        else:
            call = f"chainer.optimizers.MomentumSGD(lr={o.lr}, momentum={o.momentum})"
        why = "Chainer's MomentumSGD (v = m * v - lr * g; w += v) is that rule at a constant lr"
    elif isinstance(o, Adam):
        extra = ADAM
        call = f"Adam(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps})"
        why = "written out above: Chainer's own Adam places eps differently"
    elif isinstance(o, AdamW):
        extra = ADAM
        call = (
            f"Adam(lr={o.lr}, beta1={o.beta1}, beta2={o.beta2}, eps={o.eps}, "
            f"weight_decay={o.weight_decay},\n        decayed=[t for name, _, t, *_ in "
            f"weight_table(model) if name.rsplit('.', 1)[-1] in {tuple(o.decay)!r}])"
        )
        why = "written out above (with the decay): Chainer's own Adam places eps differently"
    else:
        return ""
    return f'''{extra}

def make_optimizer(model):
    """{common.optimizer_comment(workload)}.
    {why}."""
    optimizer = {call}
    optimizer.setup(model)
    return optimizer


def train_step(model, optimizer, x, y, training=True):
    """One optimiser step on (x, y); training=False switches dropout off."""
    with chainer.using_config("train", training):
        model.cleargrads()
        loss = {_cross_entropy(workload, "model(x)", "y")}
        loss.backward()
        optimizer.update()
    return loss
'''


#: a decoder's generation loop in the generated file: the lowered model's ``prefill``/``decode``
#: (``model.py``), written plainly: the model's forward over the prompts, then one token a step
GENERATE = '''

def generate(model, prompts, new_tokens):
    """Greedy decoding with a KV cache: the prompts' forward pass once (the prefill), then one
    token a step, each reading the cached keys and values; the new tokens, (N, new_tokens)."""
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        cache = {}
        logits = model(prompts, cache=cache)[:, -1]  # (N, V): the logits after the prompt
        tokens = [F.argmax(logits, axis=1).array.astype(np.int32)]
        for i in range(1, new_tokens):
            position = prompts.shape[1] + i - 1  # the new token's place in the sequence
            logits = model(tokens[-1][:, None], cache=cache, offset=position)[:, -1]
            tokens.append(F.argmax(logits, axis=1).array.astype(np.int32))
    return np.stack(tokens, axis=1)
'''


#: the --check's call of ``generate`` (``filetext.generated_check`` fills it)
GENERATED = "generate(model, xt[:, :{prompt}], {new})"


def _check(workload: Workload, cls: str) -> str:
    generated = common.generated_check(workload, GENERATED)
    ids = len(workload.input.shape) == 1
    to_x = "x.astype(np.int32)" if ids else "x.astype(dtype)"
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = y.astype(np.int32)
        with chainer.using_config("train", False):
            model.cleargrads()
            loss = LOSS
            loss.backward()
        out["loss"] = np.float64(loss.array)
        out.update({f"grad:{n}": a for n, a in read_weights(model, grads=True).items()})
        optimizer = make_optimizer(model)
        for _ in range(k):
            train_step(model, optimizer, xt, yt, training=False)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
        train = train.replace("LOSS", _cross_entropy(workload, "model(xt)", "yt"))
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        return model(x)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    with chainer.using_config("dtype", np.dtype(dtype)):
        model = {cls}()
    load_weights(model, weights)
    xt = {to_x}
    out = {{"forward": features_step(model, xt).array}}{generated}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated Chainer file for ``workload``."""
    m = rendered.model
    cls = common.class_name(workload)
    init = "\n".join(f"            {line}" for line in m.init)
    forward = "\n".join(f"        {line.replace('{x}', 'x')}" for line in m.forward)
    return (
        common.header(workload, FRAMEWORK, "chainer", NEEDS)
        + f'''
import argparse
import warnings

import numpy as np

if not hasattr(np, "sctypes"):  # Chainer 7.8 reads np.sctypes, which NumPy 2 removed
    np.sctypes = {{
        "int": [np.int8, np.int16, np.int32, np.int64],
        "uint": [np.uint8, np.uint16, np.uint32, np.uint64],
        "float": [np.float16, np.float32, np.float64, np.longdouble],
        "complex": [np.complex64, np.complex128, np.clongdouble],
        "others": [bool, object, bytes, str, np.void],
    }}
with warnings.catch_warnings():  # Chainer's import warns about numpy.distutils/pkg_resources
    warnings.simplefilter("ignore")
    import chainer
    import chainer.functions as F
    import chainer.links as L
{common.CHECK_IO}{rendered.helpers}

class {cls}(chainer.Chain):
    """The spec's model (see DESCRIPTION): its layers in graph order."""

    def __init__(self):
        super().__init__()
        with self.init_scope():
{init}

    def forward(self, x{common.forward_extras(workload)}):
{forward}
        return x


SHAPES = {common.shapes_literal(workload)}


def weight_table(model):
    """(canonical name, its part, the link's parameter, its part, canonical -> native,
    native -> canonical), one row per tensor (or part) of the canonical .npz."""
    return [
{common.weight_rows(m.weights)}
    ]


def load_weights(model, weights):
    """Copy the canonical arrays ``weights`` (name -> array) into ``model``."""
    for name, cpart, param, npart, to_native, _ in weight_table(model):
        array = param.array if hasattr(param, "array") else param
        array[npart] = to_native(weights[name][cpart])


def read_weights(model, grads=False):
    """The model's parameters (or their gradients) in canonical names and layouts."""
    pieces = {{}}
    for name, cpart, param, npart, _, to_canonical in weight_table(model):
        if grads and not isinstance(param, chainer.Variable):
            continue  # a persistent value (BatchNorm statistics): no gradient
        a = param.grad if grads else (param.array if hasattr(param, "array") else param)
        if a is not None:
            pieces.setdefault(name, []).append((cpart, to_canonical(np.asarray(a)[npart])))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + (GENERATE if common.is_language_model(workload) else "")
        + _check(workload, cls)
        + common.main_source(workload, common.example_input(workload))
    )
