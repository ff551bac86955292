"""MindSpore's side of the table: the ``nn`` cells the op modules build, and how they compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and ``weights`` side by
side). This file holds what several of them share: the build context :class:`Build` (the dtype
every cell is made in, and which cell owns the parameters of which op, for ``weights.py``), the
cells MindSpore lacks or whose CPU kernel lacks a dtype, and how cells compose: a sequence is an
``nn.SequentialCell``, a residual block a :class:`Residual`, a wired graph a :class:`Graph`.

**Float64.** MindSpore 2.10's CPU kernels have no float64 ``Conv2D``, ``BatchNorm`` or ``ReLU6``
(its errors name the dtypes each takes), and ``nn.Embedding`` makes its table float32 whatever
``dtype`` says. In float32 MindSpore's own cells run; in float64 :class:`Conv2d` and
:class:`BatchNorm` compute the same function written out in MindSpore ops (a convolution as one
matrix product per kernel offset; the inference-mode normalisation in the reference's order),
:class:`Embedding` is a table and ``ops.gather``, :class:`Clip` ``ops.clamp`` with bounds of the
input's dtype. Nothing runs in NumPy.

Nothing here converts weights: each op module's ``weights`` holds its layout and gate-order
conversions. Activations are NCHW (MindSpore's default ``data_format``), so ``Flatten`` is
channel-major (the spec's ``CHW``) and ``fc1`` needs no row permutation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, Wiring, last_readers, lower_op
from rosetta.backends.mindspore.compat import ms
from rosetta.backends.mindspore.source import OPS
from rosetta.runtime import Runtime

NAME = "mindspore"
nn, ops = ms.nn, ms.ops
DTYPES = {"float32": ms.float32, "float64": ms.float64}


@dataclass
class Build:
    """The build context: the dtype every cell is made in, and ``(op, cell holding its
    parameters)`` for every parameterised op, in graph order."""

    dtype: str = "float32"
    owners: list[tuple[object, nn.Cell]] = field(default_factory=list)

    @property
    def ms_dtype(self):
        """The build's dtype as MindSpore's."""
        return DTYPES[self.dtype]

    def own(self, op: object, cell: nn.Cell) -> None:
        """Record that ``cell``'s tensors are ``op``'s parameters."""
        self.owners.append((op, cell))


def _param(shape: tuple[int, ...], dtype, name: str, trainable: bool = True) -> ms.Parameter:
    """A zero parameter (the canonical weights are loaded into it: ``weights.load``)."""
    return ms.Parameter(ops.zeros(shape, dtype), name=name, requires_grad=trainable)


def _scalar(value: float, dtype) -> ms.Parameter:
    """A 0-d constant of ``dtype`` held as a parameter that no gradient reaches (so that under
    ``mindspore.jit`` it is an input of the graph, not a float folded in as float32)."""
    return ms.Parameter(ms.Tensor(np.asarray(value, dtype=np.dtype(str(dtype).lower()))),
                        requires_grad=False)  # fmt: skip


class Residual(nn.Cell):
    """``body(x) + shortcut(x)``; an empty shortcut is the identity."""

    def __init__(self, body: nn.Cell, shortcut: nn.Cell) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def construct(self, x):
        return self.body(x) + self.shortcut(x)


class Identity(nn.Cell):
    """The identity (an empty sequence)."""

    def construct(self, x):
        return x


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` with explicit ``[top, bottom, left, right]`` padding (``pad_mode="pad"``).
    In float64 (no CPU kernel) the same sum written out: the padded input, then for each kernel
    offset ``(i, j)`` the strided window times that offset's ``(O, C)`` weights, summed in offset
    order."""

    def __init__(self, cin: int, cout: int, kernel, stride, padding, bias: bool, groups: int,
                 dtype) -> None:  # fmt: skip
        super().__init__(cin, cout, kernel, stride=stride, pad_mode="pad", padding=padding,
                         has_bias=bias, group=groups, dtype=dtype)  # fmt: skip
        self.spec_padding = tuple(padding)
        self.groups = groups
        self.written_out = dtype == ms.float64

    def construct(self, x):
        if not self.written_out:
            return super().construct(x)
        t, b, left, right = self.spec_padding
        xp = ops.pad(x, (left, right, t, b)) if any(self.spec_padding) else x
        n, c, h, w = xp.shape
        kh, kw = self.kernel_size
        sh, sw = self.stride[2:] if len(self.stride) == 4 else self.stride
        ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
        g = self.groups
        out = None
        for i in range(kh):
            for j in range(kw):
                win = xp[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                # (N, C, Ho, Wo) -> (N, G, C/G, Ho*Wo); (O, C/G) -> (G, O/G, C/G)
                win = win.reshape(n, g, c // g, ho * wo)
                wk = self.weight[:, :, i, j].reshape(g, -1, c // g)
                term = ops.matmul(wk, win)  # (G, O/G, C/G) @ (N, G, C/G, P) -> (N, G, O/G, P)
                out = term if out is None else out + term
        out = out.reshape(n, -1, ho, wo)  # (N, G, O/G, Ho*Wo) -> (N, O, Ho, Wo)
        if self.has_bias:
            out = out + self.bias.reshape(1, -1, 1, 1)
        return out


class BatchNorm(nn.Cell):
    """Inference-mode batch normalisation (the spec's: the held statistics, never updated):
    ``nn.BatchNorm2d``/``1d`` with ``use_batch_statistics=False`` in float32; in float64 (no
    CPU kernel) ``(x - mean) / sqrt(var + eps) * gamma + beta`` in MindSpore ops, the
    reference's order."""

    def __init__(self, channels: int, eps: float, momentum: float, image: bool, dtype) -> None:
        super().__init__()
        cls = nn.BatchNorm2d if image else nn.BatchNorm1d
        # MindSpore's momentum is the weight of the old statistic (Paddle's), 1 - the spec's
        self.bn = cls(channels, eps=eps, momentum=round(1.0 - momentum, 12),
                      use_batch_statistics=False, dtype=dtype)  # fmt: skip
        self.written_out = dtype == ms.float64
        self.shape = (1, channels, 1, 1) if image else (1, channels)
        if self.written_out:
            self.eps = _scalar(eps, dtype)

    def construct(self, x):
        if not self.written_out:
            return self.bn(x)
        bn, s = self.bn, self.shape
        std = ops.sqrt(bn.moving_variance.reshape(s) + self.eps)
        return (x - bn.moving_mean.reshape(s)) / std * bn.gamma.reshape(s) + bn.beta.reshape(s)


class Embedding(nn.Cell):
    """A ``(V, E)`` table and ``ops.gather`` (``nn.Embedding`` makes its table float32 whatever
    its ``dtype``); id 0 an ordinary row."""

    def __init__(self, vocab: int, dim: int, dtype) -> None:
        super().__init__()
        self.embedding_table = _param((vocab, dim), dtype, "embedding_table")

    def construct(self, ids):
        return ops.gather(self.embedding_table, ids, 0)  # (N, T) -> (N, T, E)


class LastStepGRU(nn.Cell):
    """``nn.GRU`` over batch-major ``(N, T, E)`` from a zero state; returns the last state."""

    def __init__(self, input_size: int, hidden_size: int, dtype) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=1, batch_first=True, dtype=dtype)

    def construct(self, x):
        _, h_n = self.gru(x)  # h_n: (num_layers=1, N, H)
        return h_n[0]  # (N, H): the last step's state


class LastStepLSTM(nn.Cell):
    """``nn.LSTM`` over batch-major ``(N, T, E)`` from a zero state and cell; returns the last
    state. Its second bias ``b_hh`` is held at zero and takes no gradient: the spec's one bias.
    On the CPU ``nn.LSTM`` runs MindSpore's fused ``LSTM`` kernel, which computes in float32
    whatever the dtype (measured: 2e-8 off a float64 loop): in float64 the same cell is written
    out, a loop over time of ``x_t W_ih^T + h W_hh^T + b_ih``, gates ``i | f | g | o``."""

    def __init__(self, input_size: int, hidden_size: int, dtype) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=1, batch_first=True, dtype=dtype)
        b_hh = self.lstm.b_hh_list[0]
        b_hh.set_data(ops.zeros(b_hh.shape, b_hh.dtype))
        b_hh.requires_grad = False
        self.written_out = dtype == ms.float64
        self.hidden = hidden_size

    def construct(self, x):
        if not self.written_out:
            _, (h_n, _) = self.lstm(x)  # h_n: (num_layers=1, N, H)
            return h_n[0]
        w_ih, w_hh, b_ih = self.lstm.w_ih_list[0], self.lstm.w_hh_list[0], self.lstm.b_ih_list[0]
        n, t_steps = x.shape[0], x.shape[1]
        h = ops.zeros((n, self.hidden), x.dtype)
        c = ops.zeros((n, self.hidden), x.dtype)
        xw = ops.matmul(x, w_ih.T) + b_ih  # (N, T, E) @ (E, 4H) -> (N, T, 4H)
        for t in range(t_steps):
            gates = xw[:, t] + ops.matmul(h, w_hh.T)  # (N, 4H)
            i, f, g, o = ops.split(gates, self.hidden, axis=1)
            c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
            h = ops.sigmoid(o) * ops.tanh(c)
        return h


class GatedDropout(nn.Cell):
    """Inverted dropout (zero with probability ``rate``, scale the rest by ``1 / (1 - rate)``;
    the identity outside training) whose rate is a 0-d parameter no gradient reaches, not a
    Python float: writing 0 keeps every element bit for bit without changing the program that
    runs (under ``mindspore.jit`` it is an input of the graph). The random numbers are drawn in
    both cases, from MindSpore's global seed."""

    def __init__(self, rate: float, dtype) -> None:
        super().__init__()
        self.spec_rate = float(rate)
        self.rate = _scalar(self.spec_rate, dtype)

    def set_rate(self, rate: float) -> None:
        """Write the rate the next step reads (the same parameter, its dtype kept)."""
        ops.assign(self.rate, ms.Tensor(np.asarray(rate, dtype=self.rate.asnumpy().dtype)))

    def construct(self, x):
        if not self.training:
            return x
        keep = (ops.rand(x.shape, dtype=x.dtype) >= self.rate).astype(x.dtype)  # P = 1 - rate
        return x * keep / (1 - self.rate)


class MaskedSequential(nn.Cell):
    """Cells in order, handing the (N, T) mask of real tokens to the cells that take it."""

    takes_mask = True

    def __init__(self, *cells: nn.Cell) -> None:
        super().__init__()
        self.layers = nn.CellList(list(cells))
        self.masked = [bool(getattr(c, "takes_mask", False)) for c in cells]

    def construct(self, x, valid):
        for j in range(len(self.masked)):  # (mindspore.jit's graph mode takes no zip(strict=))
            x = self.layers[j](x, valid) if self.masked[j] else self.layers[j](x)
        return x


class TokenSequential(MaskedSequential):
    """The model's own sequence over token ids: makes the mask of real tokens (id != 0) once and
    hands it down."""

    takes_mask = False

    def construct(self, x):  # type: ignore[override]
        return super().construct(x, x != 0)


class MaskedResidual(Residual):
    """``body(x, valid) + shortcut(x, valid)`` for branches that hold masked ops."""

    takes_mask = True

    def construct(self, x, valid):  # type: ignore[override]
        body = self.body(x, valid) if getattr(self.body, "takes_mask", False) else self.body(x)
        short = (self.shortcut(x, valid) if getattr(self.shortcut, "takes_mask", False)
                 else self.shortcut(x))  # fmt: skip
        return body + short


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` over the last axis (biased variance, ``eps`` inside the root). In float64
    the same formula in MindSpore ops, ``eps`` a 0-d parameter of the model's dtype (the
    kernel takes ``epsilon`` as a float32 attribute)."""

    def __init__(self, dim: int, eps: float, dtype) -> None:
        super().__init__((dim,), epsilon=eps, dtype=dtype)
        self.written_out = dtype == ms.float64
        if self.written_out:
            self.eps = _scalar(eps, dtype)

    def construct(self, x):
        if not self.written_out:
            return super().construct(x)
        xc = x - x.mean(axis=-1, keep_dims=True)
        rstd = 1 / ops.sqrt((xc * xc).mean(axis=-1, keep_dims=True) + self.eps)
        return xc * rstd * self.gamma + self.beta


class PositionEmbedding(nn.Cell):
    """Learned positions: ``x + table[:T]`` on (N, T, E)."""

    def __init__(self, max_len: int, dim: int, dtype) -> None:
        super().__init__()
        self.table = _param((max_len, dim), dtype, "table")

    def construct(self, x):
        return x + self.table[: x.shape[1]]


class SelfAttention(nn.Cell):
    """Multi-head self-attention composed from ``ops.matmul`` and ``ops.softmax`` with the spec's
    key padding mask (a masked key: score -inf, weight exactly 0). A query whose every key is
    padding unmasks every key (a finite softmax) and its head outputs are multiplied by 0, so its
    output is ``bo``. ``sqrt(d)`` is a 0-d parameter of the model's dtype (the reference's
    division)."""

    takes_mask = True

    def __init__(self, dim: int, heads: int, dtype) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Dense(dim, dim, dtype=dtype)
        self.key = nn.Dense(dim, dim, has_bias=False, dtype=dtype)  # the softmax cancels it
        self.value = nn.Dense(dim, dim, dtype=dtype)
        self.output = nn.Dense(dim, dim, dtype=dtype)
        self.sqrt_d = _scalar(math.sqrt(dim // heads), dtype)
        self.neg_inf = _scalar(float("-inf"), dtype)

    def _split(self, a):
        """(N, T, E) -> (N, H, T, d): the heads are head-major column blocks."""
        n, t, e = a.shape
        return a.reshape(n, t, self.heads, e // self.heads).transpose(0, 2, 1, 3)

    def construct(self, x, valid):
        n, t, e = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        any_key = valid.any(axis=1, keep_dims=True)  # (N, 1): False for padding only
        keep = (valid | ~any_key).reshape(n, 1, 1, t)  # (N, 1, 1, T)
        scores = ops.matmul(q, k.transpose(0, 1, 3, 2)) / self.sqrt_d  # (N, H, T, T)
        weights = ops.softmax(ops.where(keep, scores, self.neg_inf), axis=-1)
        o = ops.matmul(weights, v) * any_key.astype(x.dtype).reshape(n, 1, 1, 1)
        return self.output(o.transpose(0, 2, 1, 3).reshape(n, t, e))  # heads concatenated


class MaskedMean(nn.Cell):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only."""

    takes_mask = True

    def construct(self, x, valid):
        w = valid.astype(x.dtype)  # (N, T)
        total = (x * w.expand_dims(-1)).sum(axis=1)  # (N, E)
        return total / ops.clamp(w.sum(axis=1, keepdims=True), min=1)


class Sum(nn.Cell):
    """The elementwise sum of its inputs."""

    def construct(self, *xs):
        out = xs[0] + xs[1]
        for x in xs[2:]:
            out = out + x
        return out


class Product(nn.Cell):
    """The elementwise product of its inputs."""

    def construct(self, *xs):
        out = xs[0] * xs[1]
        for x in xs[2:]:
            out = out * x
        return out


class Concat(nn.Cell):
    """``ops.cat`` of its inputs along ``axis``."""

    def __init__(self, axis: int) -> None:
        super().__init__()
        self.axis = axis

    def construct(self, *xs):
        return ops.cat(list(xs), axis=self.axis)


class Clip(nn.Cell):
    """``ops.clamp`` with bounds of the input's dtype (0-d parameters, so no float32 rounding)."""

    def __init__(self, lo: float, hi: float, dtype) -> None:
        super().__init__()
        self.lo, self.hi = _scalar(lo, dtype), _scalar(hi, dtype)

    def construct(self, x):
        return ops.clamp(x, self.lo, self.hi)


class MaxPool2d(nn.Cell):
    """Max pooling with ``[top, bottom, left, right]`` padding: ``nn.MaxPool2d``'s own where the
    padding is symmetric; else the input padded with -inf first (padded cells are never
    selected, as the spec)."""

    def __init__(self, kernel, stride, padding) -> None:
        super().__init__()
        t, b, left, right = padding
        self.symmetric = t == b and left == right
        self.pad = (left, right, t, b)
        self.pool = nn.MaxPool2d(kernel, stride, pad_mode="pad", padding=(t, left)) \
            if self.symmetric else nn.MaxPool2d(kernel, stride, pad_mode="valid")  # fmt: skip

    def construct(self, x):
        if not self.symmetric:
            x = ops.pad(x, self.pad, value=float("-inf"))
        return self.pool(x)


class AvgPool2d(nn.Cell):
    """Average pooling with ``[top, bottom, left, right]`` padding; ``count_include_pad`` False
    divides by the real cells. Float32: ``nn.AvgPool2d``'s own where the padding is symmetric,
    else the zero-padded input pooled and divided by the window's count of real cells (or the
    kernel's area). Float64 (MindSpore's CPU kernel computes it in float32: measured 9e-8 off):
    the window sums written out, one strided slice per kernel offset, then the same division."""

    def __init__(self, kernel, stride, padding, count_include_pad: bool, dtype) -> None:
        super().__init__()
        t, b, left, right = padding
        self.symmetric = t == b and left == right
        self.pad = (left, right, t, b)
        self.padded = any(padding)
        self.include = count_include_pad
        self.kernel, self.stride = tuple(kernel), tuple(stride)
        self.written_out = dtype == ms.float64
        if self.symmetric:
            self.pool = nn.AvgPool2d(kernel, stride, pad_mode="pad", padding=(t, left),
                                     count_include_pad=count_include_pad)  # fmt: skip
        else:
            self.pool = nn.AvgPool2d(kernel, stride, pad_mode="valid")

    def _window_sums(self, xp):
        (kh, kw), (sh, sw) = self.kernel, self.stride
        ho, wo = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
        out = None
        for i in range(kh):
            for j in range(kw):
                win = xp[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                out = win if out is None else out + win
        return out

    def construct(self, x):
        if self.written_out:
            xp = ops.pad(x, self.pad) if self.padded else x
            sums = self._window_sums(xp)
            if self.include or not self.padded:
                return sums / (self.kernel[0] * self.kernel[1])
            ones = ops.pad(ops.ones((1, 1, *x.shape[2:]), x.dtype), self.pad)
            return sums / self._window_sums(ones)
        if self.symmetric:
            return self.pool(x)
        xp = ops.pad(x, self.pad)
        if self.include:
            return self.pool(xp)
        ones = ops.pad(ops.ones((1, 1, *x.shape[2:]), x.dtype), self.pad)
        return self.pool(xp) / self.pool(ones)


class GlobalAvgPool(nn.Cell):
    """(N, C, H, W) -> (N, C): the mean over H and W."""

    def construct(self, x):
        return x.mean(axis=(2, 3))


class Graph(nn.Cell):
    """Cells wired by index (``rosetta.spec.ops.Graph``): cell ``j`` runs on the outputs of the
    cells ``inputs[j]`` (-1: the graph's input), the last one's output is the graph's; in PyNative
    each value dropped once its last reader has run (``free_values``; graph mode has no ``del``,
    and its compiler frees what is dead: a compiled model sets it False); the mask handed to the
    cells that take it."""

    def __init__(self, cells: list[nn.Cell], inputs: tuple[tuple[int, ...], ...]) -> None:
        super().__init__()
        self.layers = nn.CellList(cells)
        self.inputs = inputs
        self.frees = last_readers(inputs)
        self.masked = [bool(getattr(c, "takes_mask", False)) for c in cells]
        self.takes_mask = any(self.masked)
        self.free_values = True

    def construct(self, x, valid=None):
        values = {-1: x}
        out = x
        for j in range(len(self.inputs)):
            args = [values[k] for k in self.inputs[j]]
            if self.masked[j]:
                args.append(valid)
            out = self.layers[j](*args)
            if self.free_values:
                for k in self.frees[j]:
                    values[k] = None
            values[j] = out
        return out


def _masked(cells: list[nn.Cell]) -> bool:
    return any(getattr(m, "takes_mask", False) for m in cells)


def sequence(cells: list[nn.Cell], site: Site, ctx: Build) -> nn.Cell:
    """Cells in order: an ``nn.SequentialCell`` (empty: the identity); with masked ops, the
    model's own sequence makes the token mask and branches pass it on."""
    if not cells:
        return Identity()
    if not _masked(cells):
        return nn.SequentialCell(cells)
    if site.path == "" and len(site.in_shape) == 1:
        return TokenSequential(*cells)
    return MaskedSequential(*cells)


def residual(body: nn.Cell, shortcut: nn.Cell, site: Site, ctx: Build) -> nn.Cell:
    """``body(x) + shortcut(x)``."""
    if _masked([body, shortcut]):
        return MaskedResidual(body, shortcut)
    return Residual(body, shortcut)


def graph(cells: list[nn.Cell], wiring: Wiring, site: Site, ctx: Build) -> nn.Cell:
    """A wired graph: :class:`Graph` (its cells in an ``nn.CellList``)."""
    return Graph(cells, wiring.inputs)


TABLE: LoweringTable[nn.Cell] = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch in the runtime's dtype (dropout masks from
    ``runtime.seed``)."""
    cell = lower_op(TABLE, op, tuple(x.shape[1:]), Build(dtype=runtime.dtype))
    cell.set_train(training)
    ms.set_seed(runtime.seed)
    out = cell(ms.Tensor(np.asarray(x, dtype=runtime.dtype)))
    return out.asnumpy()
