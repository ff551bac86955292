"""Elementwise, dense, normalisation, embedding and loss ops of the NumPy reference.

Each op has a ``*_forward(...) -> (y, cache)`` and a ``*_backward(dy, cache) -> grads`` side by
side (the loss is the exception: ``softmax_cross_entropy_backward(cache, dloss=1.0)``). Conventions
shared with the rest of Rosetta: channels-first activations, dense kernels in "IO" layout
(``y = x @ w + b``), embedding tables "VE", BatchNorm on axis 1 in inference mode. Every function
returns arrays of the input dtype: hyper-parameters (``eps``, ``rate``, ``dloss``) are cast to it,
so float32 inputs are never silently computed in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "relu_forward",
    "relu_backward",
    "logistic",
    "sigmoid_forward",
    "sigmoid_backward",
    "softmax_forward",
    "softmax_backward",
    "dropout_mask",
    "dropout_forward",
    "dropout_backward",
    "flatten_forward",
    "flatten_backward",
    "dense_forward",
    "dense_backward",
    "batchnorm_forward",
    "batchnorm_backward",
    "add_forward",
    "add_backward",
    "embedding_forward",
    "embedding_backward",
    "softmax_cross_entropy_forward",
    "softmax_cross_entropy_backward",
]


# --------------------------------------------------------------------------- relu


def relu_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y = max(x, 0)`` elementwise, any shape; the cache is the boolean mask ``x > 0``."""
    mask = x > 0
    return np.maximum(x, 0), mask  # a Python 0 does not promote: dtype kept


def relu_backward(dy: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """``dx = dy * (x > 0)``: the gradient at ``x == 0`` is taken as 0 (as in all frameworks)."""
    return np.where(cache, dy, 0)  # dtype of dy kept (Python 0 is a weak scalar)


# --------------------------------------------------------------------------- sigmoid


_LOGISTIC_FLOOR: dict[np.dtype, np.floating] = {}  # log(tiny / 2) per dtype


def logistic(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Logistic function ``1 / (1 + exp(-a))``, dtype preserved, no overflow for any a; written
    into ``out`` (a's shape and dtype, ``a`` itself allowed) when given.

    ``a`` is first raised to ``log(tiny / 2)`` (tiny: the dtype's smallest normal; -88.0 in
    float32, -709.1 in float64), so ``exp(-a)`` stays below ``2 / tiny``, finite: where it is
    raised the logistic is below ``tiny / 2`` and comes out as about ``tiny / 2``, off by less
    than ``tiny``. Elsewhere each of the four operations rounds once: within 3 ulp, relative, at
    every a (the tail included, where ``1 - 1 / (1 + exp(a))`` would cancel). No mask.
    """
    floor = _LOGISTIC_FLOOR.get(a.dtype)
    if floor is None:
        floor = _LOGISTIC_FLOOR[a.dtype] = a.dtype.type(math.log(np.finfo(a.dtype).tiny / 2))
    e = np.maximum(a, floor, out=out)  # NaN stays NaN
    np.negative(e, out=e)
    np.exp(e, out=e)
    e += 1
    return np.divide(1, e, out=e)


def sigmoid_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sigmoid op: ``y = logistic(x)`` elementwise, any shape (overflow-free, the GRU's
    gates use the same function). The cache is ``y``."""
    y = logistic(x)
    return y, y


def sigmoid_backward(dy: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """``dx = dy * y * (1 - y)``."""
    return dy * cache * (1 - cache)


# --------------------------------------------------------------------------- tanh


def tanh_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y = tanh(x)`` elementwise, any shape; the cache is ``y``."""
    y = np.tanh(x)
    return y, y


def tanh_backward(dy: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """``dx = dy * (1 - y^2)``."""
    return dy * (1 - cache * cache)


# --------------------------------------------------------------------------- softmax


def softmax_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y = exp(x - max) / sum(exp(x - max))`` over the last axis, any rank (the batch and
    every other axis apart), stable for any magnitude: the largest entry of each row is
    subtracted first, so no ``exp`` overflows and the sum is at least 1. The cache is ``y``."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # (..., K), each row's largest entry is 1
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y


def softmax_backward(dy: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """``dx = y * (dy - sum(dy * y))``, the sum over the last axis (the Jacobian
    ``diag(y) - y y^T`` applied to each row)."""
    y = cache
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


# --------------------------------------------------------------------------- hardswish


def hardswish_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y = x * min(max(x + 3, 0), 6) / 6`` elementwise; the cache is ``x``."""
    return x * np.clip(x + 3, 0, 6) / 6, x


def hardswish_backward(dy: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """``dx = dy * (0 for x < -3; x / 3 + 1/2 for -3 <= x <= 3; 1 for x > 3)``: the kinks as
    PyTorch takes them (-1/2 at x = -3, 3/2 at x = 3)."""
    x = cache
    slope = np.where(x < -3, 0, np.where(x <= 3, x / 3 + 0.5, 1))
    return dy * slope.astype(dy.dtype, copy=False)


# --------------------------------------------------------------------------- clip


def clip_forward(x: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """``y = min(max(x, lo), hi)`` elementwise; the cache is the mask ``lo <= x <= hi``."""
    inside = (x >= lo) & (x <= hi)
    return np.clip(x, x.dtype.type(lo), x.dtype.type(hi)), inside


def clip_backward(dy: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """``dx = dy`` where ``lo <= x <= hi`` (the bounds included, as PyTorch's clamp), else 0."""
    return np.where(cache, dy, 0)


# --------------------------------------------------------------------------- mul


def mul_forward(*xs: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """``y = x0 * x1 * ...`` of two or more tensors of one shape (no broadcasting); the cache
    is the inputs."""
    if len({x.shape for x in xs}) != 1:
        raise ValueError(f"mul: shapes differ, {' vs '.join(str(x.shape) for x in xs)}")
    y = xs[0] * xs[1]
    for x in xs[2:]:
        y = y * x
    return y, xs


def mul_backward(dy: np.ndarray, cache: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """``dx_i = dy * prod(x_j, j != i)`` (products of the others, never a division)."""
    out = []
    for i in range(len(cache)):
        g = dy
        for j, x in enumerate(cache):
            if j != i:
                g = g * x
        out.append(g)
    return tuple(out)


# --------------------------------------------------------------------------- dropout


def dropout_mask(shape: tuple[int, ...], rate: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean keep-mask of ``shape``: each entry is True with probability ``1 - rate``.

    Drawn as ``rng.random(shape) >= rate`` (uniforms on [0, 1)), so a seeded ``rng`` gives a
    reproducible mask that every framework backend can be fed.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    return rng.random(shape) >= rate


@dataclass(frozen=True)
class DropoutCache:
    mask: np.ndarray | None  # keep-mask in x's dtype (0/1), or None in evaluation mode
    keep: np.ndarray | None  # 0-d array 1 - rate, in x's dtype


def dropout_forward(
    x: np.ndarray, rate: float, mask: np.ndarray | None
) -> tuple[np.ndarray, DropoutCache]:
    """Inverted dropout: ``y = x * mask / (1 - rate)``; ``mask=None`` is evaluation (identity).

    ``mask`` is a boolean or 0/1 keep-mask of ``x``'s shape (see ``dropout_mask``); the survivors
    are scaled by ``1 / (1 - rate)`` so that the expectation of ``y`` equals ``x``.
    """
    if mask is None:
        return x.copy(), DropoutCache(mask=None, keep=None)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    if mask.shape != x.shape:
        raise ValueError(f"dropout mask shape {mask.shape} != input shape {x.shape}")
    m = mask.astype(x.dtype)
    keep = np.asarray(1.0 - rate, dtype=x.dtype)  # 1 - rate rounded once to x's dtype
    return x * m / keep, DropoutCache(mask=m, keep=keep)


def dropout_backward(dy: np.ndarray, cache: DropoutCache) -> np.ndarray:
    """``dx = dy * mask / (1 - rate)`` (or ``dy`` itself in evaluation mode)."""
    if cache.mask is None:
        return dy.copy()
    return dy * cache.mask / cache.keep


# --------------------------------------------------------------------------- flatten


def flatten_forward(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """(N, C, H, W) -> (N, C*H*W) in C, H, W order (a C-order reshape); any rank >= 2 works."""
    # (N, d1, d2, ...) -> (N, d1*d2*...)
    return x.reshape(x.shape[0], -1), x.shape


def flatten_backward(dy: np.ndarray, cache: tuple[int, ...]) -> np.ndarray:
    """Restore the input shape: (N, C*H*W) -> (N, C, H, W)."""
    return dy.reshape(cache)


# --------------------------------------------------------------------------- dense


@dataclass(frozen=True)
class DenseCache:
    x: np.ndarray  # (N, I) or (N, T, I)
    w: np.ndarray  # (I, O)
    has_bias: bool


def dense_forward(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None
) -> tuple[np.ndarray, DenseCache]:
    """Fully connected layer on the last axis, ``y = x @ w + b``: x (N, I) or a sequence
    (N, T, I), w (I, O) ("IO" layout), b (O,) or None."""
    if x.ndim not in (2, 3) or w.ndim != 2 or x.shape[-1] != w.shape[0]:
        raise ValueError(f"dense: input {x.shape} does not match kernel {w.shape} (IO layout)")
    y = x @ w  # (..., I) @ (I, O) -> (..., O)
    if b is not None:
        y += b
    return y, DenseCache(x=x, w=w, has_bias=b is not None)


def dense_backward(
    dy: np.ndarray, cache: DenseCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients ``(dx, dw, db)`` of shapes x's, (I, O), (O,) for ``dy`` (..., O)."""
    i, o = cache.w.shape
    dx = dy @ cache.w.T  # (..., O) @ (O, I) -> (..., I)
    rows, drows = cache.x.reshape(-1, i), dy.reshape(-1, o)  # every position is one row
    dw = rows.T @ drows  # (I, rows) @ (rows, O) -> (I, O)
    db = drows.sum(axis=0) if cache.has_bias else None  # (O,)
    return dx, dw, db


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    """Broadcast shape of a per-channel vector against x: (1, C) or (1, C, 1, 1)."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


@dataclass(frozen=True)
class BatchNormCache:
    x: np.ndarray  # the input (ops never write to their inputs)
    mean: np.ndarray  # (1, C[, 1, 1])
    gamma: np.ndarray  # (1, C[, 1, 1])
    std: np.ndarray  # sqrt(var + eps), (1, C[, 1, 1])

    @property
    def xhat(self) -> np.ndarray:
        """The normalised input, recomputed for the backward pass by the forward's own two
        operations (bit-identical), so that a forward alone allocates one array."""
        xhat = self.x - self.mean
        xhat /= self.std
        return xhat


def batchnorm_forward(
    x: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    eps: float,
) -> tuple[np.ndarray, BatchNormCache]:
    """Inference-mode batch normalisation per channel on axis 1 of x (N, C, H, W) or (N, C).

    ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` with the given running statistics
    ``mean`` and ``var`` (C,) (buffers: no batch statistics, no gradient) and parameters
    ``gamma``, ``beta`` (C,). Computed in exactly that order, in x's dtype.
    """
    if x.ndim not in (2, 4):
        raise ValueError(f"batchnorm expects (N, C) or (N, C, H, W) input, got shape {x.shape}")
    c = x.shape[1]
    for name, v in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var)):
        if v.shape != (c,):
            raise ValueError(f"batchnorm {name} shape {v.shape} != ({c},)")
    shape = _channel_shape(x)
    # each (C,) -> (1, C) or (1, C, 1, 1)
    g, bt, mu, vr = (v.reshape(shape) for v in (gamma, beta, mean, var))
    std = np.sqrt(vr + np.asarray(eps, dtype=vr.dtype))
    y = x - mu
    y /= std  # in place: the same operations in the same order, one fresh array, not four
    y *= g
    y += bt
    return y, BatchNormCache(x=x, mean=mu, gamma=g, std=std)


def batchnorm_backward(
    dy: np.ndarray, cache: BatchNormCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients ``(dx, dgamma, dbeta)`` of inference-mode batchnorm; shapes x, (C,), (C,)."""
    axes = (0,) + tuple(range(2, dy.ndim))  # every axis but channels
    dx = dy * cache.gamma / cache.std
    dgamma = (dy * cache.xhat).sum(axis=axes)  # (C,)
    dbeta = dy.sum(axis=axes)  # (C,)
    return dx, dgamma, dbeta


# --------------------------------------------------------------------------- residual add


def add_forward(*xs: np.ndarray) -> tuple[np.ndarray, int]:
    """``y = x0 + x1 + ...`` of two or more tensors of one shape (no broadcasting): a residual
    block's join and the ``add`` op."""
    if len({x.shape for x in xs}) != 1:
        raise ValueError(f"add: shapes differ, {' vs '.join(str(x.shape) for x in xs)}")
    y = xs[0] + xs[1]
    for x in xs[2:]:
        y = y + x
    return y, len(xs)


def add_backward(dy: np.ndarray, cache: int) -> tuple[np.ndarray, ...]:
    """``dy`` for each of the ``cache`` inputs, as independent arrays (safe to accumulate into in
    place)."""
    return tuple(dy.copy() for _ in range(cache))


# --------------------------------------------------------------------------- concat


def concat_forward(xs: list[np.ndarray], axis: int) -> tuple[np.ndarray, tuple]:
    """The inputs joined along ``axis`` (of the batched array: 1 is an image's channels)."""
    sizes = [x.shape[axis] for x in xs]
    return np.concatenate(xs, axis=axis), (sizes, axis)


def concat_backward(dy: np.ndarray, cache: tuple) -> list[np.ndarray]:
    """``dy`` cut back into the inputs' parts along the axis they were joined on."""
    sizes, axis = cache
    cuts = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(d) for d in np.split(dy, cuts, axis=axis)]


# --------------------------------------------------------------------------- embedding


@dataclass(frozen=True)
class EmbeddingCache:
    ids: np.ndarray  # (N, T) int
    table_shape: tuple[int, int]  # (V, E)
    dtype: np.dtype


def embedding_forward(ids: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, EmbeddingCache]:
    """Table lookup ``y[n, t] = table[ids[n, t]]``: ids int (N, T), table (V, E), y (N, T, E).

    Raises ``ValueError`` naming the first offending id if any id is outside [0, V) (NumPy would
    otherwise wrap negative ids silently), and ``TypeError`` for non-integer ids.
    """
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"embedding ids must be integers, got dtype {ids.dtype}")
    v = table.shape[0]
    bad = (ids < 0) | (ids >= v)
    if bad.any():
        raise ValueError(f"embedding id {int(ids[bad][0])} is out of range [0, {v})")
    y = table[ids]  # (N, T) -> (N, T, E)
    return y, EmbeddingCache(ids=ids, table_shape=table.shape, dtype=table.dtype)


def embedding_backward(dy: np.ndarray, cache: EmbeddingCache) -> np.ndarray:
    """Dense table gradient (V, E): rows of ``dy`` (N, T, E) summed per id (repeats accumulate)."""
    v, e = cache.table_shape
    dtable = np.zeros((v, e), dtype=cache.dtype)
    # (N, T) -> (N*T,) ids and (N, T, E) -> (N*T, E) rows; unbuffered add handles repeated ids
    np.add.at(dtable, cache.ids.reshape(-1), dy.reshape(-1, e))
    return dtable


# --------------------------------------------------------------------------- softmax cross-entropy


@dataclass(frozen=True)
class SoftmaxCECache:
    probs: np.ndarray  # softmax(logits), (N, K)
    labels: np.ndarray  # (N,) int


def softmax_cross_entropy_forward(
    logits: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, SoftmaxCECache]:
    """Mean softmax cross-entropy: ``mean_n(-log softmax(logits[n])[labels[n]])``.

    ``logits`` (N, K) float, ``labels`` (N,) int in [0, K); or a sequence's logits (N, T, K) with
    a label per position (N, T), the mean over every sample and position (a language model's
    next-token loss). Uses the stable log-sum-exp (the row maximum is subtracted first). Returns
    the loss as a 0-d array of the logits' dtype.
    """
    labels = np.asarray(labels)
    if logits.ndim < 2 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"softmax CE: logits {logits.shape} / labels {labels.shape} mismatch")
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"softmax CE labels must be integers, got dtype {labels.dtype}")
    k = logits.shape[-1]
    if ((labels < 0) | (labels >= k)).any():
        raise ValueError(f"softmax CE labels must be in [0, {k})")
    flat, flat_labels = logits.reshape(-1, k), labels.reshape(-1)  # (N[*T], K), (N[*T],)
    n = flat.shape[0]
    shifted = flat - flat.max(axis=1, keepdims=True)  # (N, K), row max is 0
    lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))  # (N, 1)
    logp = shifted - lse  # (N, K) log-softmax
    loss = np.asarray(-logp[np.arange(n), flat_labels].mean(), dtype=logits.dtype)  # 0-d
    return loss, SoftmaxCECache(probs=np.exp(logp).reshape(logits.shape), labels=labels)


def softmax_cross_entropy_backward(cache: SoftmaxCECache, dloss: float = 1.0) -> np.ndarray:
    """``dlogits = (softmax(logits) - onehot(labels)) / N * dloss``, the logits' shape (N is
    every row: samples times positions for a sequence)."""
    k = cache.probs.shape[-1]
    d = cache.probs.reshape(-1, k).copy()  # (N[*T], K)
    n = d.shape[0]
    d[np.arange(n), cache.labels.reshape(-1)] -= 1
    return (d / n * np.asarray(dloss, dtype=d.dtype)).reshape(cache.probs.shape)
