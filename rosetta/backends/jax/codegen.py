"""The JAX file: plain ``jax`` functions (``forward(params, x, rng)`` over a dict of arrays keyed
by the spec's names), ``optax``'s SGD or Adam (both already the spec's form: ``trace = g + m *
trace``; Adam's epsilon added to ``sqrt(v_hat)``), a jitted training or features step, and
``--check``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends import filetext as common
from rosetta.backends.snippet import q
from rosetta.spec.graph import walk
from rosetta.spec.ops import CausalAttention
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "JAX (with optax)"
NEEDS = "NumPy, JAX and optax"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "jax", "optax")


def _optimizer(workload: Workload) -> str:
    o = workload.optimizer
    if isinstance(o, SGD):
        nesterov = ", nesterov=True" if o.nesterov else ""
        call = f"optax.sgd({o.lr}, momentum={o.momentum}{nesterov})"
    elif isinstance(o, Adam):
        call = f"optax.adam({o.lr}, b1={o.beta1}, b2={o.beta2}, eps={o.eps})"
    elif isinstance(o, AdamW):
        call = (
            f"optax.adamw({o.lr}, b1={o.beta1}, b2={o.beta2}, eps={o.eps}, "
            f"weight_decay={o.weight_decay},\n        mask=lambda params: "
            f"{{k: k.rsplit('.', 1)[-1] in {tuple(o.decay)!r} for k in params}})"
        )
    else:
        return ""
    return f'''

def make_optimizer():
    """{common.optimizer_comment(workload)}."""
    return {call}


def loss_fn(params, buffers, x, y, rng):
    """Softmax cross-entropy, mean over the batch."""
    logits = forward({{**params, **buffers}}, x, rng)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def make_train_step(optimizer):
    """One optimiser step as a jitted pure function; rng None switches dropout off."""

    @jax.jit
    def train_step(params, buffers, opt_state, x, y, rng):
        loss, grads = jax.value_and_grad(loss_fn)(params, buffers, x, y, rng)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step
'''


def _generate(workload: Workload) -> str:
    """A language model's greedy loop: one jitted step (the prompt, then each new token) over a
    static cache per causal attention, what ``rosetta.runner.generation`` runs in JAX."""
    if not common.is_language_model(workload):
        return ""
    caches = "".join(
        f"    {q(op.name)}: ({op.heads}, {in_shape[1] // op.heads}),\n"
        for op, in_shape, _ in walk(workload.graph, workload.input.shape)
        if isinstance(op, CausalAttention)
    )
    return f'''

CONTEXT = {workload.input.shape[0]}  # the positions a cache holds: prompt + new tokens at most
CACHES = {{
{caches}}}  # each causal attention's heads and head width


@jax.jit
def decode_step(p, ids, cache, offset):
    """The next-token logits after ``ids`` (N, t) at positions offset.., and the cache with
    their keys and values written in; one trace for the prompt's length, one for a token."""
    cache = dict(cache)  # the layers write into this copy: the step stays a pure function
    logits = forward(p, ids, cache=cache, offset=offset)[:, -1]  # (N, V)
    return logits, cache


def generate(p, prompts, new_tokens):
    """Greedy decoding with a KV cache: the prompts (N, P) once (the prefill), then one token a
    step, each reading the cached keys and values; the new tokens, (N, new_tokens)."""
    n, dtype = prompts.shape[0], p[next(iter(p))].dtype
    cache = {{
        layer: (jnp.zeros((n, CONTEXT, h, d), dtype), jnp.zeros((n, CONTEXT, h, d), dtype))
        for layer, (h, d) in CACHES.items()
    }}
    logits, cache = decode_step(p, prompts, cache, 0)
    tokens = [logits.argmax(axis=-1)]
    for i in range(1, new_tokens):
        position = prompts.shape[1] + i - 1  # the new token's place in the sequence
        logits, cache = decode_step(p, tokens[-1][:, None], cache, position)
        tokens.append(logits.argmax(axis=-1))
    return jnp.stack(tokens, axis=1)
'''


def _check(workload: Workload) -> str:
    if len(workload.input.shape) == 1:
        to_x = "jnp.asarray(x.astype(np.int32))"
    else:
        to_x = "jnp.asarray(x.transpose(0, 2, 3, 1).astype(dtype))  # (N, C, H, W) -> (N, H, W, C)"
    generated = common.generated_check(
        workload, "np.asarray(generate(native, xt[:, :{prompt}], {new}))"
    )
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = jnp.asarray(y.astype(np.int32))
        params = {n: a for n, a in native.items() if n in TRAINABLE}
        buffers = {n: a for n, a in native.items() if n not in TRAINABLE}
        loss, grads = jax.value_and_grad(loss_fn)(params, buffers, xt, yt, None)
        out["loss"] = np.float64(loss)
        out.update({f"grad:{n}": a for n, a in read_weights(grads).items()})
        optimizer = make_optimizer()
        opt_state = optimizer.init(params)
        train_step = make_train_step(optimizer)
        for _ in range(k):
            params, opt_state, _ = train_step(params, buffers, opt_state, xt, yt, None)
        out.update({f"params:{n}": a for n, a in read_weights(params).items()})"""
    return f'''

@jax.jit
def features_step(params, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    return forward(params, x, None)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    jax.config.update("jax_enable_x64", dtype == "float64")
    native = load_weights(weights, dtype)
    xt = {to_x}
    out = {{"forward": np.asarray(features_step(native, xt))}}{generated}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated JAX file for ``workload``."""
    m = rendered.model
    forward = "\n".join(f"    {line.replace('{x}', 'x')}" for line in m.forward)
    return (
        common.header(workload, FRAMEWORK, "jax", NEEDS)
        + f'''
import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

NHWC = ("NHWC", "HWIO", "NHWC")  # activations, kernels, outputs: channels-last
{common.CHECK_IO}{rendered.helpers}

def forward(p, x, rng=None{common.forward_extras(workload)}):
    """The spec's model (see DESCRIPTION): its layers in graph order.

    ``p``: the parameters by the spec's names (native layouts, see ``weight_table``); ``rng``: a
    PRNG key for dropout when training, None for evaluation."""
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
    """The canonical arrays ``weights`` (name -> array) as ``forward``'s ``p``."""
    return {{
        key: jnp.asarray(np.asarray(to_native(weights[name][cpart]), dtype=dtype))
        for name, cpart, key, _, to_native, _ in weight_table()
    }}


def read_weights(p):
    """``p`` (or a gradient of it) in canonical names and layouts."""
    pieces = {{}}
    for name, cpart, key, npart, _, to_canonical in weight_table():
        if key in p:
            pieces.setdefault(name, []).append((cpart, to_canonical(np.asarray(p[key])[npart])))
    return assemble(pieces, SHAPES)
'''
        + _optimizer(workload)
        + _generate(workload)
        + _check(workload)
        + common.main_source(workload, common.example_input(workload))
    )
