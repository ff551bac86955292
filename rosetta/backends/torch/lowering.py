"""PyTorch's side of the table: the ``nn`` modules the op modules build, and how they compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and ``weights`` side by
side). This file holds what several of them share: the build context :class:`Build` (which module
owns the parameters of which op, for ``weights.py``), the modules PyTorch lacks
(:class:`GatedDropout`, whose rate is a tensor the step reads, so that the gate can switch it off
inside the very program that is timed; :class:`SelfAttention`; the masked sequences; the
variadic :class:`Sum`, :class:`Product`, :class:`Concat`, their inputs as arguments), and how
layers compose: a sequence is an ``nn.Sequential``, a residual block a :class:`Residual`, a wired
graph a :class:`Graph` (its layers in an ``nn.ModuleList``, each run on the outputs it names, the
token mask handed to those that take it); ``print(net)`` is the architecture. ``TABLE`` is the
native face of ``source.OPS``.

The modules compute in PyTorch's logical NCHW order whatever the memory format, so ``Flatten`` is
channel-major (the spec's ``CHW``) in ``channels_last`` too, and a dense kernel needs no row
permutation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rosetta.backends.driver import LoweringTable, Site, Wiring, last_readers, lower_op
from rosetta.backends.torch.loader import TORCH_DTYPES
from rosetta.backends.torch.source import OPS
from rosetta.runtime import Runtime

NAME = "torch"
#: the forms of multi-head attention this lowering writes (``Build.attention``): ``sdpa``, one
#: ``F.scaled_dot_product_attention`` (the default), or ``composed`` from ``matmul``/``softmax``
ATTENTION_FORMS = ("sdpa", "composed")
ATTENTION_DEFAULT = "sdpa"


class Decoding:
    """A decoder generating, shared by its position embedding and causal attentions: while
    ``active``, the input holds the positions from ``offset`` on, and each attention keeps its
    keys and values in a static cache (``capacity`` positions, allocated at the prefill: the
    KV cache of a static shape, as ``torch.compile``'s decoding recipes keep it)."""

    def __init__(self) -> None:
        self.active = False
        self.offset = 0
        self.capacity = 0
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def start(self, capacity: int) -> None:
        """A new generation: no position seen, the caches dropped."""
        self.offset, self.capacity, self.cache = 0, capacity, {}


@dataclass
class Build:
    """The build context: ``(op, module holding its parameters)`` for every parameterised op,
    in graph order, filled in by the entries as the driver walks the graph; ``attention`` is
    the form every attention op takes (:data:`ATTENTION_FORMS`); ``decoding`` the generation
    state the position embeddings and causal attentions share."""

    owners: list[tuple[object, nn.Module]] = field(default_factory=list)
    attention: str = ATTENTION_DEFAULT
    decoding: Decoding = field(default_factory=Decoding)

    def own(self, op: object, module: nn.Module) -> None:
        """Record that ``module``'s tensors are ``op``'s parameters."""
        self.owners.append((op, module))


class Residual(nn.Module):
    """``body(x) + shortcut(x)``; an empty shortcut is the identity (ResNet's bottleneck add)."""

    def __init__(self, body: nn.Module, shortcut: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = self.shortcut(x)  # identity: x itself (the body never writes into its input)
        out = self.body(x)
        if out is side:  # an empty body: do not double x in place
            return out + side
        out += side  # in place, as torchvision's Bottleneck (autograd checks it is allowed)
        return out


class LastStepGRU(nn.Module):
    """``nn.GRU`` over batch-major ``(N, T, E)`` from a zero state; returns the last state."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h_n = self.gru(x)  # h_n: (num_layers=1, N, H)
        return h_n[0]  # (N, H): the last step's state


class LastStepLSTM(nn.Module):
    """``nn.LSTM`` over batch-major ``(N, T, E)`` from a zero state and cell; returns the last
    state. Its second bias ``bias_hh_l0`` is held at zero, untrained (the spec's one bias:
    ``rosetta.spec.ops.LSTM``), so cuDNN's and oneDNN's fused kernels still run."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=True)
        with torch.no_grad():
            self.lstm.bias_hh_l0.zero_()
        self.lstm.bias_hh_l0.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h_n, _) = self.lstm(x)  # h_n: (num_layers=1, N, H)
        return h_n[0]  # (N, H): the last step's state


class GatedDropout(nn.Module):
    """Inverted dropout (the spec's rule: zero with probability ``rate``, scale the rest by
    ``1 / (1 - rate)``; identity in ``eval()``) whose rate is a 0-d buffer, not a Python float.

    The rate is therefore an *input* of the step: ``set_rate(0.0)`` keeps every element
    (``rand >= 0`` always holds and the scale is exactly 1, so the output is ``x`` bit for bit)
    without changing the code that runs. In eager mode the step is the same Python and the same
    kernels either way; under ``torch.compile`` the buffer is a graph input, not a guarded
    constant, so toggling it neither retraces nor recompiles (``nn.Dropout.p``, a float, would:
    dynamo specialises on it). The random numbers are drawn in both cases, so the generator
    advances the same way whether dropout is on or off."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.spec_rate = float(rate)
        self.register_buffer("rate", torch.tensor(self.spec_rate), persistent=False)

    def set_rate(self, rate: float) -> None:
        """Write the rate the next step reads (in place: the same tensor, dtype and device)."""
        with torch.no_grad():
            self.rate.fill_(rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        keep = torch.rand_like(x) >= self.rate  # (N, ...) bool, P(keep) = 1 - rate
        return x * keep * (1 / (1 - self.rate))

    def extra_repr(self) -> str:
        return f"rate={self.spec_rate} (a buffer: set_dropout(False) writes 0)"


class MaskedSequential(nn.Sequential):
    """Layers in order, handing the (N, T) mask of real tokens to the layers that take it
    (``takes_mask``): a residual branch holding masked ops. The value stays one tensor."""

    takes_mask = True

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        for layer in self:
            x = layer(x, valid) if getattr(layer, "takes_mask", False) else layer(x)
        return x


class TokenSequential(nn.Sequential):
    """The model's own sequence over token ids: makes the mask of real tokens (id != 0) once
    and hands it down to the layers that take it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        valid = x != 0  # (N, T) bool
        for layer in self:
            x = layer(x, valid) if getattr(layer, "takes_mask", False) else layer(x)
        return x


class MaskedResidual(Residual):
    """``body(x, valid) + shortcut(x, valid)`` for branches that hold masked ops."""

    takes_mask = True

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        def run(branch: nn.Module) -> torch.Tensor:
            return branch(x, valid) if getattr(branch, "takes_mask", False) else branch(x)

        side = run(self.shortcut)
        out = run(self.body)
        return out + side  # not in place: side may be x itself, which the body still reads


class PositionEmbedding(nn.Module):
    """Learned positions: ``x + table[:T]`` on (N, T, E); generating (``decoding``), the rows
    from the positions already seen on."""

    def __init__(self, max_len: int, dim: int, decoding: Decoding | None = None) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.zeros(max_len, dim))
        self.decoding = decoding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.decoding
        start = d.offset if d is not None and d.active else 0
        return x + self.table[start : start + x.shape[1]]


class RealCellAvgPool2d(nn.Module):
    """Average pooling over asymmetric zero padding ``(top, bottom, left, right)`` whose divisor
    counts each window's real cells only (``count_include_pad=False``, which ``nn.AvgPool2d``
    offers for symmetric padding alone): the windows' sums (``divisor_override=1``) of the
    padded input over those of padded ones."""

    def __init__(self, kernel, stride, padding: tuple[int, int, int, int]) -> None:
        super().__init__()
        t, b, left, right = padding
        self.kernel, self.stride, self.pad = kernel, stride, (left, right, t, b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ones = torch.ones_like(x[:1, :1])  # (1, 1, H, W)
        total = F.avg_pool2d(F.pad(x, self.pad), self.kernel, self.stride, divisor_override=1)
        real = F.avg_pool2d(F.pad(ones, self.pad), self.kernel, self.stride, divisor_override=1)
        return total / real  # (N, C, Ho, Wo) / (1, 1, Ho, Wo)


class SelfAttention(nn.Module):
    """Multi-head self-attention with a boolean key padding mask (True: take part), in one of two
    forms (``form``): ``sdpa``, ``F.scaled_dot_product_attention`` (a row whose every key is
    padding returns 0 from SDPA's CPU kernels, PyTorch >= 2.5, the spec's rule; elsewhere such
    rows are unmasked and zeroed here), or ``composed``: ``q k^T / sqrt(d)``, padding keys at
    the dtype's lowest value, ``softmax`` (stable), ``@ v``, rows without a real key zeroed."""

    takes_mask = True

    def __init__(self, dim: int, heads: int, form: str = ATTENTION_DEFAULT) -> None:
        super().__init__()
        if form not in ATTENTION_FORMS:
            raise ValueError(f"attention form {form!r}; valid: {', '.join(ATTENTION_FORMS)}")
        self.heads = heads
        self.form = form
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim, bias=False)  # the softmax cancels a key bias
        self.value = nn.Linear(dim, dim)
        self.output = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        n, t, e = x.shape
        q, k, v = (
            p(x).view(n, t, self.heads, e // self.heads).transpose(1, 2)  # (N, H, T, d)
            for p in (self.query, self.key, self.value)
        )
        mask = valid[:, None, None, :]  # (N, 1, 1, T): keys that take part
        if self.form == "composed":
            o = _composed_attention(q, k, v, mask, valid)
            return self.output(o.transpose(1, 2).reshape(n, t, e))
        any_key = None
        if x.device.type != "cpu":
            any_key = valid.any(dim=1)[:, None, None, None]  # (N, 1, 1, 1)
            mask = mask | ~any_key
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (N, H, T, d)
        if any_key is not None:
            o = o * any_key
        return self.output(o.transpose(1, 2).reshape(n, t, e))  # heads concatenated

    def extra_repr(self) -> str:
        return f"heads={self.heads}, form={self.form}"


class CausalSelfAttention(SelfAttention):
    """Multi-head causal self-attention (query ``i`` reads keys ``j <= i``, no padding mask): the
    projections of :class:`SelfAttention`; ``sdpa`` is one ``F.scaled_dot_product_attention``
    with ``is_causal=True`` (the flash/causal kernels skip the masked half where they can),
    ``composed`` the same from ``matmul``/``softmax`` under a lower-triangular mask."""

    takes_mask = False

    def __init__(
        self, dim: int, heads: int, form: str = ATTENTION_DEFAULT, decoding: Decoding | None = None
    ) -> None:
        super().__init__(dim, heads, form)
        self.decoding = decoding

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        n, t, e = x.shape
        q, k, v = (
            p(x).view(n, t, self.heads, e // self.heads).transpose(1, 2)  # (N, H, T, d)
            for p in (self.query, self.key, self.value)
        )
        if self.decoding is not None and self.decoding.active:
            o = self._cached(q, k, v, self.decoding)
        elif self.form == "composed":
            scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)  # (N, H, T, T)
            later = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)  # key j > i
            probs = torch.softmax(scores.masked_fill(later, torch.finfo(scores.dtype).min), -1)
            o = torch.matmul(probs, v)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (N, H, T, d)
        return self.output(o.transpose(1, 2).reshape(n, t, e))  # heads concatenated

    def _cached(self, q, k, v, d: Decoding) -> torch.Tensor:
        """The new positions' attention over the cache: their keys and values written at
        ``offset`` into this layer's static buffers, their queries reading every key up to
        their own position (the prefill: ``is_causal``; one new token: every key so far)."""
        n, h, t, dh = k.shape
        if id(self) not in d.cache:  # the prefill: buffers for the whole context
            shape = (n, h, d.capacity, dh)
            d.cache[id(self)] = (k.new_zeros(shape), v.new_zeros(shape))
        kc, vc = d.cache[id(self)]
        end = d.offset + t
        kc[:, :, d.offset : end] = k  # (N, H, capacity, d): positions offset..end-1
        vc[:, :, d.offset : end] = v
        keys, values = kc[:, :, :end], vc[:, :, :end]
        if d.offset == 0:
            return F.scaled_dot_product_attention(q, keys, values, is_causal=True)
        if t == 1:
            return F.scaled_dot_product_attention(q, keys, values)  # reads every key so far
        mask = torch.ones(t, end, dtype=torch.bool, device=q.device).tril(d.offset)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)


class TiedLinear(nn.Module):
    """``x @ table^T``: a bias-free linear layer whose weight *is* an embedding's (the same
    ``nn.Parameter``, as nanoGPT ties its head), so autograd adds both uses' gradients."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.weight = embedding.weight  # (V, E): the same Parameter, registered here again

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)  # (..., E) -> (..., V)


def _composed_attention(q, k, v, mask, valid):
    """Attention from ``matmul`` and ``softmax`` on (N, H, T, d): what SDPA's math kernel does,
    written out. Padding keys score the dtype's lowest value (finite: a row of padding only
    stays finite, and is zeroed after)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)  # (N, H, T, T)
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1)
    any_key = valid.any(dim=1)[:, None, None, None]  # (N, 1, 1, 1)
    return torch.matmul(probs, v) * any_key


class MaskedMean(nn.Module):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only."""

    takes_mask = True

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        w = valid.to(x.dtype)  # (N, T)
        total = torch.einsum("nte,nt->ne", x, w)
        return total / w.sum(dim=1, keepdim=True).clamp(min=1)


class Sum(nn.Module):
    """The elementwise sum of its inputs, a new tensor (never in place: an input may be read by
    another layer of the graph)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0] + xs[1]
        for x in xs[2:]:
            out += x  # in place on the new tensor only
        return out


class Product(nn.Module):
    """The elementwise product of its inputs, a new tensor."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0] * xs[1]
        for x in xs[2:]:
            out = out * x
        return out


class Concat(nn.Module):
    """``torch.cat`` of its inputs along ``dim``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, dim=self.dim)


class Graph(nn.Module):
    """Layers wired by index (``rosetta.spec.ops.Graph``): layer ``j`` runs on the outputs of
    the layers ``inputs[j]`` (-1: the graph's input; several: a variadic layer, given them as
    arguments), the last one's output is the graph's. Each value is dropped once its last
    reader has run. With masked layers the (N, T) mask is handed to those that take it."""

    def __init__(self, layers: list[nn.Module], inputs: tuple[tuple[int, ...], ...]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.inputs = inputs
        self.takes_mask = _masked(layers)
        self.frees = last_readers(inputs)  # per layer, the values freed after it runs

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        values: dict[int, torch.Tensor] = {-1: x}
        out = x
        for j, (layer, src) in enumerate(zip(self.layers, self.inputs, strict=True)):
            args = [values[k] for k in src]
            if getattr(layer, "takes_mask", False):
                args.append(valid)
            out = layer(*args)
            for k in self.frees[j]:
                del values[k]
            values[j] = out
        return out


def _masked(layers: list[nn.Module]) -> bool:
    return any(getattr(m, "takes_mask", False) for m in layers)


def sequence(layers: list[nn.Module], site: Site, ctx: Build) -> nn.Module:
    """Layers in order: an ``nn.Sequential`` (empty: the identity); with masked ops, the
    model's own sequence makes the token mask and branches pass it on."""
    if not _masked(layers):
        return nn.Sequential(*layers)
    if site.path == "" and len(site.in_shape) == 1:
        return TokenSequential(*layers)
    return MaskedSequential(*layers)


def residual(body: nn.Module, shortcut: nn.Module, site: Site, ctx: Build) -> nn.Module:
    """``body(x) + shortcut(x)``."""
    if _masked([body, shortcut]):
        return MaskedResidual(body, shortcut)
    return Residual(body, shortcut)


def graph(layers: list[nn.Module], wiring: Wiring, site: Site, ctx: Build) -> nn.Module:
    """A wired graph: :class:`Graph` (its layers in an ``nn.ModuleList``, so their parameters
    keep their place in the model); at the model's top on token ids, the token sequence makes
    the mask it hands on."""
    return Graph(layers, wiring.inputs)


TABLE: LoweringTable[nn.Module] = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch, on the runtime's device and dtype (dropout masks
    from ``runtime.seed``)."""
    module = lower_op(TABLE, op, tuple(x.shape[1:]), Build())
    module = module.to(device=runtime.device, dtype=TORCH_DTYPES[runtime.dtype]).train(training)
    torch.manual_seed(runtime.seed)
    xt = torch.as_tensor(x, dtype=TORCH_DTYPES[runtime.dtype], device=runtime.device)
    with torch.no_grad():
        return module(xt).to("cpu").numpy()
