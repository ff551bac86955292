"""The four workloads written by hand, the way a MindSpore user writes them from its own tutorials.

Plain ``mindspore.nn.Cell`` classes (``nn.Conv2d``, ``nn.BatchNorm2d``, ``nn.GRU``, ``nn.Dense``,
``nn.LayerNorm``, ``nn.Embedding``) and the functional training loop of MindSpore's quick start
(``mindspore.value_and_grad`` of a loss function over ``optimizer.parameters``, then
``optimizer(grads)``), with MindSpore's own optimisers (``nn.Momentum``, ``nn.Adam``,
``nn.AdamWeightDecay``: rules that differ from the spec's in epsilon's place and AdamW's bias
correction, the same work per step); features with ``set_train(False)``. Float32; the step and
the forward under ``mindspore.jit`` as its tutorials' ``@ms.jit`` train step (``jit=False``:
PyNative). The
yardstick the lowered models are timed against (``benchmarks/lowering_mindspore.py``). Their
parameters are declared in the order of the spec's layers, so :func:`copy_weights` loads a
lowered model's tensors by position, to check that both compute the same function before their
clocks are compared.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops


class VGGNet(nn.Cell):
    """The Rosetta Stone CIFAR-10 CNN (ReLU after max-pool, as the original)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        conv = dict(pad_mode="pad", padding=1, has_bias=True)
        self.conv1 = nn.Conv2d(3, 50, 3, **conv)
        self.conv2 = nn.Conv2d(50, 50, 3, **conv)
        self.conv3 = nn.Conv2d(50, 100, 3, **conv)
        self.conv4 = nn.Conv2d(100, 100, 3, **conv)
        self.fc1 = nn.Dense(100 * 8 * 8, 512)
        self.fc2 = nn.Dense(512, num_classes)
        self.drop1 = nn.Dropout(p=0.25)
        self.drop2 = nn.Dropout(p=0.25)
        self.drop3 = nn.Dropout(p=0.5)
        self.pool = nn.MaxPool2d(2, 2)
        self.relu = nn.ReLU()

    def construct(self, x):
        x = self.relu(self.conv1(x))
        x = self.drop1(self.relu(self.pool(self.conv2(x))))
        x = self.relu(self.conv3(x))
        x = self.drop2(self.relu(self.pool(self.conv4(x))))
        x = ops.flatten(x)  # (N, 100, 8, 8) -> (N, 6400)
        x = self.drop3(self.relu(self.fc1(x)))
        return self.fc2(x)


class GRUNet(nn.Cell):
    """Embedding(30000, 125) - GRU(100) - last state - Dense(2)."""

    def __init__(self, vocab: int = 30000, dim: int = 125, hidden: int = 100) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, batch_first=True)
        self.fc = nn.Dense(hidden, 2)

    def construct(self, x):
        _, h = self.gru(self.embedding(x))  # h: (1, N, H)
        return self.fc(h[0])


class Bottleneck(nn.Cell):
    """ResNet v1.5 bottleneck (stride on the 3x3 conv), MindSpore's model zoo layout."""

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, width, 1)
        self.bn1 = nn.BatchNorm2d(width, use_batch_statistics=False)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, pad_mode="pad", padding=1)
        self.bn2 = nn.BatchNorm2d(width, use_batch_statistics=False)
        self.conv3 = nn.Conv2d(width, width * 4, 1)
        self.bn3 = nn.BatchNorm2d(width * 4, use_batch_statistics=False)
        self.relu = nn.ReLU()
        self.down = stride != 1 or in_ch != width * 4
        if self.down:
            self.downsample = nn.SequentialCell(
                nn.Conv2d(in_ch, width * 4, 1, stride=stride),
                nn.BatchNorm2d(width * 4, use_batch_statistics=False),
            )

    def construct(self, x):
        identity = self.downsample(x) if self.down else x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet50Features(nn.Cell):
    """ResNet-50 up to the global average pool: (N, 3, H, W) -> (N, 2048)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, pad_mode="pad", padding=3)
        self.bn1 = nn.BatchNorm2d(64, use_batch_statistics=False)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(3, 2, pad_mode="pad", padding=1)
        stages, in_ch = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(in_ch, width, stride if i == 0 else 1))
                in_ch = width * 4
            stages.append(nn.SequentialCell(stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages

    def construct(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return x.mean(axis=(2, 3))  # (N, 2048, H', W') -> (N, 2048)


class EncoderBlock(nn.Cell):
    """Pre-LN encoder block: x + drop(attn(ln1(x))), then x + drop(ff2(gelu(ff1(ln2(x)))))."""

    def __init__(self, dim: int = 128, heads: int = 4, hidden: int = 512, rate: float = 0.1):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm((dim,), epsilon=1e-5)
        self.q = nn.Dense(dim, dim)
        self.k = nn.Dense(dim, dim, has_bias=False)  # the spec's: a key bias cancels
        self.v = nn.Dense(dim, dim)
        self.o = nn.Dense(dim, dim)
        self.ln2 = nn.LayerNorm((dim,), epsilon=1e-5)
        self.ff1 = nn.Dense(dim, hidden)
        self.ff2 = nn.Dense(hidden, dim)
        self.gelu = nn.GELU(approximate=False)
        self.drop = nn.Dropout(p=rate)
        self.scale = (dim // heads) ** -0.5

    def construct(self, x, mask):
        n, t, e = x.shape
        h = self.ln1(x)
        q = self.q(h).reshape(n, t, self.heads, -1).transpose(0, 2, 1, 3)  # (N, H, T, d)
        k = self.k(h).reshape(n, t, self.heads, -1).transpose(0, 2, 3, 1)  # (N, H, d, T)
        v = self.v(h).reshape(n, t, self.heads, -1).transpose(0, 2, 1, 3)
        a = ops.matmul(ops.softmax(ops.matmul(q, k) * self.scale + mask, axis=-1), v)
        x = x + self.drop(self.o(a.transpose(0, 2, 1, 3).reshape(n, t, e)))
        return x + self.drop(self.ff2(self.gelu(self.ff1(self.ln2(x)))))


class TransformerNet(nn.Cell):
    """Token + position embedding, 2 encoder blocks, final LayerNorm, masked mean, dense 2."""

    def __init__(self, vocab: int = 30000, dim: int = 128, length: int = 150) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)  # learned positions, BERT's way
        self.blocks = nn.CellList([EncoderBlock(dim), EncoderBlock(dim)])
        self.ln = nn.LayerNorm((dim,), epsilon=1e-5)
        self.fc = nn.Dense(dim, 2)

    def construct(self, ids):
        w = (ids != 0).astype(ms.float32)  # (N, T): 1 for a real token
        mask = ((1.0 - w) * -1e9).reshape(w.shape[0], 1, 1, -1)  # (N, 1, 1, T): additive
        x = self.embedding(ids) + self.pos.embedding_table[: ids.shape[1]]
        for block in self.blocks:
            x = block(x, mask)
        pooled = (self.ln(x) * w.expand_dims(-1)).sum(1) / ops.clamp(w.sum(1, keepdims=True), 1)
        return self.fc(pooled)


MODELS = {"cnn": VGGNet, "gru": GRUNet, "resnet50": ResNet50Features, "transformer": TransformerNet}


def optimizer(name: str, model: nn.Cell, o):
    """The spec's optimiser as a MindSpore user writes it (``o``: the workload's optimiser)."""
    params = model.trainable_params()
    if name == "cnn":
        return nn.Momentum(params, learning_rate=o.lr, momentum=o.momentum)
    if name == "transformer":  # the usual split: the dense layers' matrices decay
        decay = [p for p in params if p.name.endswith("weight") and len(p.shape) == 2
                 and "embedding" not in p.name]  # fmt: skip
        rest = [p for p in params if all(p is not d for d in decay)]
        groups = [{"params": decay, "weight_decay": o.weight_decay},
                  {"params": rest, "weight_decay": 0.0}]  # fmt: skip
        return nn.AdamWeightDecay(groups, learning_rate=o.lr, beta1=o.beta1, beta2=o.beta2,
                                  eps=o.eps)  # fmt: skip
    return nn.Adam(params, learning_rate=o.lr, beta1=o.beta1, beta2=o.beta2, eps=o.eps)


def make_train_step(model: nn.Cell, opt, jit: bool = True):
    """The step of MindSpore's quick start: ``value_and_grad`` of the loss, then the
    optimiser, compiled by ``mindspore.jit`` (unless ``jit`` is False)."""

    def loss_fn(x, y):
        return ops.cross_entropy(model(x), y)

    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    return ms.jit(step) if jit else step


def make_features_step(model: nn.Cell, jit: bool = True):
    """Feature extraction as a user writes it, compiled by ``mindspore.jit`` (unless ``jit`` is
    False)."""
    return ms.jit(model) if jit else model


def _tensors(net: nn.Cell) -> list:
    """The trainable parameters and BatchNorm statistics in declaration order (a lowered
    model's other parameters are constants: dropout rates, sqrt(d), epsilons)."""
    return [p for p in net.get_parameters() if p.requires_grad or "moving_" in p.name]


def copy_weights(src: nn.Cell, dst: nn.Cell) -> None:
    """Load ``src``'s parameters and BatchNorm statistics into ``dst`` by position."""
    a, b = _tensors(src), _tensors(dst)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} tensors in the source, {len(b)} in the destination")
    for value, target in zip(a, b, strict=True):
        if value.shape != target.shape:
            raise ValueError(f"{target.name}: shape {target.shape} != {value.shape}")
        target.set_data(ms.Tensor(value.asnumpy().astype("float32")))
