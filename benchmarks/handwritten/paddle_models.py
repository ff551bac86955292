"""The four workloads written by hand, the way a Paddle user writes them from Paddle's own guides.

Plain ``paddle.nn.Layer`` classes (``nn.Conv2D``, ``nn.BatchNorm2D``, ``nn.GRU``, ``nn.Linear``,
``nn.LayerNorm``) and the training loop of Paddle's quick start (``loss.backward()``,
``opt.step()``, ``opt.clear_grad()``); features under ``paddle.no_grad()`` in ``eval()``. The
yardstick the lowered models are timed against (``benchmarks/lowering_paddle.py``); features go
through Paddle Inference as its guide deploys them (:func:`deploy`) where the lowered model's do.
Their parameters are declared in the order of the spec's layers, so :func:`copy_weights` loads a
lowered model's tensors by position, to check that both compute the same function before their
clocks are compared.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn


class VGGNet(nn.Layer):
    """The Rosetta Stone CIFAR-10 CNN (ReLU after max-pool, as the original)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2D(3, 50, 3, padding=1)
        self.conv2 = nn.Conv2D(50, 50, 3, padding=1)
        self.conv3 = nn.Conv2D(50, 100, 3, padding=1)
        self.conv4 = nn.Conv2D(100, 100, 3, padding=1)
        self.fc1 = nn.Linear(100 * 8 * 8, 512)
        self.fc2 = nn.Linear(512, num_classes)
        self.drop1 = nn.Dropout(0.25)
        self.drop2 = nn.Dropout(0.25)
        self.drop3 = nn.Dropout(0.5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.conv1(x))
        x = self.drop1(F.relu(F.max_pool2d(self.conv2(x), 2)))
        x = F.relu(self.conv3(x))
        x = self.drop2(F.relu(F.max_pool2d(self.conv4(x), 2)))
        x = paddle.flatten(x, 1)  # (N, 100, 8, 8) -> (N, 6400)
        x = self.drop3(F.relu(self.fc1(x)))
        return self.fc2(x)


class GRUNet(nn.Layer):
    """Embedding(30000, 125) - GRU(100) - last state - Linear(2)."""

    def __init__(self, vocab: int = 30000, dim: int = 125, hidden: int = 100) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden)  # batch-major (time_major=False), Paddle's fused rnn
        self.fc = nn.Linear(hidden, 2)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        _, h = self.gru(self.embedding(x))  # h: (1, N, H)
        return self.fc(h[0])


class Bottleneck(nn.Layer):
    """ResNet v1.5 bottleneck (stride on the 3x3 conv), PaddleClas' layout."""

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2D(in_ch, width, 1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(width)
        self.conv2 = nn.Conv2D(width, width, 3, stride=stride, padding=1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(width)
        self.conv3 = nn.Conv2D(width, width * 4, 1, bias_attr=False)
        self.bn3 = nn.BatchNorm2D(width * 4)
        self.downsample = None
        if stride != 1 or in_ch != width * 4:
            self.downsample = nn.Sequential(
                nn.Conv2D(in_ch, width * 4, 1, stride=stride, bias_attr=False),
                nn.BatchNorm2D(width * 4),
            )

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


class ResNet50Features(nn.Layer):
    """ResNet-50 up to the global average pool: (N, 3, H, W) -> (N, 2048)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2D(3, 64, 7, stride=2, padding=3, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(64)
        layers, in_ch = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(in_ch, width, stride if i == 0 else 1))
                in_ch = width * 4
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, stride=2, padding=1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return paddle.flatten(F.adaptive_avg_pool2d(x, 1), 1)  # (N, 2048, 1, 1) -> (N, 2048)


class EncoderBlock(nn.Layer):
    """Pre-LN encoder block: x + drop(attn(ln1(x))), then x + drop(ff2(gelu(ff1(ln2(x)))))."""

    def __init__(self, dim: int = 128, heads: int = 4, hidden: int = 512, rate: float = 0.1):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim, epsilon=1e-5)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim, bias_attr=False)  # the spec's: a key bias cancels
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim, epsilon=1e-5)
        self.ff1 = nn.Linear(dim, hidden)
        self.ff2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(rate)

    def forward(self, x: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
        n, t, e = x.shape
        h = self.ln1(x)
        q, k, v = (
            p(h).reshape([n, t, self.heads, -1]).transpose([0, 2, 1, 3])
            for p in (self.q, self.k, self.v)
        )  # (N, H, T, d)
        scores = paddle.matmul(q, k, transpose_y=True) / (e // self.heads) ** 0.5 + mask
        a = paddle.matmul(F.softmax(scores, axis=-1), v)  # (N, H, T, d)
        x = x + self.drop(self.o(a.transpose([0, 2, 1, 3]).reshape([n, t, e])))
        return x + self.drop(self.ff2(F.gelu(self.ff1(self.ln2(x)))))


class TransformerNet(nn.Layer):
    """Token + position embedding, 2 encoder blocks, final LayerNorm, masked mean, dense 2."""

    def __init__(self, vocab: int = 30000, dim: int = 128, length: int = 150) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)  # learned positions, BERT's way
        self.blocks = nn.LayerList([EncoderBlock(dim), EncoderBlock(dim)])
        self.ln = nn.LayerNorm(dim, epsilon=1e-5)
        self.fc = nn.Linear(dim, 2)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        w = (ids != 0).astype(self.pos.weight.dtype)  # (N, T): 1 for a real token
        mask = ((1.0 - w) * -1e9)[:, None, None, :]  # (N, 1, 1, T): the usual additive mask
        x = self.embedding(ids) + self.pos.weight[: ids.shape[1]]
        for block in self.blocks:
            x = block(x, mask)
        pooled = (self.ln(x) * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clip(min=1)
        return self.fc(pooled)


MODELS = {"cnn": VGGNet, "gru": GRUNet, "resnet50": ResNet50Features, "transformer": TransformerNet}


def optimizer(name: str, model: nn.Layer, o) -> paddle.optimizer.Optimizer:
    """The spec's optimiser as a Paddle user writes it (``o``: the workload's optimiser)."""
    params = model.parameters()
    if name == "cnn":
        return paddle.optimizer.Momentum(o.lr, momentum=o.momentum, parameters=params)
    betas = {"beta1": getattr(o, "beta1", 0.9), "beta2": getattr(o, "beta2", 0.999)}
    if name == "transformer":  # the usual split: the linear layers' matrices decay
        decay = {p.name for n, p in model.named_parameters() if _decays(n, p)}
        return paddle.optimizer.AdamW(
            o.lr, **betas, epsilon=o.eps, parameters=params, weight_decay=o.weight_decay,
            apply_decay_param_fun=lambda pname: pname in decay,
        )  # fmt: skip
    return paddle.optimizer.Adam(o.lr, **betas, epsilon=o.eps, parameters=params)


def _decays(name: str, p) -> bool:
    tables = name.startswith(("embedding", "pos"))
    return name.endswith("weight") and len(p.shape) == 2 and not tables


def train_step(model: nn.Layer, opt, x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
    """The step of Paddle's quick start."""
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.clear_grad()
    return loss


def features_step(model: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
    """Feature extraction as a user writes it."""
    with paddle.no_grad():
        return model(x)


def deploy(model: nn.Layer, input_shape: tuple[int, ...], threads: int):
    """Feature extraction as Paddle's inference guide deploys it on the CPU: the model saved
    with ``paddle.jit.save``, a ``paddle.inference`` predictor with oneDNN on. Returns the
    function of a NumPy batch."""
    from paddle import inference

    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet50")
        spec = [paddle.static.InputSpec([None, *input_shape], "float32", name="image")]
        paddle.jit.save(model, path, input_spec=spec)
        graph = next(f for f in os.listdir(tmp) if f.endswith((".json", ".pdmodel")))
        config = inference.Config(os.path.join(tmp, graph), path + ".pdiparams")
        config.enable_mkldnn()
        config.set_cpu_math_library_num_threads(threads)
        predictor = inference.create_predictor(config)
    image = predictor.get_input_handle(predictor.get_input_names()[0])
    features = predictor.get_output_handle(predictor.get_output_names()[0])

    def run(x: np.ndarray) -> np.ndarray:
        image.copy_from_cpu(x)
        predictor.run()
        return features.copy_to_cpu()

    return run


def _tensors(net: nn.Layer) -> list:
    """Parameters in declaration order, then every BatchNorm's running mean and variance."""
    bns = [m for m in net.sublayers() if isinstance(m, nn.layer.norm._BatchNormBase)]
    return [*net.parameters(), *(t for m in bns for t in (m._mean, m._variance))]


def copy_weights(src: nn.Layer, dst: nn.Layer) -> None:
    """Load ``src``'s parameters and BatchNorm statistics into ``dst`` by position."""
    a, b = _tensors(src), _tensors(dst)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} tensors in the source, {len(b)} in the destination")
    for value, target in zip(a, b, strict=True):
        if value.shape != target.shape:
            raise ValueError(f"{target.name}: shape {target.shape} != {value.shape}")
        target.set_value(value)
