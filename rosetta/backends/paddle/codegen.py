"""The Paddle file: a ``paddle.nn.Layer`` with its ``forward``, the weight table, the training or
features step, and ``--check``.

The optimiser: ``paddle.optimizer.Adam`` is the spec's Adam (epsilon added to ``sqrt(v_hat)``),
used as is. ``paddle.optimizer.Momentum`` computes the spec's momentum rule, but its kernel keeps
the momentum as a float32 attribute (in float64 0.9 becomes 0.899999976), so a float64 model
gets the rule written out as a small class; float32 uses Paddle's own. ``paddle.optimizer.AdamW``
computes the spec's AdamW (the decay ``lr * coeff * w`` on the weight before Adam's step, epsilon
scaled with ``sqrt(v)`` by ``sqrt(1 - beta2^t)``: the spec's placement), the spec's decay roles
picking its tensors through ``apply_decay_param_fun``; its kernel holds ``coeff`` as a float32
attribute, so a float64 model gets the decay written out before ``paddle.optimizer.Adam``'s step
(as ``nn.LayerNorm``'s float32 epsilon gets the file's ``LayerNorm``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "PaddlePaddle"
NEEDS = "NumPy and PaddlePaddle"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "paddle")

MOMENTUM = '''

class Momentum:
    """The spec's SGD with momentum in Paddle ops: buf = momentum * buf + g; w -= lr * buf
    (nesterov: w -= lr * (g + momentum * buf)). paddle.optimizer.Momentum is this rule, but
    its kernel holds the momentum as a float32 attribute: in float64 it runs 0.899999976."""

    def __init__(self, parameters, lr, momentum, nesterov=False):
        self.params, self.nesterov = list(parameters), nesterov
        dtype = self.params[0].dtype
        self.lr = paddle.full([], lr, dtype=dtype)
        self.momentum = paddle.full([], momentum, dtype=dtype)
        self.buffers = {}

    @paddle.no_grad()
    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            buf = g.clone() if i not in self.buffers else self.momentum * self.buffers[i] + g
            self.buffers[i] = buf
            p.set_value(p - self.lr * (g + self.momentum * buf if self.nesterov else buf))

    def clear_grad(self):
        for p in self.params:
            p.clear_gradient()
'''


ADAMW = '''

class AdamW:
    """The spec's AdamW in float64: w -= lr * weight_decay * w on the decayed tensors, then
    paddle.optimizer.Adam's step (the spec's Adam). paddle.optimizer.AdamW is this rule, but
    its kernel holds weight_decay as a float32 attribute: in float64 it runs 0.0099999998."""

    def __init__(self, parameters, decayed, lr, beta1, beta2, eps, weight_decay):
        self.decayed = list(decayed)
        dtype = self.decayed[0].dtype
        self.rate = paddle.full([], lr, dtype=dtype) * paddle.full([], weight_decay, dtype=dtype)
        self.adam = paddle.optimizer.Adam(learning_rate=lr, beta1=beta1, beta2=beta2,
                                          epsilon=eps, parameters=parameters)

    @paddle.no_grad()
    def step(self):
        for p in self.decayed:
            if p.grad is not None:
                p.set_value(p - self.rate * p)
        self.adam.step()

    def clear_grad(self):
        self.adam.clear_grad()
'''


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    extra = ""
    if isinstance(o, SGD):
        extra = MOMENTUM
        nesterov = ", use_nesterov=True" if o.nesterov else ""
        body = (
            "    params = model.parameters()\n"
            "    if params[0].dtype == paddle.float32:\n"
            f"        return paddle.optimizer.Momentum(learning_rate={o.lr}, momentum={o.momentum}"
            f"{nesterov}, parameters=params)\n"
            f"    return Momentum(params, lr={o.lr}, momentum={o.momentum}, "
            f"nesterov={o.nesterov})  # float64: see its docstring"
        )
    elif isinstance(o, Adam):
        body = (
            f"    return paddle.optimizer.Adam(learning_rate={o.lr}, beta1={o.beta1}, "
            f"beta2={o.beta2}, epsilon={o.eps},\n"
            "                                 parameters=model.parameters())"
        )
    elif isinstance(o, AdamW):
        extra = ADAMW
        body = (
            f"    roles = {tuple(o.decay)!r}  # the canonical roles that decay\n"
            "    decayed = [tensor for name, _, tensor, _, _, _ in weight_table(model)\n"
            '               if name.rsplit(".", 1)[-1] in roles]\n'
            "    params = model.parameters()\n"
            "    if params[0].dtype != paddle.float32:  # float64: see AdamW's docstring\n"
            f"        return AdamW(params, decayed, lr={o.lr}, beta1={o.beta1}, "
            f"beta2={o.beta2}, eps={o.eps},\n"
            f"                     weight_decay={o.weight_decay})\n"
            "    names = {t.name for t in decayed}\n"
            f"    return paddle.optimizer.AdamW(learning_rate={o.lr}, beta1={o.beta1}, "
            f"beta2={o.beta2}, epsilon={o.eps},\n"
            f"                                  parameters=params, weight_decay={o.weight_decay},\n"
            "                                  apply_decay_param_fun=lambda n: n in names)"
        )
    else:
        return ""
    return f'''{extra}

def make_optimizer(model):
    """{common.optimizer_comment(workload)}."""
{body}


def set_mode(model, dropout=True):
    """Training mode, the dropout layers on or off. Not model.eval() for dropout off: Paddle's
    fused GRU kernel keeps nothing for the backward pass in eval mode. BatchNorm stays in eval
    (the spec's BatchNorm normalises with its running statistics, never the batch's)."""
    model.train()
    for layer in model.sublayers():
        if isinstance(layer, (nn.BatchNorm1D, nn.BatchNorm2D)) or (
            not dropout and isinstance(layer, nn.Dropout)
        ):
            layer.eval()


def train_step(model, optimizer, x, y, training=True):
    """One optimiser step on (x, y); training=False switches dropout off."""
    set_mode(model, dropout=training)
    loss = F.cross_entropy(model(x), y)  # softmax cross-entropy, the mean over every label
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return loss
'''


#: a decoder's generation loop in the generated file: the lowered model's ``prefill``/``decode``
#: (``model.py``), written plainly: the model's forward over the prompts, then one token a step
GENERATE = '''

@paddle.no_grad()
def generate(model, prompts, new_tokens):
    """Greedy decoding with a KV cache: the prompts' forward pass once (the prefill), then one
    token a step, each reading the cached keys and values; the new tokens, (N, new_tokens)."""
    model.eval()
    cache = {}
    logits = model(prompts, cache=cache)[:, -1]  # (N, V): the logits after the prompt
    tokens = [logits.argmax(axis=-1)]
    for i in range(1, new_tokens):
        position = prompts.shape[1] + i - 1  # the new token's place in the sequence
        logits = model(tokens[-1].unsqueeze(1), cache=cache, offset=position)[:, -1]
        tokens.append(logits.argmax(axis=-1))
    return paddle.stack(tokens, axis=1)
'''


#: the --check's call of ``generate`` (``filetext.generated_check`` fills it)
GENERATED = "generate(model, xt[:, :{prompt}], {new}).numpy()"


def _check(workload: Workload, cls: str) -> str:
    generated = common.generated_check(workload, GENERATED)
    ids = len(workload.input.shape) == 1
    to_x = "paddle.to_tensor(x.astype(np.int64))" if ids else "paddle.to_tensor(x.astype(dtype))"
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = paddle.to_tensor(y.astype(np.int64))
        set_mode(model, dropout=False)
        loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        out["loss"] = np.float64(loss.item())
        out.update({f"grad:{n}": a for n, a in read_weights(model, grads=True).items()})
        model.clear_gradients()
        optimizer = make_optimizer(model)
        for _ in range(k):
            train_step(model, optimizer, xt, yt, training=False)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    model.eval()
    with paddle.no_grad():
        return model(x)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    paddle.seed(0)
    paddle.set_default_dtype(dtype)  # the layers' parameters are made in it
    model = {cls}()
    load_weights(model, weights)
    xt = {to_x}
    out = {{"forward": features_step(model, xt).numpy()}}{generated}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated Paddle file for ``workload``."""
    m = rendered.model
    cls = common.class_name(workload)
    init = "\n".join(f"        {line}" for line in m.init)
    forward = "\n".join(f"        {line.replace('{x}', 'x')}" for line in m.forward)
    return (
        common.header(workload, FRAMEWORK, "paddle", NEEDS)
        + f'''
import argparse

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn
{common.CHECK_IO}{rendered.helpers}

class {cls}(nn.Layer):
    """The spec's model (see DESCRIPTION): its layers in graph order."""

    def __init__(self):
        super().__init__()
{init}

    def forward(self, x{common.forward_extras(workload)}):
{forward}
        return x


SHAPES = {common.shapes_literal(workload)}


def weight_table(model):
    """(canonical name, its part, the layer's tensor, its part, canonical -> native,
    native -> canonical), one row per tensor of the canonical .npz."""
    return [
{common.weight_rows(m.weights)}
    ]


def load_weights(model, weights):
    """Copy the canonical arrays ``weights`` (name -> array) into ``model``."""
    for name, cpart, tensor, npart, to_native, _ in weight_table(model):
        value = tensor.numpy()
        value[npart] = to_native(weights[name][cpart])
        tensor.set_value(value)


def read_weights(model, grads=False):
    """The model's tensors (or their gradients) in canonical names and layouts."""
    pieces = {{}}
    for name, cpart, tensor, npart, _, to_canonical in weight_table(model):
        t = tensor.grad if grads else tensor
        if t is not None:
            pieces.setdefault(name, []).append((cpart, to_canonical(t.numpy()[npart])))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + (GENERATE if common.is_language_model(workload) else "")
        + _check(workload, cls)
        + common.main_source(workload, common.example_input(workload))
    )
