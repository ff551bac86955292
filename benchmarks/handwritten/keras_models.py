"""The four workloads written by hand in Keras 3, as a Keras user writes them from keras.io: the
yardstick the ``keras_jax`` and ``keras_torch`` lowered models are timed against
(``benchmarks/lowering_keras_jax.py``, ``benchmarks/lowering_keras_torch.py``).

One file for both engines: Keras 3 code is engine-neutral, and Keras picks its engine once per
process, so import this module only after the backend's runtime has selected it
(``rosetta.backends.runtime_for("keras_jax" | "keras_torch")``). The models are plain
``keras.Sequential`` / functional ``keras.Model`` built from ``layers.Conv2D``,
``layers.BatchNormalization``, ``layers.GRU``, ``layers.Dense``,
``layers.LayerNormalization(epsilon=1e-5)``; training is the Keras-documented way,
``model.compile(optimizer=..., loss=SparseCategoricalCrossentropy(from_logits=True),
jit_compile="auto")`` and ``model.train_on_batch(x, y)``; features are
``model.predict_on_batch(x)`` (BatchNorm on its moving statistics).

Choices, each the lowered model's where the two could differ:

- **Layout**: images in the data format the lowered model runs (``data_format``: channels-last
  on JAX, channels-first on PyTorch, whose Keras convolutions are NCHW), set per layer. Not
  through ``keras.config.set_image_data_format``: ``Flatten`` follows that setting and, in
  channels-first, transposes to H, W, C before flattening, where the spec flattens C, H, W.
- **dtype**: Keras' ``floatx`` and dtype policy while the model is built (:func:`build`).
- **Attention**: ``layers.MultiHeadAttention`` has one ``use_bias`` for all four projections and
  cannot drop the key's bias alone (the spec has none: it cancels in the softmax), so the
  projections are four ``layers.Dense`` (the key's ``use_bias=False``) and the core is
  ``keras.ops.dot_product_attention`` with the boolean key mask: what ``MultiHeadAttention``
  itself calls (it has no attention dropout here), the engine's fused kernel where it has one
  (``F.scaled_dot_product_attention`` on PyTorch). The masked mean is
  ``layers.GlobalAveragePooling1D`` with the mask. A row of padding only differs from the spec
  (uniform attention, 0 / 0 in the mean), as Keras' own layers do; the timed batches have none.
  On JAX Keras' ``dot_product_attention`` takes its softmax in float32 whatever the inputs, so
  a float64 model agrees with the lowered one there to float32's rounding only.
- **GRU**: Keras' own ``layers.GRU(100)`` on both engines. On PyTorch the lowered model runs
  PyTorch's fused ``nn.GRU`` in ``TorchModuleWrapper`` instead (its option ``gru``), a fast path
  a Keras user does not take (Keras' GRU is a Python loop over the steps on the CPU there);
  :func:`copy_weights` converts its tensors to Keras' layout.
- **Positions**: keras.io's ``TokenAndPositionEmbedding`` (an ``Embedding`` looked up at
  ``arange(T)``).
- **Optimisers**: Keras' stock ``SGD(momentum=0.9)``, ``Adam`` and ``AdamW`` (the spec's
  betas, epsilon 1e-8 and decay; AdamW's decay kept off biases, LayerNorm and the embeddings with
  ``exclude_from_weight_decay``). Keras' Adam adds epsilon to ``sqrt(v)`` before the bias
  correction where the spec's Algorithm 1 adds it after; the lowered backend writes the spec's
  rule out (``keras_common/optim.py``, ``SpecAdam``), the hand-written side keeps Keras' own,
  as a user would. The two step the same way away from ``|g| ~ eps``; the benchmarks check the
  forward pass (eval) equal, not the training trajectory.

The weight-carrying layers come in the spec's order, so :func:`copy_weights` loads a lowered
model's variables by position.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import keras
import numpy as np
from keras import layers, ops

#: (width, blocks, stride) of ResNet-50's four stages
RESNET_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


def cnn(data_format: str = "channels_last") -> keras.Model:
    """The VGG-style CIFAR-10 CNN (ReLU after max-pool, as the original)."""
    image = (32, 32, 3) if data_format == "channels_last" else (3, 32, 32)
    conv = dict(padding="same", data_format=data_format)
    return keras.Sequential(
        [
            keras.Input(image),
            layers.Conv2D(50, 3, activation="relu", **conv),
            layers.Conv2D(50, 3, **conv),
            layers.MaxPooling2D(2, data_format=data_format),
            layers.ReLU(),
            layers.Dropout(0.25),
            layers.Conv2D(100, 3, activation="relu", **conv),
            layers.Conv2D(100, 3, **conv),
            layers.MaxPooling2D(2, data_format=data_format),
            layers.ReLU(),
            layers.Dropout(0.25),
            layers.Flatten(),  # (N, 8, 8, 100) | (N, 100, 8, 8) -> (N, 6400), memory order
            layers.Dense(512, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(10),
        ],
        name="handwritten_cnn",
    )


def gru() -> keras.Model:
    """Embedding(30000, 125) - GRU(100) (Keras' default reset_after=True), last state - Dense(2)."""
    return keras.Sequential(
        [
            keras.Input((150,), dtype="int32"),
            layers.Embedding(30000, 125),
            layers.GRU(100),  # (N, 150, 125) -> (N, 100), the last step
            layers.Dense(2),
        ],
        name="handwritten_gru",
    )


def _bottleneck(x, width: int, stride: int, project: bool, data_format: str):
    """ResNet v1.5 bottleneck (the stride on the 3x3 conv); explicit padding where it strides
    (Keras' "same" would pad bottom/right only). The body before the shortcut, as the spec."""
    axis = -1 if data_format == "channels_last" else 1
    conv = dict(use_bias=False, data_format=data_format)
    bn = dict(axis=axis, epsilon=1e-5, momentum=0.9)
    y = layers.Conv2D(width, 1, **conv)(x)
    y = layers.ReLU()(layers.BatchNormalization(**bn)(y))
    if stride == 1:
        y = layers.Conv2D(width, 3, padding="same", **conv)(y)
    else:
        y = layers.ZeroPadding2D(1, data_format=data_format)(y)
        y = layers.Conv2D(width, 3, strides=stride, **conv)(y)
    y = layers.ReLU()(layers.BatchNormalization(**bn)(y))
    y = layers.BatchNormalization(**bn)(layers.Conv2D(4 * width, 1, **conv)(y))
    shortcut = x
    if project:
        shortcut = layers.Conv2D(4 * width, 1, strides=stride, **conv)(x)
        shortcut = layers.BatchNormalization(**bn)(shortcut)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50(size: int = 224, data_format: str = "channels_last") -> keras.Model:
    """ResNet-50 v1.5 features: (N, H, W, 3) | (N, 3, H, W) -> (N, 2048) after the global
    average pool."""
    image = (size, size, 3) if data_format == "channels_last" else (3, size, size)
    axis = -1 if data_format == "channels_last" else 1
    inputs = keras.Input(image)
    x = layers.ZeroPadding2D(3, data_format=data_format)(inputs)
    x = layers.Conv2D(64, 7, strides=2, use_bias=False, data_format=data_format)(x)
    x = layers.ReLU()(layers.BatchNormalization(axis=axis, epsilon=1e-5, momentum=0.9)(x))
    x = layers.ZeroPadding2D(1, data_format=data_format)(x)  # after a ReLU: -inf padding's max
    x = layers.MaxPooling2D(3, strides=2, data_format=data_format)(x)
    for width, blocks, stride in RESNET_STAGES:
        for i in range(blocks):
            x = _bottleneck(x, width, stride if i == 0 else 1, i == 0, data_format)
    outputs = layers.GlobalAveragePooling2D(data_format=data_format)(x)
    return keras.Model(inputs, outputs, name="handwritten_resnet50")


class TokenAndPositionEmbedding(layers.Layer):
    """keras.io's token + learned position embedding: ``tokens(ids) + positions(arange(T))``."""

    def __init__(self, maxlen: int, vocab_size: int, embed_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.token_emb = layers.Embedding(vocab_size, embed_dim)
        self.pos_emb = layers.Embedding(maxlen, embed_dim)

    def call(self, ids):
        positions = self.pos_emb(ops.arange(0, ops.shape(ids)[-1]))  # (T, E)
        return self.token_emb(ids) + positions  # (N, T, E)


class SelfAttention(layers.Layer):
    """Multi-head self-attention: four ``Dense`` projections (the key's without bias, which
    ``MultiHeadAttention`` cannot express) around ``keras.ops.dot_product_attention``, the core
    ``MultiHeadAttention`` calls, with the boolean key mask ``valid`` (N, T)."""

    def __init__(self, dim: int, heads: int, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.heads = dim, heads
        self.query = layers.Dense(dim)
        self.key = layers.Dense(dim, use_bias=False)
        self.value = layers.Dense(dim)
        self.out = layers.Dense(dim)

    def call(self, x, valid):
        n, t = ops.shape(x)[0], ops.shape(x)[1]
        split = (n, t, self.heads, self.dim // self.heads)  # (N, T, E) -> (N, T, heads, d)
        q, k, v = (ops.reshape(p(x), split) for p in (self.query, self.key, self.value))
        a = ops.dot_product_attention(q, k, v, mask=valid[:, None, None, :])  # (N, T, heads, d)
        return self.out(ops.reshape(a, (n, t, self.dim)))  # heads concatenated: (N, T, E)


def transformer(
    vocab: int = 30000, length: int = 150, dim: int = 128, heads: int = 4, hidden: int = 512
) -> keras.Model:
    """Token + position embedding, 2 pre-LN encoder blocks, final LayerNorm, masked mean pool,
    Dense(2)."""
    ids = keras.Input((length,), dtype="int32")
    valid = ops.not_equal(ids, 0)  # (N, T): a real token
    x = TokenAndPositionEmbedding(length, vocab, dim)(ids)
    for _ in range(2):  # x + drop(attn(ln1(x))), then x + drop(ff2(gelu(ff1(ln2(x)))))
        h = SelfAttention(dim, heads)(layers.LayerNormalization(epsilon=1e-5)(x), valid)
        x = x + layers.Dropout(0.1)(h)
        h = layers.LayerNormalization(epsilon=1e-5)(x)
        h = layers.Dense(dim)(layers.Dense(hidden, activation="gelu")(h))  # exact (erf) GELU
        x = x + layers.Dropout(0.1)(h)
    x = layers.LayerNormalization(epsilon=1e-5)(x)
    pooled = layers.GlobalAveragePooling1D()(x, mask=valid)  # the mean over real tokens
    return keras.Model(ids, layers.Dense(2)(pooled), name="handwritten_transformer")


MODELS = {"cnn": cnn, "gru": gru, "resnet50": resnet50, "transformer": transformer}


@contextlib.contextmanager
def _floatx(dtype: str) -> Iterator[None]:
    """Keras' ``floatx`` and its global dtype policy (which caches the floatx of its first use)
    set to ``dtype`` inside the block, as a user sets them before building a model."""
    previous = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx(dtype)
    keras.config.set_dtype_policy(dtype)
    try:
        yield
    finally:
        keras.config.set_floatx(previous[0])
        keras.config.set_dtype_policy(previous[1])


def build(
    name: str, *, dtype: str = "float32", data_format: str = "channels_last", image_size: int = 224
) -> keras.Model:
    """The hand-written model of workload ``name`` in ``dtype`` (Keras' floatx and dtype policy
    while it is built); images in ``data_format``, ResNet-50 at ``image_size``."""
    with _floatx(dtype):
        if name == "cnn":
            return cnn(data_format)
        if name == "resnet50":
            return resnet50(image_size, data_format)
        return MODELS[name]()


def optimizer(name: str, o) -> keras.optimizers.Optimizer:
    """The spec's optimiser ``o`` (the workload's) as Keras' stock one (see the module
    docstring: Keras' Adam places epsilon before the bias correction)."""
    if name == "cnn":
        return keras.optimizers.SGD(learning_rate=o.lr, momentum=o.momentum, nesterov=o.nesterov)
    betas = dict(beta_1=o.beta1, beta_2=o.beta2, epsilon=o.eps)
    if name == "transformer":  # the spec's split: the dense and attention matrices decay
        opt = keras.optimizers.AdamW(learning_rate=o.lr, weight_decay=o.weight_decay, **betas)
        opt.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "embeddings"])
        return opt
    return keras.optimizers.Adam(learning_rate=o.lr, **betas)


def compile_for_training(
    model: keras.Model, name: str, o, jit_compile: bool | str = "auto"
) -> keras.Model:
    """``model.compile`` as Keras' guides write it: the optimiser, the softmax cross-entropy
    on logits (mean over the batch), ``jit_compile`` (``"auto"``: XLA on JAX, eager on
    PyTorch)."""
    model.compile(
        optimizer=optimizer(name, o),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def train_step(model: keras.Model, x, y) -> float:
    """One training step, Keras' documented way: ``train_on_batch`` (returns the loss)."""
    return model.train_on_batch(x, y)


def features_step(model: keras.Model, x) -> np.ndarray:
    """The forward pass in inference mode, Keras' documented way: ``predict_on_batch``."""
    return model.predict_on_batch(x)


def _torch_gru_as_keras(weight_ih, weight_hh, bias_ih, bias_hh) -> list[np.ndarray]:
    """PyTorch ``nn.GRU``'s tensors (rows r | z | n) as Keras GRU's ``kernel (E, 3H)``,
    ``recurrent_kernel (H, 3H)`` (columns z | r | h) and ``bias (2, 3H)`` (input, recurrent):
    the same equations (reset after the recurrent matmul), gate blocks reordered."""

    def zrh(a: np.ndarray) -> np.ndarray:  # (3H, ...) r|z|n -> z|r|n
        r, z, n = np.split(a, 3, axis=0)
        return np.concatenate([z, r, n], axis=0)

    return [zrh(weight_ih).T, zrh(weight_hh).T, np.stack([zrh(bias_ih), zrh(bias_hh)])]


def _wraps_torch_gru(layer: layers.Layer) -> bool:
    """Whether ``layer`` is a ``TorchModuleWrapper`` around a one-layer ``torch.nn.GRU``."""
    module = getattr(layer, "module", None)
    if type(layer).__name__ != "TorchModuleWrapper" or module is None:
        return False
    return any(type(m).__name__ == "GRU" for m in module.modules()) and len(layer.weights) == 4


def _source_arrays(model: keras.Model) -> list[np.ndarray]:
    """Every float weight of ``model``, layer by layer (a lowered model's boolean dropout gate
    left out; keras_torch's fused GRU, a ``TorchModuleWrapper`` of ``nn.GRU``, in Keras GRU's
    form)."""
    out: list[np.ndarray] = []
    for layer in model.layers:
        held = [w for w in layer.weights if "float" in str(w.dtype)]
        values = [np.asarray(ops.convert_to_numpy(w.value)) for w in held]
        if _wraps_torch_gru(layer):
            values = _torch_gru_as_keras(*values)
        out += values
    return out


def copy_weights(src: keras.Model, dst: keras.Model) -> None:
    """Load ``src``'s (a lowered model's) weights into ``dst`` by position, shape-checked: one
    ``ValueError`` naming the first mismatch."""
    values, targets = _source_arrays(src), dst.weights
    if len(values) != len(targets):
        raise ValueError(f"{len(values)} weights in {src.name}, {len(targets)} in {dst.name}")
    for i, (value, target) in enumerate(zip(values, targets, strict=True)):
        if tuple(value.shape) != tuple(target.shape):
            raise ValueError(
                f"weight {i} ({target.path}): {dst.name} has shape {tuple(target.shape)}, "
                f"{src.name} {tuple(value.shape)}"
            )
    for value, target in zip(values, targets, strict=True):
        target.assign(value.astype(target.dtype))
