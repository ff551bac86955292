"""Chainer's side of the table: the links the op modules build, and how they compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and weight conversion
side by side); its ``build(op, site, ctx)`` returns a ``chainer.Link`` (ops with parameters) or a
plain callable over ``chainer.Variable``s (parameter-free ops). This file holds what they share:
the build context :class:`Ctx` (every parameter-owning op is recorded in ``ctx.owners`` as
``(op, link)``, which is how ``weights.py`` finds the arrays of a canonical name), the links and
functions Chainer lacks (:class:`Padded`, :class:`Dropout`, :class:`InferenceBatchNorm`,
:class:`GRULast`, :class:`LayerNorm`, :class:`SelfAttention` (masked or causal),
:class:`TiedLinear`, the masked sequences...), and how layers compose: a sequence is a
``chainer.Sequential``, a residual block a small ``Chain`` adding its two branches, and a wired
graph (layers naming their inputs) a :class:`Graph`, a ``chainer.Sequential`` whose ``forward``
hands each layer the outputs it names (a variadic layer, ``add`` or ``concat``, takes them as
arguments: :func:`add`, :class:`Concat`). Every container registers its links as children, so
a parameter anywhere in a graph is the model's (``namedparams``, the optimiser, ``to_device``); a
container holding a layer that takes the token mask takes it too and hands it on, a residual's
and a graph's as a sequence's.
``TABLE`` is the native face of ``source.OPS``.

Layout is NCHW throughout (Chainer's only layout, and cuDNN's native one), so the canonical
``(C, H, W)`` shapes and OIHW kernels pass through unchanged; the one layout change, dense
kernels IO -> Chainer's OI, and the GRU's gate order are the op modules' weight conversions
(``ops/dense.py``, ``ops/gru.py``). Token sequences are time-major ``(T, N)`` (the loader
transposes them), what ``F.n_step_gru`` consumes; a model holding a masked op or an attention
turns them batch-major ``(N, T)`` again (:class:`TokenSequential`), what attention reads.

Padding: Chainer pads symmetrically (``pad=(ph, pw)``); an asymmetric ``(top, bottom, left,
right)`` is first padded explicitly with ``F.pad`` (zeros for a convolution, ``-inf`` for max
pooling, so a padded cell never wins) and the op then runs unpadded.

Dropout is ``F.dropout`` given its ``mask``, drawn from the model's own seeded generator
(``runtime.uniform_source``): Chainer's own draw reads the unseeded global ``numpy.random``
(``cupy.random`` on a GPU). ``set_dropout(False)`` sets the rate of that same call to 0 (a mask
of ones), so the gate runs the very step that is timed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rosetta.backends.chainer import compat
from rosetta.backends.chainer import runtime as rt
from rosetta.backends.chainer.source import OPS
from rosetta.backends.driver import LoweringTable, Site, Wiring, last_readers, lower_op
from rosetta.runtime import Runtime

chainer = compat.load()
F = chainer.functions
L = chainer.links


@dataclass
class DropoutSwitch:
    """The dropout state every dropout layer of one model reads at call time: the seeded
    uniform source and whether dropout is on (``Model.set_dropout``)."""

    uniform: Callable[[tuple[int, ...]], object]  # shape -> float32 uniforms on the device
    enabled: bool = True


@dataclass
class SequenceLayout:
    """How the model's sequences run, read at call time by a concat along time: time-major
    ``(T, N, E)`` as the loader hands them (an unmasked token model, the GRU's), unless the
    model's own sequence turns its ids batch-major (:class:`TokenSequential`: a masked model, or
    one holding an attention), which ``sequence`` decides once every layer is built."""

    time_major: bool = True


@dataclass
class Decoding:
    """A decoder generating, shared by its position embedding and causal attentions (read at
    call time): while ``active``, the input holds the positions from ``offset`` on, and each
    causal attention keeps its keys and values in a static cache of ``capacity`` positions,
    allocated at the prefill and written at the offset (``SelfAttention``): the eager idiom,
    as torch's ``Decoding``."""

    active: bool = False
    offset: int = 0
    capacity: int = 0
    cache: dict[int, tuple[object, object]] = field(default_factory=dict)  # id(link) -> (K, V)

    def start(self, capacity: int) -> None:
        """A new generation: no position seen, the caches dropped."""
        self.offset, self.capacity, self.cache = 0, capacity, {}


@dataclass
class Ctx:
    """The build context: dtype, the dropout switch, the parameter owners found so far, the
    sequences' layout and the generation state (``decoding``)."""

    dtype: str
    dropout: DropoutSwitch
    owners: list[tuple[object, object]] = field(default_factory=list)  # (op, link), graph order
    layout: SequenceLayout = field(default_factory=SequenceLayout)
    decoding: Decoding = field(default_factory=Decoding)

    def own(self, op: object, link):
        """Record ``link`` as the holder of ``op``'s parameters; returns it."""
        self.owners.append((op, link))
        return link


# ----------------------------------------------------------- the layers and functions ops build


class Padded(chainer.Chain):
    """An asymmetrically padded op: ``F.pad`` with ``value``, then ``op`` without padding."""

    def __init__(self, padding: tuple[int, int, int, int], value: float, op: Callable) -> None:
        super().__init__()
        top, bottom, left, right = padding
        self.width = ((0, 0), (0, 0), (top, bottom), (left, right))
        self.value = value
        with self.init_scope():
            if isinstance(op, chainer.Link):
                self.op = op
        self._op = op

    def forward(self, x):
        return self._op(F.pad(x, self.width, mode="constant", constant_values=self.value))


class RealCellAverage(chainer.Chain):
    """Average pooling over asymmetric zero padding whose divisor counts each window's real
    cells only (``count_include_pad=False``; Chainer's ``pad_value=None`` takes symmetric
    padding alone): ``pool`` of the zero-padded input over ``pool`` of zero-padded ones (the
    windows' real-cell fractions; ``kh * kw`` cancels)."""

    def __init__(self, padding: tuple[int, int, int, int], pool: Callable) -> None:
        super().__init__()
        top, bottom, left, right = padding
        self.width = ((0, 0), (0, 0), (top, bottom), (left, right))
        self.pool = pool

    def forward(self, x):
        ones = self.xp.ones((1, 1, *x.shape[2:]), dtype=x.dtype)  # (1, 1, H, W)
        total = self.pool(F.pad(x, self.width, mode="constant", constant_values=0.0))
        real = self.pool(F.pad(ones, self.width, mode="constant", constant_values=0.0))
        return total / F.broadcast_to(real, total.shape)  # (N, C, Ho, Wo)


class Dropout:
    """``F.dropout`` with a mask from the model's seeded generator; rate 0 while switched off.

    Inverted dropout: survivors are scaled by ``1 / (1 - rate)``; identity (and no draw) when
    ``chainer.config.train`` is False."""

    def __init__(self, rate: float, switch: DropoutSwitch) -> None:
        self.rate = rate
        self.switch = switch

    def __repr__(self) -> str:
        return f"Dropout(rate={self.rate})"

    def __call__(self, x):
        if not chainer.config.train:
            return F.dropout(x, self.rate)  # evaluation: the identity
        rate = self.rate if self.switch.enabled else 0.0
        keep = self.switch.uniform(x.shape) >= rate  # (same shape as x) bool
        mask = keep * x.dtype.type(1.0 / (1.0 - rate))  # 0 or 1/(1-rate), in x's dtype
        return F.dropout(x, rate, mask=mask)


class InferenceBatchNorm(L.BatchNormalization):
    """``L.BatchNormalization`` always in test mode (the spec's BatchNorm is inference-mode:
    running statistics, never batch statistics, even inside a training step)."""

    def forward(self, x, **kwargs):
        with chainer.using_config("train", False):
            return super().forward(x, **kwargs)


class GRULast(chainer.Chain):
    """``L.NStepGRU``'s weights run by ``F.n_step_gru`` (one layer, no dropout) over time-major
    ``(T, N, E)``, zero initial state, returning the last step's state ``(N, H)``.

    Chainer's gates (``chainer.functions.n_step_gru``), weights ``w0..w5`` (out, in), biases
    ``b0..b5``::

        r = sigmoid(w0 x + b0 + w3 h + b3)
        z = sigmoid(w1 x + b1 + w4 h + b4)
        n = tanh(w2 x + b2 + r * (w5 h + b5))      # reset AFTER the recurrent matmul, b5 inside
        h' = (1 - z) * n + z * h

    which is the spec's z, r, h ``reset_after`` GRU with indices r=0, z=1, h=2 (input) and
    r=3, z=4, h=5 (recurrent): the cuDNN convention, so on a GPU ``F.n_step_gru`` runs cuDNN's
    fused GRU. Calling the link itself (``self.rnn(None, xs)``) would take a list of N
    batch-major sequences and sort, permute and transpose them to time-major on every call;
    every sequence here has the same length, so the input arrives time-major from the loader
    and goes to ``F.n_step_gru`` directly (15% faster per CPU training step, measured).
    """

    def __init__(self, in_size: int, units: int) -> None:
        super().__init__()
        self.units = units
        with self.init_scope():
            self.rnn = L.NStepGRU(1, in_size, units, 0.0)

    @property
    def printable_specs(self):
        yield "in_size", self.rnn.in_size
        yield "out_size", self.units
        yield "layout", "TNC"

    def forward(self, x):
        n = x.shape[1]
        xs = F.separate(x, axis=0)  # (T, N, E) -> T steps of (N, E)
        hx = self.xp.zeros((1, n, self.units), dtype=x.dtype)  # (layers, N, H)
        hy, _ = F.n_step_gru(1, 0.0, hx, self.rnn.ws, self.rnn.bs, list(xs))
        return hy[0]  # (1, N, H) -> (N, H)


class LSTMLast(chainer.Chain):
    """``L.NStepLSTM``'s weights run by ``F.n_step_lstm`` (one layer, no dropout) over
    time-major ``(T, N, E)``, zero state and cell, returning the last step's state ``(N, H)``.

    Chainer's gates (``chainer.functions.n_step_lstm`` as its code runs, ``ops/lstm.py``),
    weights ``w0..w7`` (out, in), biases ``b0..b7``: ``i = sigmoid(w0 x + w4 h + b0 + b4)``,
    ``f`` with 1 and 5, the candidate ``tanh(w2 x + w6 h + b2 + b6)``, ``o`` with 3 and 7.
    The spec's one bias is ``b0..b3``; the recurrent biases ``b4..b7`` are removed from the link
    and zeros go in their place, so nothing trains them (``ops/lstm.py``)."""

    def __init__(self, in_size: int, units: int) -> None:
        super().__init__()
        self.units = units
        with self.init_scope():
            self.rnn = L.NStepLSTM(1, in_size, units, 0.0)
        for k in range(4, 8):  # the second bias: not a parameter (zeros in forward)
            delattr(self.rnn[0], f"b{k}")

    @property
    def printable_specs(self):
        yield "in_size", self.rnn.in_size
        yield "out_size", self.units
        yield "layout", "TNC"

    def forward(self, x):
        n = x.shape[1]
        xs = F.separate(x, axis=0)  # (T, N, E) -> T steps of (N, E)
        zeros = self.xp.zeros((1, n, self.units), dtype=x.dtype)  # (layers, N, H)
        w, none = self.rnn[0], self.xp.zeros(self.units, dtype=x.dtype)
        bs = [[w.b0, w.b1, w.b2, w.b3, none, none, none, none]]  # the recurrent biases: 0
        hy, _, _ = F.n_step_lstm(1, 0.0, zeros, zeros, self.rnn.ws, bs, list(xs))
        return hy[0]  # (1, N, H) -> (N, H)


class Residual(chainer.Chain):
    """``body(x) + shortcut(x)``; an empty shortcut is the identity."""

    def __init__(self, body: chainer.Sequential, shortcut: chainer.Sequential) -> None:
        super().__init__()
        self.has_shortcut = len(shortcut) > 0
        with self.init_scope():
            self.body = body
            if self.has_shortcut:
                self.shortcut = shortcut

    def forward(self, x):
        return self.body(x) + (self.shortcut(x) if self.has_shortcut else x)


def _takes_mask(layer) -> bool:
    return getattr(layer, "takes_mask", False)


def _run(layer, x, valid):
    return layer(x, valid) if _takes_mask(layer) else layer(x)


class MaskedSequential(chainer.Sequential):
    """Layers in order, handing the (N, T) mask of real tokens to the layers that take it."""

    takes_mask = True

    def forward(self, x, valid):
        for layer in self._layers:
            x = _run(layer, x, valid)
        return x


class TokenSequential(chainer.Sequential):
    """The model's own sequence over token ids: the loader hands them time-major (T, N); a
    masked graph (or one holding an attention) runs batch-major, so they are turned back to
    (N, T) and their mask made (read by the masked ops alone)."""

    def forward(self, x):
        ids = x.array if isinstance(x, chainer.Variable) else x
        ids = ids.T  # (T, N) -> (N, T)
        valid = ids != 0  # (N, T): real tokens
        x = ids
        for layer in self._layers:
            x = _run(layer, x, valid)
        return x


class MaskedResidual(Residual):
    """``body(x, valid) + shortcut(x, valid)``."""

    takes_mask = True

    def forward(self, x, valid):
        side = _run(self.shortcut, x, valid) if self.has_shortcut else x
        return _run(self.body, x, valid) + side


class Graph(chainer.Sequential):
    """Layers wired by index (``rosetta.spec.ops.Graph``), held as Chainer's own container (its
    links registered as a sequence's are): layer ``j`` runs on the outputs of the layers
    ``inputs[j]`` (-1: the graph's input; several: a variadic layer, given them as arguments);
    the last one's output is the graph's; each value dropped once its last reader has run; the
    mask handed to the layers that take it."""

    def __init__(self, layers: list, inputs: tuple[tuple[int, ...], ...]) -> None:
        super().__init__(*layers)
        self.inputs = inputs
        self.frees = last_readers(inputs)  # per layer, the values freed after it runs
        self.takes_mask = any(_takes_mask(layer) for layer in layers)

    def forward(self, x, valid=None):
        values = {-1: x}
        out = x
        for j, (layer, src) in enumerate(zip(self._layers, self.inputs, strict=True)):
            args = [values[k] for k in src]
            if _takes_mask(layer):
                args.append(valid)
            out = layer(*args)
            for k in self.frees[j]:  # dropped after their last reader
                del values[k]
            values[j] = out
        return out


def add(*xs):
    """The elementwise sum of its inputs."""
    out = xs[0] + xs[1]
    for x in xs[2:]:
        out = out + x
    return out


class Concat:
    """``F.concat`` of its inputs along the spec's per-sample ``axis`` in Chainer's layout: NCHW
    images and (N, F) vectors lead with the batch (``axis + 1``), as does a batch-major (N, T, E)
    sequence; a time-major (T, N, E) one (``layout``, read at call time) joins along time at
    ``0`` (its features are the last axis either way)."""

    def __init__(self, axis: int, rank: int, layout: SequenceLayout) -> None:
        self.canonical, self.rank, self.layout = axis, rank, layout

    def __repr__(self) -> str:
        return f"Concat(axis={self.canonical})"

    @property
    def axis(self) -> int:
        if self.rank == 2 and self.canonical == 0 and self.layout.time_major:
            return 0  # (T, N, E): time leads
        return self.canonical + 1

    def __call__(self, *xs):
        return F.concat(xs, axis=self.axis)


def mul(*xs):
    """The elementwise product of its inputs."""
    out = xs[0] * xs[1]
    for x in xs[2:]:
        out = out * x
    return out


def hard_swish(x):
    """``x * clip(x + 3, 0, 6) / 6`` (Chainer has no hard-swish function)."""
    return x * F.clip(x + 3, 0.0, 6.0) / 6


class SeqLinear(L.Linear):
    """``L.Linear`` on the last axis of (N, T, I): every position alike."""

    def forward(self, x, n_batch_axes=None):
        return super().forward(x, n_batch_axes=x.ndim - 1)


class LayerNorm(chainer.Link):
    """LayerNorm over the last axis: ``F.layer_normalization`` on (N*T, E) rows (biased
    variance, eps inside the root), gamma and beta."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        with self.init_scope():
            # initialisers: the parameters take the build's dtype (chainer.config.dtype)
            self.gamma = chainer.Parameter(chainer.initializers.One(), (size,))
            self.beta = chainer.Parameter(chainer.initializers.Zero(), (size,))

    def forward(self, x):
        rows = F.reshape(x, (-1, x.shape[-1]))
        y = F.layer_normalization(rows, self.gamma, self.beta, eps=self.eps)
        return F.reshape(y, x.shape)


def _gelu(x):
    """Exact GELU composed: ``0.5 x (1 + erf(x / sqrt 2))`` (Chainer has no gelu)."""
    dt = x.dtype.type
    return dt(0.5) * x * (1 + F.erf(x * dt(1 / np.sqrt(2.0))))


class PositionEmbedding(chainer.Link):
    """Learned positions: ``x + table[:T]`` on (N, T, E); generating (``decoding`` active), the
    rows from its offset on."""

    def __init__(self, max_len: int, dim: int, decoding: Decoding | None = None) -> None:
        super().__init__()
        self.decoding = decoding
        with self.init_scope():
            self.table = chainer.Parameter(chainer.initializers.Zero(), (max_len, dim))

    def forward(self, x):
        d = self.decoding
        start = d.offset if d is not None and d.active else 0
        return x + F.broadcast_to(self.table[start : start + x.shape[1]], x.shape)


class SelfAttention(chainer.Chain):
    """Multi-head self-attention from Chainer's functions: four linear projections (the key's
    without bias), ``F.matmul`` over (N*H, T, d), ``F.softmax`` (stable) over scores whose
    excluded keys hold the dtype's lowest value (their weight is exactly 0). ``attention``
    takes the token mask: padding keys are excluded and rows without any real key set to 0;
    ``causal`` (``causal_attention``) takes none: query ``i`` reads the keys ``j <= i``, so
    every row has one (itself). A causal one generating (``decoding`` active) reads its keys
    and values from its cache (:meth:`_cached`)."""

    batch_major = True  # reads (N, T, E): a model holding one runs its ids batch-major

    def __init__(
        self, dim: int, heads: int, causal: bool = False, decoding: Decoding | None = None
    ) -> None:
        super().__init__()
        self.dim, self.heads, self.causal = dim, heads, causal
        self.takes_mask = not causal  # a causal model has no padding (text windows)
        self.decoding = decoding  # the generation state (causal attentions only)
        with self.init_scope():
            self.query = SeqLinear(dim, dim)
            self.key = SeqLinear(dim, dim, nobias=True)
            self.value = SeqLinear(dim, dim)
            self.out_proj = SeqLinear(dim, dim)

    def forward(self, x, valid=None):
        n, t, e = x.shape
        h, d = self.heads, e // self.heads
        xp = chainer.backend.get_array_module(x)

        def split(y):  # (N, T, E) -> (N*H, T, d)
            return F.reshape(F.transpose(F.reshape(y, (n, t, h, d)), (0, 2, 1, 3)), (n * h, t, d))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.decoding is not None and self.decoding.active:
            k, v, keys = self._cached(k, v, self.decoding)  # (N*H, offset + T, d) each
        elif self.causal:  # (T, T) lower triangle: key j <= query i
            keys = xp.tri(t, dtype=bool)
        else:  # (N*H, 1, T): each sample's real keys, for every query
            keys = xp.repeat(valid, h, axis=0)[:, None, :]
        dt = x.dtype.type
        scores = F.matmul(q, k, transb=True) * dt(1 / np.sqrt(d))  # (N*H, T, S)
        if keys is not None:
            low = xp.full(scores.shape, np.finfo(x.dtype).min, dtype=x.dtype)
            scores = F.where(xp.broadcast_to(keys, scores.shape), scores, low)
        o = F.matmul(F.softmax(scores, axis=2), v)  # (N*H, T, d)
        if not self.causal:  # a row of padding only attends to nothing: 0
            any_key = xp.repeat(valid.any(axis=1), h)[:, None, None].astype(x.dtype)
            o = o * xp.broadcast_to(any_key, o.shape)
        o = F.reshape(F.transpose(F.reshape(o, (n, h, t, d)), (0, 2, 1, 3)), (n, t, e))
        return self.out_proj(o)

    def _cached(self, k, v, dec: Decoding):
        """The new positions' keys and values (N*H, T, d) written at ``offset`` into this
        layer's static buffers (N*H, capacity, d), allocated at the prefill; returns every key
        and value so far (N*H, offset + T, d) and which ones each new query reads: ``j <=
        offset + i`` ((T, offset + T); None for one new token, which reads them all)."""
        t = k.shape[1]
        xp = chainer.backend.get_array_module(k)
        if id(self) not in dec.cache:  # the prefill: buffers for the whole context
            shape = (k.shape[0], dec.capacity, k.shape[2])
            dec.cache[id(self)] = (xp.zeros(shape, k.dtype), xp.zeros(shape, v.dtype))
        kc, vc = dec.cache[id(self)]
        end = dec.offset + t
        kc[:, dec.offset : end] = k.array  # positions offset..end-1 (no graph: inference)
        vc[:, dec.offset : end] = v.array
        keys = None if t == 1 else xp.tri(t, end, k=dec.offset, dtype=bool)
        return kc[:, :end], vc[:, :end], keys


class TiedLinear:
    """A bias-free linear layer whose weight is an ``L.EmbedID``'s own ``W`` (V, E), read at call
    time: ``F.linear(x, embed.W)``, i.e. ``x @ W.T`` over the last axis (weight tying). It owns
    nothing and is no link, so the table is registered once, by its embedding: the optimiser
    updates it once, with the gradient both uses accumulate into ``W.grad``."""

    def __init__(self, embed) -> None:
        self.embed = embed

    def __repr__(self) -> str:
        return f"TiedLinear(tied to EmbedID {tuple(self.embed.W.shape)})"

    def __call__(self, x):
        return F.linear(x, self.embed.W, n_batch_axes=x.ndim - 1)  # (..., E) -> (..., V)


class MaskedMean:
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only."""

    takes_mask = True

    def __call__(self, x, valid):
        w = valid.astype(x.dtype)
        w = w / np.maximum(w.sum(axis=1, keepdims=True), 1)  # (N, T)
        return F.sum(x * F.broadcast_to(w[:, :, None], x.shape), axis=1)


def _flatten_chw(x):
    return F.reshape(x, (x.shape[0], -1))  # (N, C, H, W) -> (N, C*H*W): the spec's CHW order


def _spatial_mean(x):
    return F.mean(x, axis=(2, 3))  # (N, C, H, W) -> (N, C)


def _batch_major(layers: list) -> bool:
    """Whether a link among ``layers``, or inside one, reads its sequences batch-major."""
    return any(
        getattr(link, "batch_major", False)
        for layer in layers
        if isinstance(layer, chainer.Link)
        for link in layer.links()
    )


def sequence(layers: list, site: Site, ctx: Ctx) -> chainer.Sequential:
    """Layers in order, as Chainer's own container; with masked ops, the model's own sequence
    makes the token mask and branches pass it on. A model over token ids holding a masked op or
    an attention (a causal one takes no mask) turns its ids batch-major."""
    masked = any(_takes_mask(layer) for layer in layers)
    if site.path == "" and len(site.in_shape) == 1 and (masked or _batch_major(layers)):
        ctx.layout.time_major = False  # its ids turn batch-major: every sequence is (N, T, E)
        return TokenSequential(*layers)
    return MaskedSequential(*layers) if masked else chainer.Sequential(*layers)


def residual(body, shortcut, site: Site, ctx: Ctx) -> Residual:
    """``body(x) + shortcut(x)``."""
    if _takes_mask(body) or _takes_mask(shortcut):
        return MaskedResidual(body, shortcut)
    return Residual(body, shortcut)


def graph(layers: list, wiring: Wiring, site: Site, ctx: Ctx) -> Graph:
    """A wired graph: :class:`Graph`."""
    return Graph(layers, wiring.inputs)


TABLE: LoweringTable = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch, on the runtime's device (dropout masks from a
    generator seeded with ``runtime.seed``)."""
    placement = rt.place(runtime.device)
    ctx = Ctx(runtime.dtype, DropoutSwitch(rt.uniform_source(placement, runtime.seed)))
    layer = lower_op(TABLE, op, tuple(x.shape[1:]), ctx)
    xd = placement.device.send(np.asarray(x, dtype=runtime.dtype))
    with rt.step_config(placement, train=training, backprop=False):
        y = layer(xd)
    return np.asarray(chainer.backend.CpuDevice().send(y.array))
