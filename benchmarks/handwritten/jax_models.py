"""The three workloads written by hand in idiomatic Flax (linen) + optax, as a JAX user would.

They are the yardstick of ``benchmarks/lowering_jax.py``: same shapes, batch, optimiser and
dtype as the specs, but written the way the Flax examples write them (``nn.Conv``/``nn.Dense``
modules, ``nn.max_pool``, ``nn.Dropout`` with a ``"dropout"`` RNG stream, ``nn.RNN(nn.GRUCell)``,
the ``examples/imagenet`` ResNet with inference-mode ``nn.BatchNorm``), with the train step and
the feature step under ``jax.jit``. Flax initialises its own weights: only speed is compared, the
equivalence of the lowered model is the conformance suite's job. Images are NHWC, Flax's layout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

PAD1 = ((1, 1), (1, 1))


class CNN(nn.Module):
    """The VGG-style CIFAR-10 CNN (``rosetta/models/cnn.yaml``) in Flax."""

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = nn.relu(nn.Conv(50, (3, 3), padding=PAD1)(x))
        x = nn.Conv(50, (3, 3), padding=PAD1)(x)
        x = nn.relu(nn.max_pool(x, (2, 2), strides=(2, 2)))
        x = nn.Dropout(0.25, deterministic=not train)(x)
        x = nn.relu(nn.Conv(100, (3, 3), padding=PAD1)(x))
        x = nn.Conv(100, (3, 3), padding=PAD1)(x)
        x = nn.relu(nn.max_pool(x, (2, 2), strides=(2, 2)))
        x = nn.Dropout(0.25, deterministic=not train)(x)
        x = x.reshape(x.shape[0], -1)  # (N, 8, 8, 100) -> (N, 6400)
        x = nn.relu(nn.Dense(512)(x))
        x = nn.Dropout(0.5, deterministic=not train)(x)
        return nn.Dense(10)(x)


class GRUClassifier(nn.Module):
    """Embedding(30000, 125) - GRU(100), last state - Dense(2) (``gru.yaml``) in Flax."""

    @nn.compact
    def __call__(self, ids: jax.Array, train: bool) -> jax.Array:
        x = nn.Embed(30000, 125)(ids)  # (N, T) -> (N, T, 125)
        last, _ = nn.RNN(nn.GRUCell(100), return_carry=True)(x)  # (N, 100)
        return nn.Dense(2)(last)


class EncoderBlock(nn.Module):
    """Pre-LN encoder block with ``jax.nn.dot_product_attention`` (``transformer.yaml``)."""

    heads: int = 4

    @nn.compact
    def __call__(self, x: jax.Array, valid: jax.Array, train: bool) -> jax.Array:
        n, t, e = x.shape
        h = nn.LayerNorm(epsilon=1e-5)(x)
        q = nn.Dense(e)(h).reshape(n, t, self.heads, -1)
        k = nn.Dense(e, use_bias=False)(h).reshape(n, t, self.heads, -1)
        v = nn.Dense(e)(h).reshape(n, t, self.heads, -1)
        a = jax.nn.dot_product_attention(q, k, v, mask=valid[:, None, None, :]).reshape(n, t, e)
        x = x + nn.Dropout(0.1, deterministic=not train)(nn.Dense(e)(a))
        h = nn.gelu(nn.Dense(512)(nn.LayerNorm(epsilon=1e-5)(x)), approximate=False)
        return x + nn.Dropout(0.1, deterministic=not train)(nn.Dense(e)(h))


class TransformerClassifier(nn.Module):
    """Token + position embedding, 2 pre-LN blocks, LayerNorm, masked mean, Dense(2)."""

    @nn.compact
    def __call__(self, ids: jax.Array, train: bool) -> jax.Array:
        valid = ids != 0  # (N, T)
        pos = self.param("position", nn.initializers.uniform(0.1), (150, 128))
        x = nn.Embed(30000, 128)(ids) + pos[: ids.shape[1]]
        for _ in range(2):
            x = EncoderBlock()(x, valid, train)
        w = valid.astype(x.dtype)
        x = jnp.einsum("nte,nt->ne", nn.LayerNorm(epsilon=1e-5)(x), w)
        return nn.Dense(2)(x / jnp.maximum(w.sum(axis=1, keepdims=True), 1))


def _kernels(params) -> Any:
    """AdamW's mask: the Dense kernels decay; biases, norms and tables don't."""
    return jax.tree_util.tree_map_with_path(lambda path, _: path[-1].key == "kernel", params)


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (stride on the 3x3), as in Flax's ``examples/imagenet``."""

    width: int
    stride: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        conv = functools.partial(nn.Conv, use_bias=False)
        norm = functools.partial(nn.BatchNorm, use_running_average=True, epsilon=1e-5)
        y = nn.relu(norm()(conv(self.width, (1, 1))(x)))
        y = conv(self.width, (3, 3), (self.stride, self.stride), padding=PAD1)(y)
        y = nn.relu(norm()(y))
        y = norm()(conv(self.width * 4, (1, 1))(y))
        if x.shape != y.shape:
            x = norm()(conv(self.width * 4, (1, 1), (self.stride, self.stride))(x))
        return nn.relu(x + y)


class ResNet50Features(nn.Module):
    """ResNet-50 up to the 2048-d global average pool, inference mode (``resnet50.yaml``)."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Conv(64, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=True, epsilon=1e-5)(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=PAD1)
        for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for i in range(blocks):
                x = Bottleneck(width, 2 if i == 0 and stage > 0 else 1)(x)
        return jnp.mean(x, axis=(1, 2))  # (N, H, W, 2048) -> (N, 2048)


@dataclass(frozen=True)
class Program:
    """A hand-written workload: its jitted step, initial state and how to call it on a batch."""

    step: Callable  # jitted
    state: tuple  # the arguments that the step threads through (params, optimiser state, ...)
    train: bool


def make(workload: str, batch: tuple[Any, ...], seed: int = 0) -> Program:
    """The hand-written model of ``workload`` with its jitted step, initialised for ``batch``."""
    key = jax.random.key(seed)
    x = batch[0]
    if workload == "resnet50":
        model = ResNet50Features()
        variables = model.init(key, x)
        step = jax.jit(lambda v, x: model.apply(v, x))
        return Program(step, (variables,), train=False)
    model, tx = {
        "cnn": (CNN(), optax.sgd(0.01, momentum=0.9)),
        "gru": (GRUClassifier(), optax.adam(1e-3, b1=0.9, b2=0.999, eps=1e-8)),
        "transformer": (
            TransformerClassifier(),
            optax.adamw(1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, mask=_kernels),
        ),
    }[workload]
    params = model.init(key, x, train=False)["params"]

    def train_step(params, opt_state, step, x, y):
        def loss_fn(p):
            rngs = {"dropout": jax.random.fold_in(key, step)}
            logits = model.apply({"params": p}, x, train=True, rngs=rngs)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, step + 1, loss

    step = jax.jit(train_step, donate_argnums=(0, 1, 2))
    return Program(step, (params, tx.init(params), jnp.int32(0)), train=True)
