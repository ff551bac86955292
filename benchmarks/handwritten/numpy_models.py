"""The four workloads written by hand in NumPy, the way a careful NumPy user writes a network
(cs231n's layer functions): each layer a ``*_forward`` returning its output and a cache, and the
``*_backward`` beside it, the model a plain function over a dict of arrays, the optimiser a loop
over that dict. The yardstick of the ``numpy_ref`` backend (``benchmarks/lowering_numpy_ref.py``),
which interprets the spec graph through its own layer table; nothing of that backend is used here.

Layout, chosen for NumPy's BLAS: images are **NHWC** inside (the caller's NCHW batch is
transposed once per step), so a convolution is one ``np.tensordot`` of the zero-padded input's
strided window view, (N, Ho, Wo, C, KH, KW), against the kernel held as (C, KH, KW, O), and its
output (N, Ho, Wo, O) is contiguous with no transpose; a 1x1 convolution is a plain matrix
product. The kernels are rearranged once, when the weights are loaded. Sequences are batch-major
(N, T, E); the GRU's input projection is one GEMM over all steps, the recurrence a loop over
time (inherent). Every array keeps the model's dtype (float32 stays float32: Python scalars are
weak in NumPy 2, and the bias corrections are computed in float64 and rounded once).

The spec's conventions, as ``rosetta/models/*.yaml`` and the reference define them: padding
(top, bottom, left, right); a ReLU's gradient at 0 is 0; max-pooling sends its gradient to the
first maximum of a window in row-major order; inverted dropout with the keep-mask
``rng.random(shape) >= rate``; GRU gates z | r | h with the reset gate applied after the
recurrent product and ``h' = z h + (1 - z) n``; attention's key projection without bias, padding
keys (id 0) excluded and a query row without any real key output as 0; exact (erf) GELU;
LayerNorm with the biased variance; SGD ``buf = m buf + g; w -= lr buf``; Adam as Kingma & Ba's
Algorithm 1, dense; AdamW's decay ``w -= lr wd w`` first, on the spec's decay roles only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.special import erf

Params = dict[str, np.ndarray]


# -- layers: forward and backward side by side ----------------------------------------------------
def conv_forward(x, k, b, stride, pad):
    """x (N, H, W, C), k (C, KH, KW, O) -> (N, Ho, Wo, O); pad = (top, bottom, left, right)."""
    t, bo, le, ri = pad
    xp = np.pad(x, ((0, 0), (t, bo), (le, ri), (0, 0))) if any(pad) else x
    c, kh, kw, _ = k.shape
    if kh == kw == 1:  # a 1x1 convolution: one matrix product over the (strided) pixels
        win = xp[:, ::stride, ::stride, :]
        out = win @ k.reshape(c, -1)
    else:
        win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
        out = np.tensordot(win, k, axes=([3, 4, 5], [0, 1, 2]))  # (N, Ho, Wo, O)
    if b is not None:
        out += b
    return out, (xp.shape, win, stride, pad)


def conv_backward(dout, k, cache):
    """Gradients of :func:`conv_forward`: (dx, dk, db)."""
    xp_shape, win, stride, (t, bo, le, ri) = cache
    c, kh, kw, o = k.shape
    dk = np.tensordot(win, dout, axes=([0, 1, 2], [0, 1, 2]))  # (C, KH, KW, O)
    db = dout.sum(axis=(0, 1, 2))
    dcols = np.tensordot(dout, k, axes=([3], [3]))  # (N, Ho, Wo, C, KH, KW)
    dxp = np.zeros(xp_shape, dout.dtype)
    ho, wo = dout.shape[1:3]
    for i in range(kh):  # scatter each kernel tap back (a loop over the taps, not the batch)
        for j in range(kw):
            dxp[:, i : i + stride * ho : stride, j : j + stride * wo : stride] += dcols[..., i, j]
    h, w = xp_shape[1] - t - bo, xp_shape[2] - le - ri
    return dxp[:, t : t + h, le : le + w], dk, db


def relu_forward(x):
    mask = x > 0
    return x * mask, mask


def relu_backward(dout, mask):
    return dout * mask  # 0 at x == 0, as the spec


def maxpool2_forward(x):
    """2x2, stride 2 (N, H, W, C) -> (N, H/2, W/2, C); the cache is each window's first max."""
    n, h, w, c = x.shape
    win = x.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4)  # (..., C, 2, 2)
    flat = win.reshape(n, h // 2, w // 2, c, 4)  # row-major window: (0,0) (0,1) (1,0) (1,1)
    arg = flat.argmax(axis=-1)  # the first maximum on ties
    return np.take_along_axis(flat, arg[..., None], -1)[..., 0], (x.shape, arg)


def maxpool2_backward(dout, cache):
    (n, h, w, c), arg = cache
    onehot = arg[..., None] == np.arange(4)  # (N, H/2, W/2, C, 4)
    dwin = (onehot * dout[..., None]).reshape(n, h // 2, w // 2, c, 2, 2)
    return dwin.transpose(0, 1, 4, 2, 5, 3).reshape(n, h, w, c)


def maxpool3s2_forward(x):
    """ResNet's stem pooling: 3x3, stride 2, padding 1 of -inf (never selected). Forward only."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    return sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::2, ::2].max(axis=(4, 5))


def dense_forward(x, k, b):
    return x @ k + b, x


def dense_backward(dout, k, x):
    x2, d2 = x.reshape(-1, x.shape[-1]), dout.reshape(-1, dout.shape[-1])
    return dout @ k.T, x2.T @ d2, d2.sum(axis=0)


def dropout_forward(x, rate, rng):
    if rng is None or rate == 0:
        return x, None
    keep = (rng.random(x.shape) >= rate).astype(x.dtype) / x.dtype.type(1 - rate)
    return x * keep, keep


def dropout_backward(dout, keep):
    return dout if keep is None else dout * keep


def softmax_ce(logits, y):
    """Mean softmax cross-entropy and its gradient with respect to the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    n = len(y)
    loss = (np.log(s[:, 0]) - z[np.arange(n), y]).mean()
    d = e / s
    d[np.arange(n), y] -= 1
    return loss, d / d.dtype.type(n)


def layer_norm_forward(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    inv = 1 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + x.dtype.type(eps))
    xhat = xc * inv
    return xhat * g + b, (xhat, inv)


def layer_norm_backward(dout, g, cache):
    xhat, inv = cache
    dg = (dout * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    db = dout.reshape(-1, xhat.shape[-1]).sum(axis=0)
    dxhat = dout * g
    dx = inv * (
        dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True)
    )
    return dx, dg, db


def gelu_forward(x):
    phi = 0.5 * (1 + erf(x / x.dtype.type(math.sqrt(2))))  # scipy's erf keeps the dtype
    return x * phi, (x, phi)


def gelu_backward(dout, cache):
    x, phi = cache
    density = np.exp(-0.5 * x * x) / x.dtype.type(math.sqrt(2 * math.pi))
    return dout * (phi + x * density)


def sigmoid(a):
    return 0.5 * (1 + np.tanh(0.5 * a))  # overflow-free logistic


# -- the CNN (SGD with momentum) ------------------------------------------------------------------
def cnn_forward(p, x, rng=None):
    """VGG-style CNN on NHWC images: the logits, and the backward pass from their gradient."""
    h1, c1 = conv_forward(x, p["conv1.kernel"], p["conv1.bias"], 1, (1, 1, 1, 1))
    h1, r1 = relu_forward(h1)
    h2, c2 = conv_forward(h1, p["conv2.kernel"], p["conv2.bias"], 1, (1, 1, 1, 1))
    h2, m2 = maxpool2_forward(h2)
    h2, r2 = relu_forward(h2)
    h2, k2 = dropout_forward(h2, 0.25, rng)
    h3, c3 = conv_forward(h2, p["conv3.kernel"], p["conv3.bias"], 1, (1, 1, 1, 1))
    h3, r3 = relu_forward(h3)
    h4, c4 = conv_forward(h3, p["conv4.kernel"], p["conv4.bias"], 1, (1, 1, 1, 1))
    h4, m4 = maxpool2_forward(h4)
    h4, r4 = relu_forward(h4)
    h4, k4 = dropout_forward(h4, 0.25, rng)
    n, hh, ww, c = h4.shape
    flat = h4.transpose(0, 3, 1, 2).reshape(n, c * hh * ww)  # the spec's CHW flatten
    f, cf1 = dense_forward(flat, p["fc1.kernel"], p["fc1.bias"])
    f, rf1 = relu_forward(f)
    f, kf1 = dropout_forward(f, 0.5, rng)
    logits, cf2 = dense_forward(f, p["fc2.kernel"], p["fc2.bias"])

    def backward(d):
        g = {}
        d, g["fc2.kernel"], g["fc2.bias"] = dense_backward(d, p["fc2.kernel"], cf2)
        d = relu_backward(dropout_backward(d, kf1), rf1)
        d, g["fc1.kernel"], g["fc1.bias"] = dense_backward(d, p["fc1.kernel"], cf1)
        d = d.reshape(n, c, hh, ww).transpose(0, 2, 3, 1)  # (N, C, H, W) -> NHWC
        d = maxpool2_backward(relu_backward(dropout_backward(d, k4), r4), m4)
        d, g["conv4.kernel"], g["conv4.bias"] = conv_backward(d, p["conv4.kernel"], c4)
        d, g["conv3.kernel"], g["conv3.bias"] = conv_backward(relu_backward(d, r3),
                                                              p["conv3.kernel"], c3)  # fmt: skip
        d = maxpool2_backward(relu_backward(dropout_backward(d, k2), r2), m2)
        d, g["conv2.kernel"], g["conv2.bias"] = conv_backward(d, p["conv2.kernel"], c2)
        _, g["conv1.kernel"], g["conv1.bias"] = conv_backward(relu_backward(d, r1),
                                                              p["conv1.kernel"], c1)  # fmt: skip
        return g

    return logits, backward


# -- the GRU (Adam) -------------------------------------------------------------------------------
def gru_forward(p, ids, rng=None):
    """Embedding, GRU (last step), dense: the logits, and the backward pass."""
    table, k, u = p["embedding.table"], p["gru.kernel"], p["gru.recurrent_kernel"]
    bi, br = p["gru.bias_input"], p["gru.bias_recurrent"]
    n, t = ids.shape
    hsz = u.shape[0]
    emb = table[ids]  # (N, T, E)
    xp = emb @ k + bi  # (N, T, 3H): the input projection of every step in one GEMM
    h = np.zeros((n, hsz), table.dtype)
    hs, zs, rs, ns, hhs = [h], [], [], [], []
    for s in range(t):
        hp = h @ u + br
        z = sigmoid(xp[:, s, :hsz] + hp[:, :hsz])
        r = sigmoid(xp[:, s, hsz : 2 * hsz] + hp[:, hsz : 2 * hsz])
        hh = hp[:, 2 * hsz :]
        cand = np.tanh(xp[:, s, 2 * hsz :] + r * hh)
        h = z * h + (1 - z) * cand
        hs.append(h), zs.append(z), rs.append(r), ns.append(cand), hhs.append(hh)
    logits, c_fc = dense_forward(h, p["fc.kernel"], p["fc.bias"])

    def backward(d):
        g = {}
        dh, g["fc.kernel"], g["fc.bias"] = dense_backward(d, p["fc.kernel"], c_fc)
        dxp = np.empty_like(xp)
        dhp = np.empty((t, n, 3 * hsz), h.dtype)
        for s in reversed(range(t)):
            hprev, z, r, cand, hh = hs[s], zs[s], rs[s], ns[s], hhs[s]
            da_n = dh * (1 - z) * (1 - cand * cand)
            da_z = dh * (hprev - cand) * z * (1 - z)
            da_r = da_n * hh * r * (1 - r)
            dxp[:, s, :hsz], dxp[:, s, hsz : 2 * hsz], dxp[:, s, 2 * hsz :] = da_z, da_r, da_n
            dhp[s, :, :hsz], dhp[s, :, hsz : 2 * hsz] = da_z, da_r
            dhp[s, :, 2 * hsz :] = da_n * r
            dh = dh * z + dhp[s] @ u.T
        hprevs = np.stack(hs[:-1])  # (T, N, H)
        g["gru.recurrent_kernel"] = hprevs.reshape(-1, hsz).T @ dhp.reshape(-1, 3 * hsz)
        g["gru.bias_recurrent"] = dhp.sum(axis=(0, 1))
        g["gru.kernel"] = emb.reshape(-1, emb.shape[-1]).T @ dxp.reshape(-1, 3 * hsz)
        g["gru.bias_input"] = dxp.sum(axis=(0, 1))
        dtable = np.zeros_like(table)
        np.add.at(dtable, ids.ravel(), (dxp @ k.T).reshape(-1, table.shape[1]))
        g["embedding.table"] = dtable
        return g

    return logits, backward


# -- the Transformer encoder (AdamW) --------------------------------------------------------------
def attention_forward(a, p, pre, valid, heads):
    """Multi-head self-attention of a (N, T, E) over the real tokens ``valid`` (N, T)."""
    n, t, e = a.shape
    d = e // heads

    def split(z):  # (N, T, E) -> (N, heads, T, d)
        return z.reshape(n, t, heads, d).transpose(0, 2, 1, 3)

    q = split(a @ p[pre + "query_kernel"] + p[pre + "query_bias"])
    k = split(a @ p[pre + "key_kernel"])
    v = split(a @ p[pre + "value_kernel"] + p[pre + "value_bias"])
    any_key = valid.any(axis=1)[:, None, None, None]  # (N, 1, 1, 1)
    keys = valid[:, None, None, :] | ~any_key  # a row without a real key lets all in, then 0
    s = np.where(keys, q @ k.transpose(0, 1, 3, 2) / a.dtype.type(math.sqrt(d)), -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    prob = s / s.sum(axis=-1, keepdims=True)  # (N, heads, T, T)
    o = (prob @ v) * any_key  # (N, heads, T, d)
    merged = o.transpose(0, 2, 1, 3).reshape(n, t, e)
    out = merged @ p[pre + "output_kernel"] + p[pre + "output_bias"]
    return out, (a, q, k, v, prob, any_key, merged)


def attention_backward(dout, p, pre, cache, g):
    a, q, k, v, prob, any_key, merged = cache
    n, heads, t, d = q.shape
    e = heads * d
    g[pre + "output_kernel"] = merged.reshape(-1, e).T @ dout.reshape(-1, e)
    g[pre + "output_bias"] = dout.sum(axis=(0, 1))
    do = (dout @ p[pre + "output_kernel"].T).reshape(n, t, heads, d).transpose(0, 2, 1, 3)
    do = do * any_key
    dv = prob.transpose(0, 1, 3, 2) @ do
    dprob = do @ v.transpose(0, 1, 3, 2)
    ds = prob * (dprob - (dprob * prob).sum(axis=-1, keepdims=True))
    ds /= a.dtype.type(math.sqrt(d))
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q

    def merge(z):  # (N, heads, T, d) -> (N*T, E)
        return z.transpose(0, 2, 1, 3).reshape(-1, e)

    a2 = a.reshape(-1, e)
    dq, dk, dv = merge(dq), merge(dk), merge(dv)
    g[pre + "query_kernel"], g[pre + "query_bias"] = a2.T @ dq, dq.sum(axis=0)
    g[pre + "key_kernel"] = a2.T @ dk
    g[pre + "value_kernel"], g[pre + "value_bias"] = a2.T @ dv, dv.sum(axis=0)
    da = dq @ p[pre + "query_kernel"].T + dk @ p[pre + "key_kernel"].T
    da += dv @ p[pre + "value_kernel"].T
    return da.reshape(a.shape)


def transformer_forward(p, ids, rng=None, blocks=2, heads=4):
    """Token + position embedding, pre-LN encoder blocks, final LayerNorm, masked mean, dense:
    the logits, and the backward pass."""
    n, t = ids.shape
    valid = ids != 0
    x = p["embedding.table"][ids] + p["position.table"][:t]  # (N, T, E)
    caches = []
    for i in range(blocks):
        pre = f"block.{i}."
        a, c_ln1 = layer_norm_forward(x, p[pre + "ln1.gamma"], p[pre + "ln1.beta"])
        att, c_att = attention_forward(a, p, pre + "attn.", valid, heads)
        att, keep1 = dropout_forward(att, 0.1, rng)
        x = x + att
        b, c_ln2 = layer_norm_forward(x, p[pre + "ln2.gamma"], p[pre + "ln2.beta"])
        f, c_ff1 = dense_forward(b, p[pre + "ff1.kernel"], p[pre + "ff1.bias"])
        f, c_gelu = gelu_forward(f)
        f, c_ff2 = dense_forward(f, p[pre + "ff2.kernel"], p[pre + "ff2.bias"])
        f, keep2 = dropout_forward(f, 0.1, rng)
        x = x + f
        caches.append((c_ln1, c_att, keep1, c_ln2, c_ff1, c_gelu, c_ff2, keep2))
    x, c_lnf = layer_norm_forward(x, p["ln_final.gamma"], p["ln_final.beta"])
    w = valid.astype(x.dtype)[:, :, None]  # (N, T, 1)
    count = np.maximum(w.sum(axis=1), 1)  # (N, 1): a review of padding only pools to 0
    pooled = (x * w).sum(axis=1) / count
    logits, c_fc = dense_forward(pooled, p["fc.kernel"], p["fc.bias"])
    return logits, lambda d: _transformer_backward(d, p, ids, caches, c_lnf, c_fc, w, count)


def _transformer_backward(d, p, ids, caches, c_lnf, c_fc, w, count):
    t, blocks = ids.shape[1], len(caches)
    g = {}
    d, g["fc.kernel"], g["fc.bias"] = dense_backward(d, p["fc.kernel"], c_fc)
    dx = (d / count)[:, None, :] * w  # (N, T, E)
    dx, g["ln_final.gamma"], g["ln_final.beta"] = layer_norm_backward(dx, p["ln_final.gamma"],
                                                                     c_lnf)  # fmt: skip
    for i in reversed(range(blocks)):
        pre = f"block.{i}."
        c_ln1, c_att, keep1, c_ln2, c_ff1, c_gelu, c_ff2, keep2 = caches[i]
        df = dropout_backward(dx, keep2)
        df, g[pre + "ff2.kernel"], g[pre + "ff2.bias"] = dense_backward(df, p[pre + "ff2.kernel"],
                                                                        c_ff2)  # fmt: skip
        df = gelu_backward(df, c_gelu)
        df, g[pre + "ff1.kernel"], g[pre + "ff1.bias"] = dense_backward(df, p[pre + "ff1.kernel"],
                                                                        c_ff1)  # fmt: skip
        db, g[pre + "ln2.gamma"], g[pre + "ln2.beta"] = layer_norm_backward(
            df.reshape(dx.shape), p[pre + "ln2.gamma"], c_ln2)  # fmt: skip
        dx = dx + db
        da = attention_backward(dropout_backward(dx, keep1), p, pre + "attn.", c_att, g)
        da, g[pre + "ln1.gamma"], g[pre + "ln1.beta"] = layer_norm_backward(
            da, p[pre + "ln1.gamma"], c_ln1)  # fmt: skip
        dx = dx + da
    dtable = np.zeros_like(p["embedding.table"])
    np.add.at(dtable, ids.ravel(), dx.reshape(-1, dx.shape[-1]))
    g["embedding.table"] = dtable
    dpos = np.zeros_like(p["position.table"])
    dpos[:t] = dx.sum(axis=0)
    g["position.table"] = dpos
    return g


# -- ResNet-50 features (inference) ---------------------------------------------------------------
def resnet50_features(p, x):
    """ResNet-50 v1.5 to the global average pool, BatchNorm on its moving statistics (each folded
    into a per-channel scale and shift when the weights are loaded)."""

    def conv_bn(h, name, stride, pad):
        h, _ = conv_forward(h, p[name + ".kernel"], None, stride, pad)
        h *= p[name + ".scale"]
        h += p[name + ".shift"]
        return h

    h = np.maximum(conv_bn(x, "conv1", 2, (3, 3, 3, 3)), 0)
    h = maxpool3s2_forward(h)
    for layer, blocks, stride in (("layer1", 3, 1), ("layer2", 4, 2), ("layer3", 6, 2),
                                  ("layer4", 3, 2)):  # fmt: skip
        for i in range(blocks):
            pre, s = f"{layer}.{i}.", stride if i == 0 else 1
            b = np.maximum(conv_bn(h, pre + "conv1", 1, (0, 0, 0, 0)), 0)
            b = np.maximum(conv_bn(b, pre + "conv2", s, (1, 1, 1, 1)), 0)
            b = conv_bn(b, pre + "conv3", 1, (0, 0, 0, 0))
            short = conv_bn(h, pre + "proj", s, (0, 0, 0, 0)) if i == 0 else h
            h = np.maximum(b + short, 0)
    return h.mean(axis=(1, 2))  # (N, 2048)


# -- the models, their weights and steps ----------------------------------------------------------
class Model:
    """A workload's parameters (spec names; conv kernels as (C, KH, KW, O)), its loss function,
    optimiser state and dropout generator."""

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, np.dtype(dtype)
        self.params: Params = {}
        self.state: dict[str, list[np.ndarray]] = {}
        self.step = 0
        self.rng: np.random.Generator | None = np.random.default_rng(0)  # None: dropout off

    def set_dropout(self, enabled: bool) -> None:
        self.rng = np.random.default_rng(0) if enabled else None


def _conv_kernel(k: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(k.transpose(1, 2, 3, 0))  # OIHW -> (C, KH, KW, O)


def copy_weights(lowered, hand: Model) -> None:
    """Load the lowered model's canonical parameters (``get_params()``) into ``hand``: conv
    kernels rearranged, ResNet's BatchNorms folded; every array in the hand model's dtype."""
    from rosetta.spec import get_workload

    got = lowered.get_params()
    want = {p.name: tuple(p.shape) for p in get_workload(hand.name).param_specs}
    bad = sorted(k for k in set(got) | set(want) if tuple(np.shape(got.get(k))) != want.get(k))
    if bad:
        raise ValueError(
            f"copy_weights: the {hand.name} parameters differ at {bad[:3]} (name or shape): "
            "the lowered model is not this workload's"
        )
    dt = hand.dtype
    p = {k: np.array(v, dtype=dt) for k, v in got.items()}
    for k in list(p):
        if p[k].ndim == 4:
            p[k] = _conv_kernel(p[k])
    if hand.name == "resnet50":
        for k in [k for k in p if k.endswith(".gamma")]:
            bn = k[: -len(".gamma")]
            conv = _conv_of(bn)
            scale = p[bn + ".gamma"] / np.sqrt(p[bn + ".var"] + dt.type(1e-5))
            p[conv + ".scale"], p[conv + ".shift"] = (
                scale,
                p[bn + ".beta"] - p[bn + ".mean"] * scale,
            )
    hand.params = p
    hand.state = {k: [np.zeros_like(v), np.zeros_like(v)] for k, v in p.items()}
    hand.step = 0


def _conv_of(bn: str) -> str:
    """The convolution a ResNet BatchNorm follows: bn1 -> conv1, proj_bn -> proj."""
    head, _, last = bn.rpartition(".")
    conv = "proj" if last == "proj_bn" else "conv" + last[len("bn") :]
    return f"{head}.{conv}" if head else conv


MODELS: dict[str, Callable[..., Model]] = {
    name: (lambda dtype="float32", name=name: Model(name, dtype))
    for name in ("cnn", "gru", "resnet50", "transformer")
}
FORWARDS = {"cnn": cnn_forward, "gru": gru_forward, "transformer": transformer_forward}


def _input(hand: Model, x: np.ndarray) -> np.ndarray:
    if x.ndim == 4:  # the caller's NCHW images -> NHWC, in the model's dtype
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1), dtype=hand.dtype)
    return x.astype(np.int64)


def features_step(hand: Model, x: np.ndarray) -> np.ndarray:
    """The evaluation forward (no dropout): ResNet's features, or a training workload's logits."""
    x = _input(hand, x)
    if hand.name == "resnet50":
        return resnet50_features(hand.params, x)
    return FORWARDS[hand.name](hand.params, x, None)[0]


def loss_and_grads(hand: Model, x: np.ndarray, y: np.ndarray):
    """Loss and gradients (spec names; conv kernels as (C, KH, KW, O)) of one batch, dropout as
    ``hand.set_dropout`` says."""
    logits, backward = FORWARDS[hand.name](hand.params, _input(hand, x), hand.rng)
    loss, d = softmax_ce(logits, np.asarray(y, np.int64))
    return loss, backward(d)


def train_step(hand: Model, x: np.ndarray, y: np.ndarray, optimizer) -> float:
    """One step: forward, backward, and the spec's optimiser update; returns the loss."""
    from rosetta.spec.workload import SGD, AdamW

    loss, grads = loss_and_grads(hand, x, y)
    hand.step += 1
    t = hand.step
    lr = hand.dtype.type(optimizer.lr)
    if isinstance(optimizer, SGD):
        m = hand.dtype.type(optimizer.momentum)
        for k, g in grads.items():
            buf = hand.state[k][0]
            buf *= m
            buf += g
            hand.params[k] -= lr * buf
        return float(loss)
    b1, b2 = optimizer.beta1, optimizer.beta2
    c1, c2 = hand.dtype.type(1 - b1**t), hand.dtype.type(1 - b2**t)  # float64, rounded once
    eps, dt = hand.dtype.type(optimizer.eps), hand.dtype.type
    for k, g in grads.items():
        w, (m, v) = hand.params[k], hand.state[k]
        if isinstance(optimizer, AdamW) and optimizer.decays(k):
            w -= lr * dt(optimizer.weight_decay) * w
        m *= dt(b1)
        m += dt(1 - b1) * g
        v *= dt(b2)
        v += dt(1 - b2) * (g * g)
        w -= lr * (m / c1) / (np.sqrt(v / c2) + eps)
    return float(loss)


def canonical(hand: Model) -> Params:
    """The parameters in the spec's layout (conv kernels OIHW), for comparing with the lowered."""
    return {k: (v.transpose(3, 0, 1, 2) if v.ndim == 4 else v) for k, v in hand.params.items()
            if not k.endswith((".scale", ".shift"))}  # fmt: skip
