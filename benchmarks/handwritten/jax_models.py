"""The three workloads written by hand in idiomatic Flax (linen) + optax, as a JAX user would.

They are the yardstick of ``benchmarks/lowering_jax.py``: same shapes, batch, optimiser and
dtype as the specs, but written the way the Flax examples write them (``nn.Conv``/``nn.Dense``
modules, ``nn.max_pool``, ``nn.Dropout`` with a ``"dropout"`` RNG stream, ``nn.RNN`` over a GRU
cell, the ``examples/imagenet`` ResNet with inference-mode ``nn.BatchNorm``), with the train step
and the feature step under ``jax.jit``. Images are NHWC, Flax's layout.

They hold the lowered model's weights, not Flax's own initialisation: :func:`variables_from`
maps each canonical tensor (``rosetta.spec.canonical_weights``, what the lowered model's
``get_params`` returns) to its Flax leaf by module order (:data:`LEAVES`), converting layouts on
the way, and :func:`make` checks the result against the tree ``model.init`` would build, so the
benchmark can show both compute the same function before it times them.

One convention differs from Flax's stock module: ``nn.GRUCell`` has no recurrent bias on its
update and reset gates (``r = sigmoid(W_ir x + b_ir + W_hr h)``), while the spec's GRU (Keras'
``reset_after``) has both biases on every gate. The sums are the same function (``b_ir + c_r``)
but not the same parameters: Adam would move one folded bias where the spec moves two, so the
two would part at the first update. :class:`GRUCell` is ``nn.GRUCell`` with the recurrent biases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import traverse_util

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


class GRUCell(nn.RNNCellBase):
    """``nn.GRUCell`` with the spec's biases: one on every input *and* every recurrent projection.

    ``z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)``, ``r`` alike, ``n = tanh(W_in x + b_in + r *
    (W_hn h + b_hn))`` (the reset gate after the recurrent matmul, as Flax's), ``h' = z h + (1 -
    z) n``. Flax's cell has no ``b_hz``, ``b_hr``; the rest, names and per-gate ``nn.Dense``
    layers included, is Flax's."""

    features: int

    @nn.compact
    def __call__(self, h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        dense = functools.partial(nn.Dense, self.features)
        z = nn.sigmoid(dense(name="iz")(x) + dense(name="hz")(h))
        r = nn.sigmoid(dense(name="ir")(x) + dense(name="hr")(h))
        n = jnp.tanh(dense(name="in")(x) + r * dense(name="hn")(h))
        h = z * h + (1.0 - z) * n
        return h, h

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> jax.Array:
        return jnp.zeros((*input_shape[:-1], self.features))

    @property
    def num_feature_axes(self) -> int:
        return 1


class GRUClassifier(nn.Module):
    """Embedding(30000, 125) - GRU(100), last state - Dense(2) (``gru.yaml``) in Flax."""

    @nn.compact
    def __call__(self, ids: jax.Array, train: bool) -> jax.Array:
        x = nn.Embed(30000, 125)(ids)  # (N, T) -> (N, T, 125)
        h0 = jnp.zeros((ids.shape[0], 100), x.dtype)  # the spec's zero state, in x's dtype
        last, _ = nn.RNN(GRUCell(100), return_carry=True)(x, initial_carry=h0)  # (N, 100)
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
        # a sample of padding only attends uniformly here (the spec: 0); the classifier's masked
        # mean drops every position of it, so the logits are the spec's all the same
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


#: ResNet-50's stages: (bottleneck width, blocks)
STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))


class ResNet50Features(nn.Module):
    """ResNet-50 up to the 2048-d global average pool, inference mode (``resnet50.yaml``)."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Conv(64, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=True, epsilon=1e-5)(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=PAD1)
        for stage, (width, blocks) in enumerate(STAGES):
            for i in range(blocks):
                x = Bottleneck(width, 2 if i == 0 and stage > 0 else 1)(x)
        return jnp.mean(x, axis=(1, 2))  # (N, H, W, 2048) -> (N, 2048)


# -- the lowered model's weights in the Flax tree ------------------------------------------------


def _same(a: np.ndarray) -> np.ndarray:
    return a


@dataclass(frozen=True)
class Leaf:
    """One leaf of a Flax variables tree and where its value comes from: the lowered model's
    tensor ``source`` (canonical name and layout) through ``convert``."""

    path: tuple[str, ...]  # collection ("params" | "batch_stats"), module names, leaf name
    source: str  # the canonical parameter, e.g. "layer2.0.conv1.kernel"
    convert: Callable[[np.ndarray], np.ndarray] = _same


def _oihw_to_hwio(k: np.ndarray) -> np.ndarray:
    return k.transpose(2, 3, 1, 0)  # (O, I, KH, KW) -> (KH, KW, I, O): nn.Conv's kernel


def _cnn_fc1_rows(k: np.ndarray) -> np.ndarray:
    """fc1's rows from the spec's channel-major flatten of (100, 8, 8) to the order the
    hand-written CNN's NHWC ``reshape`` yields (H, W, C)."""
    c, h, w = 100, 8, 8  # conv4's output at 32 x 32 inputs
    # (C*H*W, O) -> (C, H, W, O) -> (H, W, C, O) -> (H*W*C, O)
    return k.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)


def _dense(module: tuple[str, ...], source: str, kernel=_same) -> list[Leaf]:
    """``nn.Dense``'s kernel (in, out: the spec's own layout) and bias."""
    return [
        Leaf(("params", *module, "kernel"), f"{source}.kernel", kernel),
        Leaf(("params", *module, "bias"), f"{source}.bias"),
    ]


def _layer_norm(module: tuple[str, ...], source: str) -> list[Leaf]:
    """``nn.LayerNorm``'s scale and bias from the spec's gamma and beta."""
    return [
        Leaf(("params", *module, "scale"), f"{source}.gamma"),
        Leaf(("params", *module, "bias"), f"{source}.beta"),
    ]


def _batch_norm(module: tuple[str, ...], source: str) -> list[Leaf]:
    """``nn.BatchNorm``'s scale and bias (params), running mean and variance (batch_stats)."""
    return [
        Leaf(("params", *module, "scale"), f"{source}.gamma"),
        Leaf(("params", *module, "bias"), f"{source}.beta"),
        Leaf(("batch_stats", *module, "mean"), f"{source}.mean"),
        Leaf(("batch_stats", *module, "var"), f"{source}.var"),
    ]


def _cnn_leaves() -> list[Leaf]:
    leaves = []
    for i in range(4):  # Conv_0..3: conv1..4, in the order the CNN creates them
        leaves += [
            Leaf(("params", f"Conv_{i}", "kernel"), f"conv{i + 1}.kernel", _oihw_to_hwio),
            Leaf(("params", f"Conv_{i}", "bias"), f"conv{i + 1}.bias"),
        ]
    return leaves + _dense(("Dense_0",), "fc1", _cnn_fc1_rows) + _dense(("Dense_1",), "fc2")


def _gru_leaves() -> list[Leaf]:
    units = 100

    def gate(g: int) -> Callable[[np.ndarray], np.ndarray]:
        return lambda a: a[..., g * units : (g + 1) * units]  # (., 3H) -> gate block g (., H)

    leaves = [Leaf(("params", "Embed_0", "embedding"), "embedding.table")]
    cell = ("params", "GRUCell_0")
    for g, name in enumerate("zrn"):  # the spec's gate blocks z | r | h (Flax calls h n)
        leaves += [
            Leaf((*cell, f"i{name}", "kernel"), "gru.kernel", gate(g)),
            Leaf((*cell, f"i{name}", "bias"), "gru.bias_input", gate(g)),
            Leaf((*cell, f"h{name}", "kernel"), "gru.recurrent_kernel", gate(g)),
            Leaf((*cell, f"h{name}", "bias"), "gru.bias_recurrent", gate(g)),
        ]
    return leaves + _dense(("Dense_0",), "fc")


def _transformer_leaves() -> list[Leaf]:
    leaves = [
        Leaf(("params", "Embed_0", "embedding"), "embedding.table"),
        Leaf(("params", "position"), "position.table"),
    ]
    for b in range(2):
        blk, src = f"EncoderBlock_{b}", f"block.{b}"
        leaves += _layer_norm((blk, "LayerNorm_0"), f"{src}.ln1")
        # Dense_0..3: the query, key (no bias), value and output projections, in creation order
        for j, (role, bias) in enumerate(
            (("query", True), ("key", False), ("value", True), ("output", True))
        ):
            leaves.append(
                Leaf(("params", blk, f"Dense_{j}", "kernel"), f"{src}.attn.{role}_kernel")
            )
            if bias:
                leaves.append(
                    Leaf(("params", blk, f"Dense_{j}", "bias"), f"{src}.attn.{role}_bias")
                )
        leaves += _layer_norm((blk, "LayerNorm_1"), f"{src}.ln2")
        leaves += _dense((blk, "Dense_4"), f"{src}.ff1") + _dense((blk, "Dense_5"), f"{src}.ff2")
    return leaves + _layer_norm(("LayerNorm_0",), "ln_final") + _dense(("Dense_0",), "fc")


def _resnet50_leaves() -> list[Leaf]:
    leaves = [Leaf(("params", "Conv_0", "kernel"), "conv1.kernel", _oihw_to_hwio)]
    leaves += _batch_norm(("BatchNorm_0",), "bn1")
    k = 0  # Bottleneck_k: Flax numbers the blocks in creation order, on across the stages
    for stage, (_, blocks) in enumerate(STAGES):
        for i in range(blocks):
            blk, src = f"Bottleneck_{k}", f"layer{stage + 1}.{i}"
            # Conv_j / BatchNorm_j: conv1/bn1, conv2/bn2, conv3/bn3, then the first block's
            # projection proj/proj_bn, in the order Bottleneck creates them
            pairs = [("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3")]
            for j, (conv, norm) in enumerate(pairs + ([("proj", "proj_bn")] if i == 0 else [])):
                leaves.append(
                    Leaf(
                        ("params", blk, f"Conv_{j}", "kernel"),
                        f"{src}.{conv}.kernel",
                        _oihw_to_hwio,
                    )
                )
                leaves += _batch_norm((blk, f"BatchNorm_{j}"), f"{src}.{norm}")
            k += 1
    return leaves


#: per workload, every leaf of the hand-written model's variables and its lowered tensor
LEAVES: dict[str, tuple[Leaf, ...]] = {
    "cnn": tuple(_cnn_leaves()),
    "gru": tuple(_gru_leaves()),
    "resnet50": tuple(_resnet50_leaves()),
    "transformer": tuple(_transformer_leaves()),
}


def variables_from(workload: str, params: Mapping[str, np.ndarray]) -> dict:
    """The Flax variables of the hand-written ``workload`` holding the lowered model's weights.

    ``params``: canonical name -> array (``canonical_weights(w)``, or the lowered model's
    ``get_params()``), kept in its dtype (float64 needs ``jax.enable_x64``). Each leaf is read
    from its own tensor by path (:data:`LEAVES`), never by the position of a flattened tree
    (Flax sorts keys as strings: ``Bottleneck_10`` before ``Bottleneck_2``). Raises one
    ``ValueError`` naming every tensor the leaves need and ``params`` lacks, or that none uses."""
    leaves = LEAVES[workload]
    needed = {leaf.source for leaf in leaves}
    missing, unused = sorted(needed - set(params)), sorted(set(params) - needed)
    if missing or unused:
        raise ValueError(
            f"{workload}: the lowered weights do not fit the hand-written model: "
            f"missing {missing}, unused {unused}"
        )
    flat = {
        leaf.path: jnp.asarray(leaf.convert(np.asarray(params[leaf.source]))) for leaf in leaves
    }
    return traverse_util.unflatten_dict(flat)


def check_variables(workload: str, variables: Any, expected: Any) -> None:
    """Raise one ``ValueError`` listing every leaf of ``expected`` (the tree ``model.init``
    builds, or its shapes) that ``variables`` lacks, has extra or holds in another shape."""
    got = {p: tuple(a.shape) for p, a in traverse_util.flatten_dict(variables).items()}
    want = {p: tuple(a.shape) for p, a in traverse_util.flatten_dict(expected).items()}
    problems = [f"{'/'.join(p)}: no lowered tensor" for p in want.keys() - got.keys()]
    problems += [f"{'/'.join(p)}: not a leaf of the Flax model" for p in got.keys() - want.keys()]
    problems += [
        f"{'/'.join(p)}: {got[p]} from the lowered weights, {want[p]} in Flax"
        for p in want.keys() & got.keys()
        if got[p] != want[p]
    ]
    if problems:
        raise ValueError(f"{workload}: hand-written Flax leaves: {'; '.join(sorted(problems))}")


# -- the programs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """A hand-written workload: its jitted steps, initial state and forward function.

    ``step(*state, *batch)``: the timed step (train: dropout on, ``state`` donated, returns the
    new state and the loss; features: the features). ``forward(x)``: the inference-mode function
    of a native input batch (dropout off, BatchNorm's running statistics) at the loaded weights,
    jitted, over its own copy of them (the train step donates ``state``).
    ``step_without_dropout``: the train step with every dropout off and nothing donated, a
    second executable for checks (None for features)."""

    step: Callable  # jitted
    state: tuple  # the arguments that the step threads through (params, optimiser state, ...)
    train: bool
    forward: Callable  # jitted, x -> outputs
    step_without_dropout: Callable | None = None  # jitted


def make(
    workload: str,
    batch: tuple[Any, ...],
    params: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
) -> Program:
    """The hand-written model of ``workload`` with its jitted steps, for batches like ``batch``
    (native inputs: NHWC images or token ids; then int32 labels for training).

    With ``params`` (canonical names and layouts: the lowered model's weights) it holds those
    (:func:`variables_from`, checked leaf by leaf against the tree ``model.init`` builds);
    without, Flax's own initialisation from ``seed``. The dropout stream is ``fold_in(key(seed),
    step)``."""
    key = jax.random.key(seed)
    x = batch[0]
    model, tx = {
        "cnn": (CNN(), optax.sgd(0.01, momentum=0.9)),
        "gru": (GRUClassifier(), optax.adam(1e-3, b1=0.9, b2=0.999, eps=1e-8)),
        "transformer": (
            TransformerClassifier(),
            optax.adamw(1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, mask=_kernels),
        ),
        "resnet50": (ResNet50Features(), None),
    }[workload]
    mode = {} if tx is None else {"train": False}  # features: inference mode is the model's only
    init = functools.partial(model.init, key, x, **mode)
    if params is None:
        variables = init()
    else:
        variables = variables_from(workload, params)
        check_variables(workload, variables, jax.eval_shape(init))
    apply = jax.jit(lambda v, x: model.apply(v, x, **mode))
    if tx is None:
        return Program(
            apply, (variables,), train=False, forward=functools.partial(apply, variables)
        )

    # ``train`` switches dropout alone here: no model that trains holds a BatchNorm
    def train_step(params, opt_state, step, x, y, *, dropout: bool = True):
        def loss_fn(p):
            rngs = {"dropout": jax.random.fold_in(key, step)}
            logits = model.apply({"params": p}, x, train=dropout, rngs=rngs)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, step + 1, loss

    params0 = variables["params"]
    own = jax.tree.map(jnp.copy, variables)  # forward's copy: the train step donates params0
    return Program(
        jax.jit(train_step, donate_argnums=(0, 1, 2)),
        (params0, tx.init(params0), jnp.int32(0)),
        train=True,
        forward=functools.partial(apply, own),
        step_without_dropout=jax.jit(functools.partial(train_step, dropout=False)),
    )
