"""Sequence ops of the NumPy reference (the Transformer encoder): LayerNorm, exact GELU, learned
positions, masked multi-head self-attention and masked mean pooling.

Each op has a ``*_forward(...) -> (y, cache)`` and a ``*_backward(dy, cache) -> grads`` side by
side, as in ``nn.py``. Activations are batch-major ``(N, T, E)``; ``valid`` is the boolean
``(N, T)`` mask of real tokens (``ids != 0``), made once from the model's input.

The reference defines the edges (``rosetta/spec/ops.py`` states them):

- softmax is computed stably (the largest unmasked score is subtracted first), so logits of any
  size never overflow; a masked key has weight exactly 0;
- a query whose every key is masked (a sequence of padding only) attends to nothing: its
  weights are all 0 (never 0/0), so its head outputs are 0 and their gradients 0;
- the mean over zero tokens is 0, with zero gradient (the count is clamped to 1);
- GELU is exact: ``0.5 x (1 + erf(x / sqrt 2))``, ``erf`` within 2 ulp of the C library's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "layer_norm_forward",
    "layer_norm_backward",
    "gelu_forward",
    "gelu_backward",
    "position_forward",
    "position_backward",
    "attention_forward",
    "attention_backward",
    "masked_mean_forward",
    "masked_mean_backward",
]

# --------------------------------------------------------------------------- layer norm


@dataclass(frozen=True)
class LayerNormCache:
    xhat: np.ndarray  # (..., E) normalised input
    rstd: np.ndarray  # (..., 1) 1 / sqrt(var + eps)
    gamma: np.ndarray  # (E,)


def layer_norm_forward(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> tuple[np.ndarray, LayerNormCache]:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis, biased variance."""
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)  # divided by E (biased)
    rstd = 1 / np.sqrt(var + x.dtype.type(eps))
    xhat = xc * rstd
    return xhat * gamma + beta, LayerNormCache(xhat, rstd, gamma)


def layer_norm_backward(
    dy: np.ndarray, cache: LayerNormCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dx, dgamma, dbeta)``: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy*gamma."""
    e = cache.xhat.shape[-1]
    rows_dy = dy.reshape(-1, e)
    dgamma = (rows_dy * cache.xhat.reshape(-1, e)).sum(axis=0)  # (E,)
    dbeta = rows_dy.sum(axis=0)  # (E,)
    g = dy * cache.gamma
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = (g * cache.xhat).mean(axis=-1, keepdims=True)
    dx = cache.rstd * (g - mean_g - cache.xhat * mean_gx)
    return dx, dgamma, dbeta


# --------------------------------------------------------------------------- gelu

# erf, vectorised: |x| < SMALL by its Maclaurin series (relative accuracy near 0), SMALL <= |x| <
# TOP by a degree-DEG Taylor polynomial about the centre of each WIDTH-wide piece (its
# coefficients from erf's derivatives at the centre, Hermite polynomials times exp(-c^2), and the
# C library's erf there), 1 beyond TOP (erfc(6) = 2e-17, below half an ulp of 1). Within 2 ulp
# of the C library's erf in float64 (tests/test_numpy_seq.py), 3x faster than calling it per
# element; the float32 GELU rounds the float64 value once.
_SMALL, _TOP, _WIDTH, _DEG = 1 / 16, 6.0, 1 / 8, 11
_MACLAURIN = [
    (-1) ** n / (math.factorial(n) * (2 * n + 1)) * 2 / math.sqrt(math.pi) for n in range(7)
]
_CHUNK = 1 << 15  # elements per pass: the temporaries stay in the cache


def _taylor_piece(c: float) -> list[float]:
    """Coefficients of erf(c + t * WIDTH/2) in powers of t in [-1, 1], up to t**DEG."""
    h = _WIDTH / 2
    herm = [
        1.0,
        2 * c,
    ]  # H_n(c), physicists' Hermite: erf^(k)(c) = 2/sqrt(pi) (-1)^(k-1) H_(k-1)(c) e^(-c^2)
    for n in range(1, _DEG):
        herm.append(2 * c * herm[n] - 2 * n * herm[n - 1])
    g = 2 / math.sqrt(math.pi) * math.exp(-c * c)
    return [math.erf(c)] + [
        g * (-1) ** (k - 1) * herm[k - 1] * h**k / math.factorial(k) for k in range(1, _DEG + 1)
    ]


_STARTS = np.arange(_SMALL, _TOP, _WIDTH)
_PIECES = np.array([_taylor_piece(s + _WIDTH / 2) for s in _STARTS]).T.copy()  # (DEG+1, pieces)


def _erf_nonneg(a: np.ndarray, out: np.ndarray) -> None:
    """``out = erf(a)`` for a 1-D float64 ``a >= 0`` (NaN gives 1; the caller restores it)."""
    z = a * a
    small = np.full_like(a, _MACLAURIN[-1])
    for c in _MACLAURIN[-2::-1]:
        small *= z
        small += c
    small *= a
    inside = np.where(a < _TOP, a, _TOP)  # NaN and beyond TOP: the last piece (replaced below)
    idx = ((inside - _SMALL) * (1 / _WIDTH)).astype(np.intp)
    np.clip(idx, 0, len(_STARTS) - 1, out=idx)
    t = (inside - _STARTS.take(idx)) * (2 / _WIDTH) - 1
    p = _PIECES[_DEG].take(idx)
    for k in range(_DEG - 1, -1, -1):
        p *= t
        p += _PIECES[k].take(idx)
    np.copyto(out, np.where(a < _SMALL, small, np.where(inside < _TOP, p, 1.0)))


# erf for inputs of 4 bytes or fewer (float32, float16, bfloat16), whose answer only needs float32's
# 24 bits: one formula over the whole line, no table look-ups. erf(a) = 1 - exp(-a^2) t P(t) with
# t = 1 / (1 + P_T a), P a degree-P_DEG polynomial fitted at import by least squares to
# erfc(a) e^(a^2) / t at Chebyshev nodes of [0, P_TOP] (the C library's erfc), evaluated in
# float64 (so 1 - e^(-a^2) t P(t) loses nothing that float32 would keep down to a = 1e-4, below
# which erf(a) = 2a/sqrt(pi) to 3e-9) and rounded once: within 1 ulp of the correctly rounded
# float32 erf (tests/test_numpy_ref_seq.py), 3x faster than the float64 path above. |x| is
# clamped at P_TOP: erf(4) = 1 - 1.5e-8 already rounds to 1 in float32.
_P_T, _P_DEG, _P_TOP, _P_TINY = 0.35, 10, 4.0, 1e-4


def _fit_erfc_poly() -> np.ndarray:
    """Coefficients (lowest power first) of P(t) ~ erfc(a) e^(a^2) / t, t = 1 / (1 + P_T a)."""
    a = (1 - np.cos(np.linspace(0, np.pi, 2000))) * (_P_TOP / 2)  # Chebyshev nodes of [0, TOP]
    t = 1 / (1 + _P_T * a)
    target = np.array([math.erfc(v) * math.exp(v * v) for v in a]) / t
    coef, *_ = np.linalg.lstsq(np.vander(t, _P_DEG + 1, increasing=True), target, rcond=None)
    return coef


_P_COEF = _fit_erfc_poly()


def _erf_single(x: np.ndarray) -> np.ndarray:
    """``erf`` for a float32 (or narrower) ``x``, in x's dtype: the formula above, chunked."""
    flat = x.ravel()
    out = np.empty(flat.shape, dtype=x.dtype)
    buf = np.empty((4, min(_CHUNK, flat.size)))  # a, t, P(t), the result: float64 scratch
    for i in range(0, flat.size, _CHUNK):
        xs = flat[i : i + _CHUNK]
        a, t, p, y = buf[:, : xs.size]
        np.abs(xs, out=a)
        np.minimum(a, _P_TOP, out=a)  # NaN stays NaN
        np.multiply(a, _P_T, out=t)
        t += 1
        np.reciprocal(t, out=t)
        p.fill(_P_COEF[-1])
        for c in _P_COEF[-2::-1]:  # Horner
            p *= t
            p += c
        np.multiply(a, a, out=y)
        np.negative(y, out=y)
        np.exp(y, out=y)
        y *= t
        y *= p  # erfc(a)
        np.subtract(1, y, out=y)
        tiny = a < _P_TINY
        if tiny.any():
            y[tiny] = a[tiny] * (2 / math.sqrt(math.pi))
        np.copysign(y, xs, out=y)
        out[i : i + xs.size] = y  # rounded once
    return out.reshape(x.shape)


def erf(x: np.ndarray) -> np.ndarray:
    """``erf`` elementwise in x's dtype: float64 within 2 ulp of the C library's (the pieces
    above), float32 and narrower within 1 ulp of the correctly rounded value (one formula)."""
    x = np.asarray(x)
    if x.dtype.itemsize <= 4 and x.dtype.kind not in "biu" and x.size:
        return _erf_single(x)
    flat = np.abs(x, dtype=np.float64).ravel()
    out = np.empty_like(flat)
    with np.errstate(over="ignore", invalid="ignore"):  # the series at huge |x|: not taken
        for i in range(0, flat.size, _CHUNK):
            _erf_nonneg(flat[i : i + _CHUNK], out[i : i + _CHUNK])
    out[np.isnan(flat)] = np.nan
    return np.copysign(out.reshape(x.shape), x).astype(x.dtype, copy=False)


def gelu_forward(x: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Exact GELU ``x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))``; the cache is ``(x, Phi(x))``."""
    dt = x.dtype.type
    cdf = dt(0.5) * (1 + erf(x / dt(math.sqrt(2.0))))
    return x * cdf, (x, cdf)


def gelu_backward(dy: np.ndarray, cache: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """``dy * (Phi(x) + x * phi(x))``, phi the standard normal density."""
    x, cdf = cache
    dt = x.dtype.type
    pdf = np.exp(dt(-0.5) * x * x) * dt(1 / math.sqrt(2 * math.pi))
    return dy * (cdf + x * pdf)


# --------------------------------------------------------------------------- positions


def position_forward(x: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """``y[n, t] = x[n, t] + table[t]`` for x (N, T, E), table (P, E), T <= P."""
    t = x.shape[1]
    if t > table.shape[0]:
        raise ValueError(f"position embedding: {t} positions, the table has {table.shape[0]}")
    return x + table[:t], table.shape


def position_backward(dy: np.ndarray, table_shape: tuple[int, ...]) -> np.ndarray:
    """The table's gradient (P, E): ``dy`` summed over the batch in rows 0..T-1, 0 beyond."""
    dtable = np.zeros(table_shape, dtype=dy.dtype)
    dtable[: dy.shape[1]] = dy.sum(axis=0)
    return dtable


# --------------------------------------------------------------------------- attention


def masked_softmax(s: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of ``s`` restricted to ``valid`` keys (broadcast), stably.

    The row maximum over valid keys is subtracted first; a masked key gets weight exactly 0; a
    row without any valid key gets all-zero weights (not 0/0)."""
    masked = np.where(valid, s, -np.inf)
    top = masked.max(axis=-1, keepdims=True)  # -inf on a row without a valid key
    top = np.where(np.isfinite(top), top, 0)
    e = np.exp(masked - top)  # exp(-inf) = 0 at masked keys
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)


def causal_mask(t: int) -> np.ndarray:
    """(1, 1, T, T) bool (batch, head, query, key), True where query ``i`` may read key ``j``:
    ``j <= i``."""
    return np.tril(np.ones((t, t), dtype=bool))[None, None]


@dataclass(frozen=True)
class AttentionCache:
    x: np.ndarray  # (N, T, E)
    q: np.ndarray  # (N, H, T, d)
    k: np.ndarray
    v: np.ndarray
    p: np.ndarray  # (N, H, T, T) attention weights
    o: np.ndarray  # (N, T, E) heads concatenated, before the output projection
    weights: tuple[np.ndarray, ...]  # wq, bq, wk, wv, bv, wo, bo


def _split(a: np.ndarray, heads: int) -> np.ndarray:
    n, t, e = a.shape
    return a.reshape(n, t, heads, e // heads).transpose(0, 2, 1, 3)  # (N, T, E) -> (N, H, T, d)


def _merge(a: np.ndarray) -> np.ndarray:
    n, h, t, d = a.shape
    return a.transpose(0, 2, 1, 3).reshape(n, t, h * d)  # (N, H, T, d) -> (N, T, E)


def attention_forward(
    x: np.ndarray,
    valid: np.ndarray,
    weights: tuple[np.ndarray, ...],
    heads: int,
) -> tuple[np.ndarray, AttentionCache]:
    """Multi-head self-attention with a key padding mask: x (N, T, E), valid (N, T) bool (or
    a (1, 1, T, T) query-by-key mask, :func:`causal_mask`), ``weights`` = (wq, bq, wk, wv, bv,
    wo, bo), kernels (E, E) "IO", head-major blocks; the key projection has no bias (the
    softmax would cancel it)."""
    wq, bq, wk, wv, bv, wo, bo = weights
    e = x.shape[-1]
    if e % heads:
        raise ValueError(f"attention: {heads} heads do not divide the width {e}")
    d = e // heads
    q, k, v = (_split(x @ wq + bq, heads), _split(x @ wk, heads), _split(x @ wv + bv, heads))
    s = (q @ k.transpose(0, 1, 3, 2)) / x.dtype.type(math.sqrt(d))  # (N, H, T, T)
    p = masked_softmax(s, valid[:, None, None, :] if valid.ndim == 2 else valid)
    o = _merge(p @ v)  # (N, H, T, d) -> (N, T, E)
    return o @ wo + bo, AttentionCache(x, q, k, v, p, o, weights)


def attention_backward(
    dy: np.ndarray, cache: AttentionCache
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """``(dx, (dwq, dbq, dwk, dwv, dbv, dwo, dbo))`` for ``dy`` (N, T, E)."""
    wq, _, wk, wv, _, wo, _ = cache.weights
    x, q, k, v, p = cache.x, cache.q, cache.k, cache.v, cache.p
    e = x.shape[-1]
    heads, d = q.shape[1], q.shape[3]  # (N, H, T, d)
    rows = x.reshape(-1, e)  # (N*T, E)
    dy_rows = dy.reshape(-1, e)
    dwo = cache.o.reshape(-1, e).T @ dy_rows
    dbo = dy_rows.sum(axis=0)
    do = _split(dy @ wo.T, heads)  # (N, H, T, d)
    dp = do @ v.transpose(0, 1, 3, 2)  # (N, H, T, T)
    dv = p.transpose(0, 1, 3, 2) @ do  # (N, H, T, d)
    # softmax backward: masked keys (and rows without a valid key) have p = 0, hence ds = 0
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) / x.dtype.type(math.sqrt(d))
    dq = ds @ k  # (N, H, T, d)
    dk = ds.transpose(0, 1, 3, 2) @ q
    grads: list[np.ndarray] = []
    dx = np.zeros_like(x)
    for g, w, bias in ((dq, wq, True), (dk, wk, False), (dv, wv, True)):
        g = _merge(g)  # (N, T, E)
        g_rows = g.reshape(-1, e)
        grads += [rows.T @ g_rows, g_rows.sum(axis=0)] if bias else [rows.T @ g_rows]
        dx += g @ w.T
    return dx, (*grads, dwo, dbo)


def cached_attention(
    x: np.ndarray,
    past: tuple[np.ndarray, np.ndarray] | None,
    weights: tuple[np.ndarray, ...],
    heads: int,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Causal self-attention of ``x`` (N, t, E), the positions after the ``P`` already seen,
    whose keys and values ``past`` holds ((N, H, P, d) each; ``None``: none yet). Returns the
    output (N, t, E) and the keys and values of all ``P + t`` positions: new query ``i``, at
    position ``P + i``, reads keys ``j <= P + i``. What :func:`attention_forward` under
    :func:`causal_mask` computes for those rows over the whole sequence (a decoder's KV cache)."""
    wq, bq, wk, wv, bv, wo, bo = weights
    t = x.shape[1]
    d = x.shape[-1] // heads
    q, k, v = (_split(x @ wq + bq, heads), _split(x @ wk, heads), _split(x @ wv + bv, heads))
    if past is not None:
        k, v = np.concatenate([past[0], k], axis=2), np.concatenate([past[1], v], axis=2)
    p = k.shape[2] - t  # positions seen before these
    s = (q @ k.transpose(0, 1, 3, 2)) / x.dtype.type(math.sqrt(d))  # (N, H, t, P + t)
    mask = np.tril(np.ones((t, p + t), dtype=bool), k=p)[None, None]  # key j <= P + i
    o = _merge(masked_softmax(s, mask) @ v)  # (N, H, t, d) -> (N, t, E)
    return o @ wo + bo, (k, v)


# --------------------------------------------------------------------------- masked mean


def masked_mean_forward(x: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, T, E) -> (N, E): the mean over the valid positions; 0 for a row with none. The cache
    is the per-position weight ``valid / max(count, 1)``, (N, T, 1)."""
    count = valid.sum(axis=1, keepdims=True)  # (N, 1)
    weight = (valid / np.maximum(count, 1)).astype(x.dtype)[:, :, None]  # (N, T, 1)
    return (x * weight).sum(axis=1), weight


def masked_mean_backward(dy: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``dx[n, t] = dy[n] * valid[n, t] / max(count[n], 1)``, (N, T, E)."""
    return dy[:, None, :] * weight
