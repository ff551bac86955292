"""The four workloads written by hand as idiomatic Chainer, the way a Chainer user writes them.

They are the yardstick of ``benchmarks/lowering_chainer.py``: the lowered model must not be
slower than these. Each is a ``chainer.Chain`` with named links and a ``forward``, Chainer's
own defaults wherever they fit the spec (``L.Linear`` flattening its 4-D input, ``L.NStepGRU``
called on a list of sequences, the stock ``chainer.optimizers.Adam`` and ``AdamW``), run with
``type_check`` off as Chainer's performance tips advise for a tuned model (:data:`TYPE_CHECK`;
the lowered model turns it off too, and the benchmark times the checks' cost apart), and
``load_canonical(params)`` to start from the same canonical weights as the lowered model (so
both compute on the same values; the benchmark checks that their outputs agree). Chainer's Adam
puts epsilon outside the bias correction, where the spec's Algorithm 1 (the lowered
``SpecAdam``) puts it inside: a user's choice the timing keeps.

Import through ``rosetta.backends.chainer.compat`` (Chainer 7 needs it on NumPy 2).
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.chainer import compat

chainer = compat.load()
F = chainer.functions
L = chainer.links
#: Chainer's per-call type checks in the timed steps: off, as its performance tips advise and as
#: the lowered model runs (on, every call checks every input's shape and dtype in Python)
TYPE_CHECK = False


class VGGCNN(chainer.Chain):
    """conv(50)-relu-conv(50)-pool-relu-drop-conv(100)-relu-conv(100)-pool-relu-drop-fc512-fc10."""

    def __init__(self) -> None:
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(3, 50, 3, pad=1)
            self.conv2 = L.Convolution2D(50, 50, 3, pad=1)
            self.conv3 = L.Convolution2D(50, 100, 3, pad=1)
            self.conv4 = L.Convolution2D(100, 100, 3, pad=1)
            self.fc1 = L.Linear(6400, 512)
            self.fc2 = L.Linear(512, 10)

    def forward(self, x):
        h = F.relu(self.conv1(x))
        h = F.max_pooling_2d(self.conv2(h), 2, 2, cover_all=False)
        h = F.dropout(F.relu(h), 0.25)
        h = F.relu(self.conv3(h))
        h = F.max_pooling_2d(self.conv4(h), 2, 2, cover_all=False)
        h = F.dropout(F.relu(h), 0.25)
        h = F.dropout(F.relu(self.fc1(h)), 0.5)  # Linear flattens (N, 100, 8, 8) itself
        return self.fc2(h)

    def load_canonical(self, p) -> None:
        for name in ("conv1", "conv2", "conv3", "conv4"):
            getattr(self, name).W.array[...] = p[f"{name}.kernel"]
            getattr(self, name).b.array[...] = p[f"{name}.bias"]
        for name in ("fc1", "fc2"):
            getattr(self, name).W.array[...] = p[f"{name}.kernel"].T
            getattr(self, name).b.array[...] = p[f"{name}.bias"]


class Bottleneck(chainer.Chain):
    """ResNet v1.5 bottleneck: 1x1, 3x3 (stride here), 1x1 x4, projection where shapes change."""

    def __init__(self, in_ch: int, width: int, stride: int, project: bool) -> None:
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(in_ch, width, 1, nobias=True)
            self.bn1 = L.BatchNormalization(width, eps=1e-5)
            self.conv2 = L.Convolution2D(width, width, 3, stride, 1, nobias=True)
            self.bn2 = L.BatchNormalization(width, eps=1e-5)
            self.conv3 = L.Convolution2D(width, width * 4, 1, nobias=True)
            self.bn3 = L.BatchNormalization(width * 4, eps=1e-5)
            if project:
                self.proj = L.Convolution2D(in_ch, width * 4, 1, stride, nobias=True)
                self.proj_bn = L.BatchNormalization(width * 4, eps=1e-5)
        self.project = project

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (self.proj_bn(self.proj(x)) if self.project else x))


class ResNet50(chainer.Chain):
    """ResNet-50 v1.5 up to global average pooling (2048-d), run in test mode."""

    STAGES = (
        ("layer1", 64, 3, 1),
        ("layer2", 128, 4, 2),
        ("layer3", 256, 6, 2),
        ("layer4", 512, 3, 2),
    )

    def __init__(self) -> None:
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(3, 64, 7, 2, 3, nobias=True)
            self.bn1 = L.BatchNormalization(64, eps=1e-5)
            in_ch = 64
            for name, width, repeat, stride in self.STAGES:
                blocks = [
                    Bottleneck(
                        in_ch if i == 0 else width * 4, width, stride if i == 0 else 1, i == 0
                    )
                    for i in range(repeat)
                ]
                setattr(self, name, chainer.ChainList(*blocks))
                in_ch = width * 4

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.max_pooling_2d(h, 3, 2, 1, cover_all=False)
        for name, *_ in self.STAGES:
            for block in getattr(self, name):
                h = block(h)
        return F.mean(h, axis=(2, 3))

    def load_canonical(self, p) -> None:
        def conv(link, key):
            link.W.array[...] = p[f"{key}.kernel"]

        def bn(link, key):
            link.gamma.array[...] = p[f"{key}.gamma"]
            link.beta.array[...] = p[f"{key}.beta"]
            link.avg_mean[...] = p[f"{key}.mean"]
            link.avg_var[...] = p[f"{key}.var"]

        conv(self.conv1, "conv1")
        bn(self.bn1, "bn1")
        for name, *_ in self.STAGES:
            for i, block in enumerate(getattr(self, name)):
                for c, b in (("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3")) + (
                    (("proj", "proj_bn"),) if block.project else ()
                ):
                    conv(getattr(block, c), f"{name}.{i}.{c}")
                    bn(getattr(block, b), f"{name}.{i}.{b}")


class GRUClassifier(chainer.Chain):
    """EmbedID(30000, 125) - NStepGRU(100), last state - Linear(2), on batch-major ids."""

    def __init__(self) -> None:
        super().__init__()
        with self.init_scope():
            self.embed = L.EmbedID(30000, 125)
            self.gru = L.NStepGRU(1, 125, 100, 0.0)
            self.fc = L.Linear(100, 2)

    def forward(self, x):
        exs = F.separate(self.embed(x), axis=0)  # N sequences (T, E)
        hy, _ = self.gru(None, list(exs))
        return self.fc(hy[0])

    def load_canonical(self, p) -> None:
        self.embed.W.array[...] = p["embedding.table"]
        self.fc.W.array[...] = p["fc.kernel"].T
        self.fc.b.array[...] = p["fc.bias"]
        h = 100
        blocks = {g: slice(j * h, (j + 1) * h) for j, g in enumerate("zrh")}  # canonical z|r|h
        for i, g in enumerate("rzh"):  # Chainer: w0/w3 reset, w1/w4 update, w2/w5 candidate
            layer = self.gru[0]
            getattr(layer, f"w{i}").array[...] = p["gru.kernel"][:, blocks[g]].T
            getattr(layer, f"w{i + 3}").array[...] = p["gru.recurrent_kernel"][:, blocks[g]].T
            getattr(layer, f"b{i}").array[...] = p["gru.bias_input"][blocks[g]]
            getattr(layer, f"b{i + 3}").array[...] = p["gru.bias_recurrent"][blocks[g]]


class EncoderBlock(chainer.Chain):
    """Pre-LN encoder block on (N*T, E) rows: ``x + drop(attn(ln1(x)))``, then
    ``x + drop(ff2(gelu(ff1(ln2(x)))))``.

    ``L.LayerNormalization`` and ``L.Linear`` take 2-D input, so the stream stays as rows and
    only attention reshapes it into heads. The key projection has no bias (the spec's: a key
    bias cancels in the softmax). Padding keys get -1e9 added to their scores: an exact 0
    weight wherever a row has a real key; a row of padding only averages its padding, which the
    masked mean drops (it pools to 0 either way). GELU is the exact erf form, written out:
    Chainer has no gelu."""

    def __init__(self, dim: int = 128, heads: int = 4, hidden: int = 512, rate: float = 0.1):
        super().__init__()
        self.heads, self.rate = heads, rate
        with self.init_scope():
            self.ln1 = L.LayerNormalization(dim, eps=1e-5)
            self.query = L.Linear(dim, dim)
            self.key = L.Linear(dim, dim, nobias=True)
            self.value = L.Linear(dim, dim)
            self.out = L.Linear(dim, dim)
            self.ln2 = L.LayerNormalization(dim, eps=1e-5)
            self.ff1 = L.Linear(dim, hidden)
            self.ff2 = L.Linear(hidden, dim)

    def attend(self, h, padding, n: int):
        """Self-attention of rows ``h`` (N*T, E); ``padding`` (N, T) is -1e9 at padding keys."""
        t, e = h.shape[0] // n, h.shape[1]
        d = e // self.heads

        def split(y):  # (N*T, E) -> (N*heads, T, d)
            y = F.transpose(F.reshape(y, (n, t, self.heads, d)), (0, 2, 1, 3))
            return F.reshape(y, (n * self.heads, t, d))

        q, k, v = split(self.query(h)), split(self.key(h)), split(self.value(h))
        scores = F.matmul(q, k, transb=True) / np.sqrt(d)  # (N*heads, T, T)
        bias = np.repeat(padding, self.heads, axis=0)[:, None, :]  # (N*heads, 1, T)
        probs = F.softmax(scores + bias, axis=2)
        o = F.reshape(F.matmul(probs, v), (n, self.heads, t, d))
        return self.out(F.reshape(F.transpose(o, (0, 2, 1, 3)), (n * t, e)))  # (N*T, E)

    def forward(self, x, padding, n: int):
        x = x + F.dropout(self.attend(self.ln1(x), padding, n), self.rate)
        h = self.ff1(self.ln2(x))
        h = 0.5 * h * (1 + F.erf(h / np.sqrt(2)))  # exact GELU
        return x + F.dropout(self.ff2(h), self.rate)


class TransformerClassifier(chainer.Chain):
    """EmbedID tokens + EmbedID positions, 2 pre-LN encoder blocks, final LayerNorm, the mean
    over real tokens (id != 0; 0 for a row of padding only), Linear(2); on batch-major ids."""

    def __init__(self, vocab: int = 30000, dim: int = 128, length: int = 150) -> None:
        super().__init__()
        with self.init_scope():
            self.embed = L.EmbedID(vocab, dim)
            self.pos = L.EmbedID(length, dim)  # learned positions, BERT's way
            self.blocks = chainer.ChainList(EncoderBlock(dim), EncoderBlock(dim))
            self.ln = L.LayerNormalization(dim, eps=1e-5)
            self.fc = L.Linear(dim, 2)

    def forward(self, ids):
        n, t = ids.shape
        valid = ids != 0  # (N, T): real tokens
        padding = np.where(valid, 0, -1e9).astype(self.fc.W.dtype)
        x = self.embed(ids) + self.pos(np.arange(t, dtype=np.int32))  # (N, T, E) + (T, E)
        x = F.reshape(x, (n * t, -1))  # (N, T, E) -> rows (N*T, E)
        for block in self.blocks:
            x = block(x, padding, n)
        x = F.reshape(self.ln(x), (n, t, -1))  # (N, T, E)
        w = valid / np.maximum(valid.sum(axis=1, keepdims=True), 1)  # (N, T)
        pooled = F.sum(x * w[:, :, None].astype(x.dtype), axis=1)  # (N, E)
        return self.fc(pooled)

    def load_canonical(self, p) -> None:
        self.embed.W.array[...] = p["embedding.table"]
        self.pos.W.array[...] = p["position.table"]
        for i, block in enumerate(self.blocks):
            b = f"block.{i}"
            for link, key in (("ln1", "ln1"), ("ln2", "ln2")):
                getattr(block, link).gamma.array[...] = p[f"{b}.{key}.gamma"]
                getattr(block, link).beta.array[...] = p[f"{b}.{key}.beta"]
            for link, role in (("query", "query"), ("key", "key"), ("value", "value"),
                               ("out", "output")):  # fmt: skip
                getattr(block, link).W.array[...] = p[f"{b}.attn.{role}_kernel"].T
                if link != "key":
                    getattr(block, link).b.array[...] = p[f"{b}.attn.{role}_bias"]
            for link in ("ff1", "ff2"):
                getattr(block, link).W.array[...] = p[f"{b}.{link}.kernel"].T
                getattr(block, link).b.array[...] = p[f"{b}.{link}.bias"]
        self.ln.gamma.array[...] = p["ln_final.gamma"]
        self.ln.beta.array[...] = p["ln_final.beta"]
        self.fc.W.array[...] = p["fc.kernel"].T
        self.fc.b.array[...] = p["fc.bias"]


def adamw(model: TransformerClassifier, lr: float, weight_decay: float, **adam):
    """``chainer.optimizers.AdamW`` set up on ``model``, decaying the linear layers' matrices
    only (biases, LayerNorm, both tables take Adam's plain step: each parameter's own update
    rule, as Chainer's documentation sets per-parameter hyper-parameters). Chainer's
    ``weight_decay_rate`` is not scaled by ``alpha`` (``w -= eta * (step + rate * w)``), where
    PyTorch's and the spec's decay is ``lr * weight_decay`` per step: the rate is their product."""
    opt = chainer.optimizers.AdamW(alpha=lr, weight_decay_rate=lr * weight_decay, **adam)
    opt.setup(model)
    for name, param in model.namedparams():
        matrix = name.endswith("/W") and not name.startswith(("/embed", "/pos"))
        if not matrix:
            param.update_rule.hyperparam.weight_decay_rate = 0.0
    return opt


def make(workload: str):
    """The hand-written model and its idiomatic optimiser set up on it (None for feature
    extraction); load weights with ``model.load_canonical`` (the optimiser's state starts at
    the first update)."""
    if workload == "cnn":
        model, opt = VGGCNN(), chainer.optimizers.MomentumSGD(lr=0.01, momentum=0.9)
    elif workload == "gru":
        model = GRUClassifier()
        opt = chainer.optimizers.Adam(alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    elif workload == "resnet50":
        return ResNet50(), None
    elif workload == "transformer":
        model = TransformerClassifier()
        return model, adamw(model, 1e-3, 0.01, beta1=0.9, beta2=0.999, eps=1e-8)
    else:
        raise ValueError(f"no hand-written Chainer model for {workload!r}")
    opt.setup(model)
    return model, opt


def train_step(model, optimizer, x: np.ndarray, t: np.ndarray):
    """One idiomatic training step: ``optimizer.update(lossfun, x, t)``; returns the loss."""
    out = {}

    def lossfun(x, t):
        out["loss"] = F.softmax_cross_entropy(model(x), t)
        return out["loss"]

    with chainer.using_config("train", True), chainer.using_config("type_check", TYPE_CHECK):
        optimizer.update(lossfun, x, t)
    return out["loss"].array


def predict(model, x: np.ndarray):
    """Inference: test mode, no graph."""
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        with chainer.using_config("type_check", TYPE_CHECK):
            return model(x).array
