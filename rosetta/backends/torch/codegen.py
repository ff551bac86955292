"""The PyTorch file: an ``nn.Module`` with its ``forward``, the weight table, ``torch.optim``'s
SGD or Adam (both already the spec's form: momentum buffer ``buf = m * buf + g``, Adam's epsilon
added to ``sqrt(v_hat)``), the training step or the features step, and ``--check``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "PyTorch"
NEEDS = "NumPy and PyTorch"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "torch")


def _cross_entropy(workload: Workload, logits: str, labels: str) -> str:
    """The loss expression of the generated file: a label per token (a language model's
    (N, T, K) logits) flattens both to N*T rows; a classifier's passes as is."""
    if len(workload.output_shape) == 2:
        return (
            f"F.cross_entropy({logits}.flatten(0, 1), {labels}.flatten())"
            "  # softmax cross-entropy, mean over every token"
        )
    return f"F.cross_entropy({logits}, {labels})  # softmax cross-entropy, mean over the batch"


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    if isinstance(o, SGD):
        nesterov = ", nesterov=True" if o.nesterov else ""
        call = f"torch.optim.SGD(model.parameters(), lr={o.lr}, momentum={o.momentum}{nesterov})"
    elif isinstance(o, Adam):
        call = (
            f"torch.optim.Adam(model.parameters(), lr={o.lr}, betas=({o.beta1}, {o.beta2}), "
            f"eps={o.eps})"
        )
    elif isinstance(o, AdamW):
        roles = repr(tuple(o.decay))
        call = (
            f"torch.optim.AdamW(decay_groups(model, {roles}, {o.weight_decay}), lr={o.lr}, "
            f"betas=({o.beta1}, {o.beta2}), eps={o.eps})"
        )
    else:
        return ""
    groups = ""
    if isinstance(o, AdamW):
        groups = '''

def decay_groups(model, roles, weight_decay):
    """Two parameter groups: the canonical tensors whose role (after the last dot) is in
    ``roles`` decay, every other takes the plain Adam step."""
    by_tensor = {id(t): name for name, _, t, _, _, _ in weight_table(model)}
    decayed, plain = [], []
    for p in model.parameters():
        name = by_tensor[id(p)]
        (decayed if name.rsplit(".", 1)[-1] in roles else plain).append(p)
    return [
        {"params": decayed, "weight_decay": weight_decay},
        {"params": plain, "weight_decay": 0.0},
    ]
'''
    return (
        groups
        + f'''

def make_optimizer(model):
    """{common.optimizer_comment(workload)}."""
    return {call}


def train_step(model, optimizer, x, y, training=True):
    """One optimiser step on (x, y); training=False switches dropout off."""
    model.train(training)
    optimizer.zero_grad()
    loss = {_cross_entropy(workload, "model(x)", "y")}
    loss.backward()
    optimizer.step()
    return loss
'''
    )


#: the --check's call of ``generate`` (``filetext.generated_check`` fills it)
GENERATED = "generate(model, xt[:, :{prompt}], {new}).numpy()"


def _check(workload: Workload, cls: str) -> str:
    generated = common.generated_check(workload, GENERATED)
    ids = len(workload.input.shape) == 1
    to_x = "torch.from_numpy(x.astype(np.int64))" if ids else "torch.from_numpy(x.astype(dtype))"
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = torch.from_numpy(y.astype(np.int64))
        loss = LOSS
        loss.backward()
        out["loss"] = np.float64(loss.item())
        out.update({f"grad:{n}": a for n, a in read_weights(model, grads=True).items()})
        optimizer = make_optimizer(model)
        for _ in range(k):
            train_step(model, optimizer, xt, yt, training=False)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
        train = train.replace("LOSS", _cross_entropy(workload, "model(xt)", "yt"))
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    model.eval()
    with torch.no_grad():
        return model(x)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    torch.manual_seed(0)
    model = {cls}().to(getattr(torch, dtype))
    load_weights(model, weights)
    xt = {to_x}
    out = {{"forward": features_step(model, xt).numpy()}}{generated}
    model.eval(){train}
    return out
'''


#: a decoder's generation loop in the generated file: what ``rosetta.runner.generation`` runs
GENERATE = '''

@torch.inference_mode()
def generate(model, prompts, new_tokens):
    """Greedy decoding with a KV cache: the prompts' forward pass once (the prefill), then one
    token a step, each reading the cached keys and values; the new tokens, (N, new_tokens)."""
    model.eval()
    cache = {}
    logits = model(prompts, cache=cache)[:, -1]  # (N, V): the logits after the prompt
    tokens = [logits.argmax(dim=-1)]
    for i in range(1, new_tokens):
        position = prompts.shape[1] + i - 1  # the new token's place in the sequence
        logits = model(tokens[-1][:, None], cache=cache, offset=position)[:, -1]
        tokens.append(logits.argmax(dim=-1))
    return torch.stack(tokens, dim=1)
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated PyTorch file for ``workload``."""
    m = rendered.model
    cls = common.class_name(workload)
    init = "\n".join(f"        {line}" for line in m.init)
    forward = "\n".join(f"        {line.replace('{x}', 'x')}" for line in m.forward)
    return (
        common.header(workload, FRAMEWORK, "torch", NEEDS)
        + f'''
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
{common.CHECK_IO}{rendered.helpers}

class {cls}(nn.Module):
    """The spec's model (see DESCRIPTION): its layers in graph order."""

    def __init__(self):
        super().__init__()
{init}

    def forward(self, x{common.forward_extras(workload)}):
{forward}
        return x


SHAPES = {common.shapes_literal(workload)}


def weight_table(model):
    """(canonical name, its part, the module's tensor, its part, canonical -> native,
    native -> canonical), one row per tensor of the canonical .npz."""
    return [
{common.weight_rows(m.weights)}
    ]


def load_weights(model, weights):
    """Copy the canonical arrays ``weights`` (name -> array) into ``model``."""
    with torch.no_grad():
        for name, cpart, tensor, npart, to_native, _ in weight_table(model):
            value = np.ascontiguousarray(to_native(weights[name][cpart]))
            tensor[npart].copy_(torch.from_numpy(value))


def read_weights(model, grads=False):
    """The model's tensors (or their gradients) in canonical names and layouts."""
    pieces = {{}}
    for name, cpart, tensor, npart, _, to_canonical in weight_table(model):
        t = tensor.grad if grads else tensor
        if t is not None:
            pieces.setdefault(name, []).append((cpart, to_canonical(t.detach().numpy()[npart])))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + (GENERATE if common.is_language_model(workload) else "")
        + _check(workload, cls)
        + common.main_source(workload, common.example_input(workload))
    )
