"""The four workloads written by hand, the way a PyTensor user writes them from PyTensor's docs.

A plain symbolic graph over ``pytensor.shared`` parameters (``pytensor.tensor`` ops, ``scan`` for
the GRU, ``pytensor.grad``), the optimiser written as the ``updates`` of one
``pytensor.function`` (Theano's idiom: PyTensor has no optimiser library), dropout drawn from
``pt.random.shared_rng`` with its next state in the same updates. The yardstick the lowered
models are timed against (``benchmarks/lowering_pytensor.py``).

PyTensor 3 has no CNN convolution or pooling op: Theano's ``nnet.conv2d`` / ``CorrMM`` and
``signal.pool.pool_2d`` were removed (pymc-devs/pytensor#305, #1196, #1817), and what is left,
``tensor.signal.convolve2d``, is SciPy's single-channel convolution run in Python per image and
channel pair. So the convolution is written as Theano's CorrMM computed it (Caffe's im2col):
the kernel taps as strided views of the zero-padded input, stacked, and *one* GEMM with the
kernel as an (O, C*KH*KW) matrix, batched over the images; images stay in Theano's layout,
NCHW with OIHW kernels. Padding is ``set_subtensor`` into zeros (``pt.pad`` compiles to an
``OpFromGraph`` that the C linker runs as a separate function with nine ``SetSubtensor``s).
Max-pooling 2x2 is a reshape and ``max``, NumPy's idiom; the padded 3x3 stem pooling the
``maximum`` of its nine shifted views.

Images are NCHW, so a model's parameters are in the spec's canonical layout (OIHW kernels, the
channel-major flatten before the first dense layer, IO dense kernels, GRU gate blocks z | r | h
with the reset gate after the recurrent product): :func:`copy_weights` loads a lowered model's
``get_params()`` by position, shape-checked. The parameters are declared in the spec's order.
Graphs are built under ``config.change_flags(floatX=dtype)`` so that Python constants take the
model's dtype (a float32 model computes in float32 throughout).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import reduce
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt

# -- building blocks ----------------------------------------------------------------------------


class Net:
    """A model's ``shared`` parameters in declaration order, its input and its dropout generator.

    Subclasses declare their parameters in ``__init__`` in the spec's layer order and write
    ``forward(x, drop)``; ``self.trainable`` lists what the optimiser updates, ``self.decay`` the
    linear layers' matrices (AdamW's decoupled decay)."""

    input_dtype = "floatX"  # images; token models: "int32"

    def __init__(self, input_shape: tuple[int, ...], dtype: str = "float32", seed: int = 0):
        self.input_shape = tuple(input_shape)  # per sample: (C, H, W) or (T,)
        self.dtype = dtype
        self.params: list = []  # every shared variable, the spec's order (BatchNorm stats too)
        self.trainable: list = []
        self.decay: list = []
        self.rng = pt.random.shared_rng(seed=seed, name="dropout_rng")

    def shared(self, name: str, shape: tuple[int, ...], trainable: bool = True) -> Any:
        """A parameter (zeros until :func:`copy_weights` loads the lowered model's)."""
        var = pytensor.shared(np.zeros(shape, dtype=self.dtype), name=name)
        self.params.append(var)
        if trainable:
            self.trainable.append(var)
        return var

    def dense(self, name: str, n_in: int, n_out: int, bias: bool = True) -> tuple[Any, Any]:
        """A linear layer's (in, out) matrix (it decays under AdamW) and its bias (or None)."""
        w = self.shared(f"{name}.kernel", (n_in, n_out))
        self.decay.append(w)
        return w, self.shared(f"{name}.bias", (n_out,)) if bias else None

    def input(self) -> Any:
        """The symbolic batch: (N, C, H, W) images in the model's dtype, or (N, T) int32 ids."""
        dtype = self.dtype if self.input_dtype == "floatX" else self.input_dtype
        return pt.tensor("x", dtype=dtype, shape=(None, *self.input_shape))

    def forward(self, x: Any, drop: Dropout) -> Any:
        raise NotImplementedError


class Dropout:
    """Inverted dropout drawing from the model's shared generator (``pt.random``'s functional
    API): each draw returns the generator's next state, threaded to the next draw; ``updates``
    writes the last one back. ``train=False``: the identity (evaluation)."""

    def __init__(self, rng: Any, train: bool) -> None:
        self.rng, self.state, self.train = rng, rng, train

    def __call__(self, x: Any, rate: float) -> Any:
        if not self.train or rate == 0:
            return x
        self.state, u = self.state.uniform(0.0, 1.0, size=x.shape, dtype=x.dtype)
        keep = 1.0 - rate
        return pt.switch(u < keep, x / keep, 0.0)

    def updates(self) -> dict:
        return {} if self.state is self.rng else {self.rng: self.state}


def relu(x: Any) -> Any:
    return pt.maximum(x, 0.0)


def linear(x: Any, layer: tuple[Any, Any]) -> Any:
    w, b = layer
    return pt.dot(x, w) if b is None else pt.dot(x, w) + b


def zero_pad(x: Any, n: Any, pad: int, value: float = 0.0) -> Any:
    """(A, B, H, W) ``x`` (leading size ``n`` when symbolic) padded by ``pad`` on H and W."""
    if not pad:
        return x
    a, b, h, w = x.type.shape
    full = pt.alloc(np.asarray(value, dtype=x.dtype), n if a is None else a,
                    n if b is None else b, h + 2 * pad, w + 2 * pad)  # fmt: skip
    return pt.set_subtensor(full[:, :, pad : pad + h, pad : pad + w], x)


def taps(xp: Any, k: int, stride: int, out: tuple[int, int]) -> list[Any]:
    """The K*K strided views of (A, B, Hp, Wp) ``xp`` under each kernel tap, row-major."""
    ho, wo = out
    return [
        xp[:, :, i : i + stride * (ho - 1) + 1 : stride, j : j + stride * (wo - 1) + 1 : stride]
        for i in range(k)
        for j in range(k)
    ]


def conv2d(x: Any, kernel: Any, n: Any, stride: int = 1, pad: int = 0) -> Any:
    """Cross-correlation of NCHW ``x`` (batch ``n``) with an OIHW ``kernel``, as Theano's CorrMM
    computed it: im2col, then (O, C*K*K) @ (C*K*K, N*Ho*Wo), one GEMM for the whole batch."""
    o, c, k, _ = kernel.get_value(borrow=True).shape
    _, _, h, w = x.type.shape
    ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xc = zero_pad(x.dimshuffle(1, 0, 2, 3), n, pad)  # (C, N, Hp, Wp): columns are image pixels
    cols = taps(xc, k, stride, (ho, wo))
    cols = cols[0] if len(cols) == 1 else pt.stack(cols, axis=1)  # (C, K*K, N, Ho, Wo)
    # (O, C*K*K) @ (C*K*K, N*Ho*Wo) -> (O, N*Ho*Wo) -> (O, N, Ho, Wo) -> (N, O, Ho, Wo)
    y = pt.dot(kernel.reshape((o, c * k * k)), cols.reshape((c * k * k, n * ho * wo)))
    return y.reshape((o, n, ho, wo)).dimshuffle(1, 0, 2, 3)


def channels(v: Any) -> Any:
    """A per-channel vector (C,) broadcast over NCHW: (1, C, 1, 1)."""
    return v.dimshuffle("x", 0, "x", "x")


def max_pool_2x2(x: Any, n: Any) -> Any:
    """2x2 max-pooling, stride 2: (N, C, H, W) -> (N, C, H/2, 2, W/2, 2) -> max over the 2s."""
    _, c, h, w = x.type.shape
    return x.reshape((n, c, h // 2, 2, w // 2, 2)).max(axis=(3, 5))


def max_pool(x: Any, n: Any, k: int, stride: int, pad: int) -> Any:
    """k x k max-pooling (padding -inf): the maximum of the k*k shifted views."""
    _, _, h, w = x.type.shape
    out = ((h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1)
    return reduce(pt.maximum, taps(zero_pad(x, n, pad, -np.inf), k, stride, out))


# -- the four workloads --------------------------------------------------------------------------


class VGGNet(Net):
    """The Rosetta Stone CIFAR-10 CNN (ReLU after max-pool, as the original)."""

    def __init__(self, input_shape=(3, 32, 32), dtype="float32", seed=0, classes: int = 10):
        super().__init__(input_shape, dtype, seed)
        self.convs = [
            (self.shared(f"conv{i}.kernel", (o, c, 3, 3)), self.shared(f"conv{i}.bias", (o,)))
            for i, (c, o) in enumerate(((3, 50), (50, 50), (50, 100), (100, 100)), start=1)
        ]
        _, h, w = input_shape
        self.fc1 = self.dense("fc1", 100 * (h // 4) * (w // 4), 512)
        self.fc2 = self.dense("fc2", 512, classes)

    def forward(self, x: Any, drop: Dropout) -> Any:
        n = x.shape[0]
        (k1, b1), (k2, b2), (k3, b3), (k4, b4) = self.convs
        x = relu(conv2d(x, k1, n, pad=1) + channels(b1))
        x = drop(relu(max_pool_2x2(conv2d(x, k2, n, pad=1) + channels(b2), n)), 0.25)
        x = relu(conv2d(x, k3, n, pad=1) + channels(b3))
        x = drop(relu(max_pool_2x2(conv2d(x, k4, n, pad=1) + channels(b4), n)), 0.25)
        x = x.flatten(2)  # (N, 100, 8, 8) -> (N, 6400), channel-major as the spec
        x = drop(relu(linear(x, self.fc1)), 0.5)
        return linear(x, self.fc2)


class GRUNet(Net):
    """Embedding(30000, 125) - GRU(100) - last state - Linear(2), the GRU as ``scan`` over time."""

    input_dtype = "int32"

    def __init__(self, input_shape=(150,), dtype="float32", seed=0, vocab: int = 30000,
                 dim: int = 125, hidden: int = 100):  # fmt: skip
        super().__init__(input_shape, dtype, seed)
        self.hidden = hidden
        self.table = self.shared("embedding.table", (vocab, dim))
        self.w = self.shared("gru.kernel", (dim, 3 * hidden))  # gate blocks z | r | h
        self.u = self.shared("gru.recurrent_kernel", (hidden, 3 * hidden))
        self.b = self.shared("gru.bias_input", (3 * hidden,))
        self.c = self.shared("gru.bias_recurrent", (3 * hidden,))
        self.fc = self.dense("fc", hidden, 2)

    def forward(self, ids: Any, drop: Dropout) -> Any:
        hid = self.hidden
        x = self.table[ids.T]  # (N, T) ids -> (T, N, E): scan runs over the first axis
        xw = pt.dot(x, self.w) + self.b  # (T, N, 3H): every step's input projection at once

        def step(xw_t, h, u, c):
            hu = pt.dot(h, u) + c  # (N, 3H): the reset gate applies after this product
            z = pt.sigmoid(xw_t[:, :hid] + hu[:, :hid])
            r = pt.sigmoid(xw_t[:, hid : 2 * hid] + hu[:, hid : 2 * hid])
            cand = pt.tanh(xw_t[:, 2 * hid :] + r * hu[:, 2 * hid :])
            return z * h + (1.0 - z) * cand

        h0 = pt.zeros((ids.shape[0], hid), dtype=self.dtype)
        states = pytensor.scan(step, sequences=[xw], outputs_info=[h0],
                               non_sequences=[self.u, self.c], strict=True,
                               return_updates=False)  # fmt: skip
        return linear(states[-1], self.fc)  # the last step's state (N, H)


class ResNet50Features(Net):
    """ResNet-50 v1.5 (stride on the 3x3 conv) up to the global average pool, BatchNorm in
    inference form: (N, 3, H, W) -> (N, 2048)."""

    STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # width, blocks, stride

    def __init__(self, input_shape=(3, 224, 224), dtype="float32", seed=0):
        super().__init__(input_shape, dtype, seed)
        self.stem = (self.shared("conv1.kernel", (64, 3, 7, 7)), self.batchnorm("bn1", 64))
        self.blocks = []
        in_ch = 64
        for s, (width, count, stride) in enumerate(self.STAGES, start=1):
            for i in range(count):
                self.blocks.append(self.bottleneck(f"layer{s}.{i}", in_ch, width,
                                                   stride if i == 0 else 1, i == 0))  # fmt: skip
                in_ch = width * 4

    def batchnorm(self, name: str, c: int) -> tuple[Any, ...]:
        """gamma, beta (trainable) and the running mean and variance (statistics)."""
        return tuple(self.shared(f"{name}.{r}", (c,), trainable=r in ("gamma", "beta"))
                     for r in ("gamma", "beta", "mean", "var"))  # fmt: skip

    def bottleneck(self, name: str, in_ch: int, width: int, stride: int, project: bool) -> dict:
        convs = (("conv1", in_ch, width, 1), ("conv2", width, width, 3),
                 ("conv3", width, width * 4, 1))  # fmt: skip
        block: dict = {"stride": stride}
        for conv, c, o, k in convs:
            block[conv] = self.shared(f"{name}.{conv}.kernel", (o, c, k, k))
            block[conv.replace("conv", "bn")] = self.batchnorm(f"{name}.bn{conv[-1]}", o)
        if project:
            block["proj"] = self.shared(f"{name}.proj.kernel", (width * 4, in_ch, 1, 1))
            block["proj_bn"] = self.batchnorm(f"{name}.proj_bn", width * 4)
        return block

    @staticmethod
    def bn(x: Any, stats: tuple[Any, ...]) -> Any:
        gamma, beta, mean, var = (channels(v) for v in stats)
        return (x - mean) / pt.sqrt(var + 1e-5) * gamma + beta

    def forward(self, x: Any, drop: Dropout) -> Any:
        n = x.shape[0]
        kernel, bn1 = self.stem
        x = relu(self.bn(conv2d(x, kernel, n, stride=2, pad=3), bn1))
        x = max_pool(x, n, 3, 2, 1)
        for b in self.blocks:
            out = relu(self.bn(conv2d(x, b["conv1"], n), b["bn1"]))
            out = relu(self.bn(conv2d(out, b["conv2"], n, stride=b["stride"], pad=1), b["bn2"]))
            out = self.bn(conv2d(out, b["conv3"], n), b["bn3"])
            short = self.bn(conv2d(x, b["proj"], n, stride=b["stride"]), b["proj_bn"]) \
                if "proj" in b else x  # fmt: skip
            x = relu(out + short)
        return x.mean(axis=(2, 3))  # (N, 2048, h, w) -> (N, 2048)


def layer_norm(x: Any, ln: tuple[Any, Any], eps: float = 1e-5) -> Any:
    """Over the last axis, biased variance, eps inside the root."""
    gamma, beta = ln
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / pt.sqrt(pt.var(x, axis=-1, keepdims=True) + eps) * gamma + beta


class TransformerNet(Net):
    """Token + position embedding, 2 pre-LN encoder blocks (4 heads, GELU MLP 512), final
    LayerNorm, masked mean over the real tokens, dense 2; batch-major (N, T, E)."""

    input_dtype = "int32"

    def __init__(self, input_shape=(150,), dtype="float32", seed=0, vocab: int = 30000,
                 dim: int = 128, heads: int = 4, hidden: int = 512, blocks: int = 2):  # fmt: skip
        super().__init__(input_shape, dtype, seed)
        self.dim, self.heads = dim, heads
        self.table = self.shared("embedding.table", (vocab, dim))
        self.pos = self.shared("position.table", (input_shape[0], dim))  # learned positions
        self.blocks = [self.encoder(f"block.{i}", dim, hidden) for i in range(blocks)]
        self.ln = self.layer_norm("ln_final", dim)
        self.fc = self.dense("fc", dim, 2)

    def layer_norm(self, name: str, dim: int) -> tuple[Any, Any]:
        return self.shared(f"{name}.gamma", (dim,)), self.shared(f"{name}.beta", (dim,))

    def encoder(self, name: str, dim: int, hidden: int) -> dict:
        ln1 = self.layer_norm(f"{name}.ln1", dim)
        attn = {
            "q": self.dense(f"{name}.attn.query", dim, dim),
            "k": self.dense(f"{name}.attn.key", dim, dim, bias=False),  # a key bias cancels
            "v": self.dense(f"{name}.attn.value", dim, dim),
            "o": self.dense(f"{name}.attn.output", dim, dim),
        }
        ln2 = self.layer_norm(f"{name}.ln2", dim)
        ff1, ff2 = self.dense(f"{name}.ff1", dim, hidden), self.dense(f"{name}.ff2", hidden, dim)
        return {"ln1": ln1, "attn": attn, "ln2": ln2, "ff1": ff1, "ff2": ff2}

    def attention(self, h: Any, p: dict, mask: Any) -> Any:
        """Multi-head self-attention of (N, T, E) ``h``; ``mask`` (N, 1, 1, T) is added to the
        scores (-1e9 at padding keys)."""
        n, t = h.shape[0], self.input_shape[0]
        e, heads = self.dim, self.heads
        d = e // heads

        def split(y):  # (N, T, E) -> (N, T, heads, d) -> (N, heads, T, d)
            return y.reshape((n, t, heads, d)).dimshuffle(0, 2, 1, 3)

        q, k, v = (split(linear(h, p[r])) for r in "qkv")
        scores = pt.matmul(q, k.dimshuffle(0, 1, 3, 2)) / math.sqrt(d) + mask  # (N, h, T, T)
        a = pt.matmul(pt.special.softmax(scores, axis=-1), v)  # (N, heads, T, d)
        return linear(a.dimshuffle(0, 2, 1, 3).reshape((n, t, e)), p["o"])  # heads concatenated

    def forward(self, ids: Any, drop: Dropout) -> Any:
        t = self.input_shape[0]
        real = pt.neq(ids, 0).astype(self.dtype)  # (N, T): 1 at a real token
        mask = ((1.0 - real) * -1e9).dimshuffle(0, "x", "x", 1)  # (N, 1, 1, T): additive
        x = self.table[ids] + self.pos[:t]  # (N, T, E)
        for b in self.blocks:
            x = x + drop(self.attention(layer_norm(x, b["ln1"]), b["attn"], mask), 0.1)
            hidden = linear(layer_norm(x, b["ln2"]), b["ff1"])
            gelu = 0.5 * hidden * (1.0 + pt.erf(hidden / math.sqrt(2.0)))  # exact GELU
            x = x + drop(linear(gelu, b["ff2"]), 0.1)
        weights = real / pt.maximum(real.sum(axis=1, keepdims=True), 1.0)  # (N, T)
        pooled = (layer_norm(x, self.ln) * weights.dimshuffle(0, 1, "x")).sum(axis=1)  # (N, E)
        return linear(pooled, self.fc)


MODELS: dict[str, Callable[..., Net]] = {
    "cnn": VGGNet, "gru": GRUNet, "resnet50": ResNet50Features, "transformer": TransformerNet,
}  # fmt: skip


# -- the optimisers, as the compiled step's updates ----------------------------------------------


def _state(p: Any, tag: str) -> Any:
    return pytensor.shared(np.zeros_like(p.get_value(borrow=True)), name=f"{p.name}.{tag}")


def sgd_momentum(params: list, grads: list, lr: float, momentum: float) -> list:
    """PyTorch's form (the spec's): ``buf = momentum * buf + g; w -= lr * buf``."""
    updates = []
    for p, g in zip(params, grads, strict=True):
        buf = _state(p, "momentum")
        new = momentum * buf + g
        updates += [(buf, new), (p, p - lr * new)]
    return updates


def adam(params: list, grads: list, o: Any, decay: Iterable = ()) -> list:
    """Kingma & Ba's Algorithm 1 (the spec's): bias-corrected moments, ``eps`` outside the root
    of ``v_hat``; with ``o.weight_decay``, AdamW's decoupled decay ``w - lr * wd * w`` first, on
    the parameters in ``decay`` only."""
    decayed = {id(p) for p in decay}
    wd = getattr(o, "weight_decay", 0.0)
    t = pytensor.shared(np.asarray(0.0, dtype=params[0].dtype), name="adam.t")
    t1 = t + 1.0
    updates = [(t, t1)]
    for p, g in zip(params, grads, strict=True):
        m, v = _state(p, "m"), _state(p, "v")
        m1 = o.beta1 * m + (1.0 - o.beta1) * g
        v1 = o.beta2 * v + (1.0 - o.beta2) * g * g
        m_hat, v_hat = m1 / (1.0 - o.beta1**t1), v1 / (1.0 - o.beta2**t1)
        w = p - o.lr * wd * p if id(p) in decayed else p
        updates += [(m, m1), (v, v1), (p, w - o.lr * m_hat / (pt.sqrt(v_hat) + o.eps))]
    return updates


def optimizer(name: str, net: Net, o: Any, grads: list) -> list:
    """The spec's optimiser ``o`` for ``name`` as the updates of ``net.trainable``: momentum SGD
    (cnn), Adam (gru), AdamW decaying the linear layers' matrices (transformer)."""
    if name == "cnn":
        if o.nesterov:
            raise ValueError("cnn: the spec's SGD is not Nesterov's")
        return sgd_momentum(net.trainable, grads, o.lr, o.momentum)
    return adam(net.trainable, grads, o, net.decay if name == "transformer" else ())


# -- compiled steps -------------------------------------------------------------------------------


def cross_entropy(logits: Any, y: Any) -> Any:
    """The mean negative log-likelihood of the labels, as Theano's tutorial writes it."""
    p = pt.special.softmax(logits, axis=-1)
    return -pt.mean(pt.log(p)[pt.arange(y.shape[0]), y])


def compile_train(name: str, net: Net, o: Any, mode: Any = None, dropout: bool = True) -> Any:
    """One ``pytensor.function(x, y) -> loss`` whose updates are the optimiser's step and the
    dropout generator's next state (``dropout=False``: the same step without dropout)."""
    with pytensor.config.change_flags(floatX=net.dtype):
        x, y = net.input(), pt.vector("y", dtype="int64")
        drop = Dropout(net.rng, dropout)
        loss = cross_entropy(net.forward(x, drop), y)
        grads = pytensor.grad(loss, net.trainable)
        updates = [*optimizer(name, net, o, grads), *drop.updates().items()]
        return pytensor.function([x, y], loss, updates=updates, mode=mode, name=f"{name}_train")


def compile_features(net: Net, mode: Any = None) -> Any:
    """The evaluation forward (no dropout): ``pytensor.function(x) -> outputs``."""
    with pytensor.config.change_flags(floatX=net.dtype):
        x = net.input()
        return pytensor.function([x], net.forward(x, Dropout(net.rng, False)), mode=mode,
                                 name="features")  # fmt: skip


def train_step(step: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One training step: the parameters updated in place, the loss before it returned."""
    return step(x, y)


def features_step(forward: Any, x: np.ndarray) -> np.ndarray:
    """The evaluation forward of one batch."""
    return forward(x)


def copy_weights(src: Any, dst: Net) -> None:
    """Load ``src``'s parameters into ``dst`` by position: ``src`` a lowered Rosetta model (its
    ``get_params()``, the spec's order in the canonical layout, this file's) or a sequence of
    arrays. A count or shape that differs is one error naming the parameter."""
    values = list(src.get_params().values()) if hasattr(src, "get_params") else list(src)
    if len(values) != len(dst.params):
        raise ValueError(f"{len(values)} tensors in the source, {len(dst.params)} in the model")
    for value, var in zip(values, dst.params, strict=True):
        have = var.get_value(borrow=True).shape
        if np.shape(value) != have:
            raise ValueError(f"{var.name}: shape {have} != the source's {np.shape(value)}")
        var.set_value(np.asarray(value, dtype=dst.dtype))
