"""The three workloads written by hand in Keras, as a Keras user would: the baseline the lowered
models are timed against (``benchmarks/lowering_tensorflow.py``).

Plain Keras 3 code: channels-last images, ``padding="same"`` where it means the spec's padding,
``compile`` + ``train_on_batch`` / ``predict_on_batch``. Import only after the ``tensorflow``
backend is configured (``runtime_for``: its ``runtime.py`` selects Keras' TensorFlow backend).
"""

from __future__ import annotations

import keras
from keras import layers


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
