"""The four workloads written by hand in Keras, as a Keras user would: the baseline the lowered
models are timed against (``benchmarks/lowering_tensorflow.py``).

Plain Keras 3 code: channels-last images, ``padding="same"`` where it means the spec's padding,
``compile`` + ``train_on_batch`` / ``predict_on_batch``, Keras' own optimisers (their epsilon
sits outside Adam's bias correction, where the spec's Algorithm 1 puts it inside: a user's
choice the timing keeps, the outputs compared before timing do not see). Each model takes Keras'
global dtype policy (float64 where the tests set ``keras.config.set_dtype_policy("float64")``);
:func:`copy_weights` loads a lowered model's weights into one. Import only after the
``tensorflow`` backend is configured (``runtime_for``: its ``runtime.py`` selects Keras'
TensorFlow backend).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops


def cnn(jit_compile: bool = False) -> keras.Model:
    """The VGG-style CIFAR-10 CNN, compiled with SGD(0.01, momentum 0.9)."""
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            layers.Conv2D(50, 3, padding="same", activation="relu"),
            layers.Conv2D(50, 3, padding="same"),
            layers.MaxPooling2D(2),
            layers.ReLU(),
            layers.Dropout(0.25),
            layers.Conv2D(100, 3, padding="same", activation="relu"),
            layers.Conv2D(100, 3, padding="same"),
            layers.MaxPooling2D(2),
            layers.ReLU(),
            layers.Dropout(0.25),
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(10),
        ],
        name="handwritten_cnn",
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def gru(jit_compile: bool = False) -> keras.Model:
    """Embedding(30000, 125) -> GRU(100) -> Dense(2), compiled with Adam(1e-3)."""
    model = keras.Sequential(
        [
            keras.Input((150,), dtype="int32"),
            layers.Embedding(30000, 125),
            layers.GRU(100),
            layers.Dense(2),
        ],
        name="handwritten_gru",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def _bottleneck(x, width: int, stride: int, project: bool, name: str):
    """ResNet v1.5 bottleneck: the stride on the 3x3 conv; explicit padding where it strides."""
    bn = dict(epsilon=1e-5, momentum=0.9)
    shortcut = x
    if project:
        shortcut = layers.Conv2D(4 * width, 1, strides=stride, use_bias=False, name=f"{name}_proj")(
            x
        )
        shortcut = layers.BatchNormalization(**bn, name=f"{name}_proj_bn")(shortcut)
    y = layers.Conv2D(width, 1, use_bias=False, name=f"{name}_conv1")(x)
    y = layers.ReLU()(layers.BatchNormalization(**bn, name=f"{name}_bn1")(y))
    if stride == 1:
        y = layers.Conv2D(width, 3, padding="same", use_bias=False, name=f"{name}_conv2")(y)
    else:
        y = layers.ZeroPadding2D(1)(y)
        y = layers.Conv2D(width, 3, strides=stride, use_bias=False, name=f"{name}_conv2")(y)
    y = layers.ReLU()(layers.BatchNormalization(**bn, name=f"{name}_bn2")(y))
    y = layers.Conv2D(4 * width, 1, use_bias=False, name=f"{name}_conv3")(y)
    y = layers.BatchNormalization(**bn, name=f"{name}_bn3")(y)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50(size: int = 224, jit_compile: bool = False) -> keras.Model:
    """ResNet-50 v1.5 features (2048-d after global average pooling), for ``predict_on_batch``."""
    inputs = keras.Input((size, size, 3))
    x = layers.ZeroPadding2D(3)(inputs)
    x = layers.Conv2D(64, 7, strides=2, use_bias=False, name="conv1")(x)
    x = layers.ReLU()(layers.BatchNormalization(epsilon=1e-5, momentum=0.9, name="bn1")(x))
    x = layers.ZeroPadding2D(1)(x)  # after a ReLU, zero padding is max-pool's -inf padding
    x = layers.MaxPooling2D(3, strides=2)(x)
    for stage, (width, blocks, stride) in enumerate(
        [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1
    ):
        for i in range(blocks):
            x = _bottleneck(x, width, stride if i == 0 else 1, i == 0, f"layer{stage}_{i}")
    outputs = layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, outputs, name="handwritten_resnet50")
    model.compile(jit_compile=jit_compile)
    return model


class TokenAndPositionEmbedding(layers.Layer):
    """keras.io's token + learned position embedding: ``Embedding(ids) + Embedding(0..T-1)``."""

    def __init__(self, maxlen: int, vocab: int, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.token_emb = layers.Embedding(vocab, dim)
        self.pos_emb = layers.Embedding(maxlen, dim)

    def call(self, ids):
        positions = ops.arange(ops.shape(ids)[-1])  # (T,)
        return self.token_emb(ids) + self.pos_emb(positions)  # (N, T, E) + (T, E)


class EncoderBlock(layers.Layer):
    """Pre-LN encoder block: ``x + drop(attn(ln1(x)))``, then ``x + drop(ff2(gelu(ff1(ln2(x)))))``.

    Attention from ``Dense`` projections and ``ops.matmul``/``ops.softmax``, as keras.io's
    text-classification Transformer first wrote it, not ``layers.MultiHeadAttention``: its
    ``use_bias`` is one switch for all four projections, and the spec's key projection has no
    bias (a key bias cancels in the softmax, but it would be a parameter AdamW moves). Padding
    keys get -1e9 added to their scores, as ``MultiHeadAttention``'s mask does: an exact 0
    weight wherever a row has a real key; a row of padding only averages its padding, which the
    masked mean then drops (its pooled vector is 0 either way). GELU is ``activation="gelu"``,
    the exact (erf) form (``keras.activations.gelu``; ``keras.ops.gelu`` defaults to the tanh
    form)."""

    def __init__(self, dim: int = 128, heads: int = 4, hidden: int = 512, rate: float = 0.1, **kw):
        super().__init__(**kw)
        self.dim, self.heads = dim, heads
        self.ln1 = layers.LayerNormalization(epsilon=1e-5)  # Keras' default 1e-3 is not the spec
        self.query = layers.Dense(dim)
        self.key = layers.Dense(dim, use_bias=False)
        self.value = layers.Dense(dim)
        self.out = layers.Dense(dim)
        self.ln2 = layers.LayerNormalization(epsilon=1e-5)
        self.ff1 = layers.Dense(hidden, activation="gelu")
        self.ff2 = layers.Dense(dim)
        self.drop1 = layers.Dropout(rate)
        self.drop2 = layers.Dropout(rate)

    def attend(self, x, valid):
        """Multi-head self-attention of ``x`` (N, T, E) over its real tokens ``valid`` (N, T)."""
        t, d = ops.shape(x)[1], self.dim // self.heads

        def split(y):  # (N, T, E) -> (N, heads, T, d)
            return ops.transpose(ops.reshape(y, (-1, t, self.heads, d)), (0, 2, 1, 3))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / d**0.5  # (N, heads, T, T)
        padding = 1.0 - ops.cast(valid, scores.dtype)[:, None, None, :]  # (N, 1, 1, T)
        probs = ops.softmax(scores + padding * -1e9, axis=-1)
        o = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))  # (N, T, heads, d)
        return self.out(ops.reshape(o, (-1, t, self.dim)))  # (N, T, E)

    def call(self, x, valid, training=False):
        x = x + self.drop1(self.attend(self.ln1(x), valid), training=training)
        h = self.ff2(self.ff1(self.ln2(x)))
        return x + self.drop2(h, training=training)


def transformer(jit_compile: bool = False) -> keras.Model:
    """Token + position embedding, 2 pre-LN encoder blocks, final LayerNorm, the mean over real
    tokens (id != 0), Dense(2); compiled with ``AdamW`` (the spec's lr, betas, eps and decay),
    whose decay skips biases, LayerNorm scales and offsets, and both embedding tables
    (``exclude_from_weight_decay``): only the Dense kernels decay."""
    ids = keras.Input((150,), dtype="int32")
    valid = ops.not_equal(ids, 0)  # (N, T): real tokens
    x = TokenAndPositionEmbedding(150, 30000, 128)(ids)
    for _ in range(2):
        x = EncoderBlock()(x, valid)
    x = layers.LayerNormalization(epsilon=1e-5)(x)
    w = ops.cast(valid, x.dtype)[:, :, None]  # (N, T, 1)
    # the mean over real tokens; a row of padding only pools to 0 (GlobalAveragePooling1D's
    # mask divides by its count, 0 there)
    pooled = ops.sum(x * w, axis=1) / ops.maximum(ops.sum(w, axis=1), 1.0)  # (N, E)
    model = keras.Model(ids, layers.Dense(2)(pooled), name="handwritten_transformer")
    opt = keras.optimizers.AdamW(
        learning_rate=1e-3, weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-8
    )
    opt.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "embeddings"])
    model.compile(
        optimizer=opt,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def make(name: str, image_size: int = 224, jit_compile: bool = False) -> keras.Model:
    """The hand-written model of workload ``name`` (ResNet-50 at ``image_size``), compiled."""
    if name == "resnet50":
        return resnet50(image_size, jit_compile=jit_compile)
    return {"cnn": cnn, "gru": gru, "transformer": transformer}[name](jit_compile=jit_compile)


def copy_weights(lowered: keras.Model, hand: keras.Model) -> None:
    """Give ``hand`` the lowered model's (native) weights: by layer name for the functional
    ResNet (``layer1_0_proj_bn`` is ``layer1.0.proj_bn``), otherwise variable by variable in
    creation order (the hand-written layers create theirs in the spec's order), shapes checked."""
    if hand.name == "handwritten_resnet50":
        for layer in (ly for ly in hand.layers if ly.weights):
            parts = layer.name.split("_", 2)
            name = ".".join(parts) if layer.name.startswith("layer") else layer.name
            layer.set_weights(lowered.get_layer(name).get_weights())
        return
    mine, theirs = hand.weights, lowered.weights
    if len(mine) != len(theirs):
        raise ValueError(f"{len(theirs)} lowered weights, {len(mine)} hand-written")
    for a, b in zip(mine, theirs, strict=True):
        if tuple(a.shape) != tuple(b.shape):
            raise ValueError(f"{a.path}: shape {tuple(a.shape)} != {b.path} {tuple(b.shape)}")
        a.assign(np.asarray(b.numpy(), dtype=a.dtype))
