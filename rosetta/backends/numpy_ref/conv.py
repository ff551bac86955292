"""Spatial ops of the NumPy reference: 2-D convolution, max and average pooling, global average
pooling.

All image tensors are channels-first ``(N, C, H, W)``; conv kernels are ``OIHW``. Padding is
explicit and possibly asymmetric, ``(top, bottom, left, right)``; strides are ``(sh, sw)``. The
output size along each spatial axis is ``(size + lo + hi - k) // s + 1`` (trailing rows/columns
that no window reaches are ignored and receive zero gradient, as in every framework).

Each op has a ``*_forward(...) -> (y, cache)`` and a ``*_backward(dy, cache) -> grads`` side by
side. conv2d is im2col + one matmul: ``sliding_window_view`` gives a strided view of all windows
(of a channels-last copy of the input, so that the patch copy moves contiguous runs of channels)
and one matrix product contracts it with the kernel; backward scatters patch gradients back by
looping over the (few) kernel positions, never over pixels. Max and average pooling use the same
window view in channels-first layout. Every function returns arrays of the input dtype (float32
in, float32 out); all float inputs of one call must share that dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = [
    "Conv2dCache",
    "MaxPool2dCache",
    "GlobalAvgPoolCache",
    "conv2d_forward",
    "conv2d_backward",
    "grouped_conv2d_forward",
    "grouped_conv2d_backward",
    "maxpool2d_forward",
    "maxpool2d_backward",
    "AvgPool2dCache",
    "avgpool2d_forward",
    "avgpool2d_backward",
    "global_avgpool_forward",
    "global_avgpool_backward",
]


# --------------------------------------------------------------------------- helpers


def _out_size(size: int, k: int, s: int, lo: int, hi: int) -> int:
    return (size + lo + hi - k) // s + 1


def _pad(x: np.ndarray, padding: tuple[int, int, int, int], value: float) -> np.ndarray:
    """Pad the two spatial axes of (N, C, H, W) by (top, bottom, left, right) with ``value``."""
    top, bottom, left, right = padding
    if top == bottom == left == right == 0:
        return x
    # (N, C, H, W) -> (N, C, H + top + bottom, W + left + right), dtype kept
    return np.pad(
        x, ((0, 0), (0, 0), (top, bottom), (left, right)), mode="constant", constant_values=value
    )


def _windows(
    xp: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], out_hw: tuple[int, int]
) -> np.ndarray:
    """Read-only strided view of every window of padded ``xp``: (N, C, Ho, Wo, KH, KW)."""
    kh, kw = kernel
    sh, sw = stride
    ho, wo = out_hw
    # (N, C, Hp, Wp) -> (N, C, Hp - KH + 1, Wp - KW + 1, KH, KW): all stride-1 windows (a view)
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))
    # keep every sh-th / sw-th window start -> (N, C, Ho, Wo, KH, KW)
    return win[:, :, : sh * (ho - 1) + 1 : sh, : sw * (wo - 1) + 1 : sw]


def _check_geometry(
    op: str,
    x_shape: tuple[int, ...],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
) -> tuple[int, int]:
    if len(x_shape) != 4:
        raise ValueError(f"{op} expects an (N, C, H, W) input, got shape {x_shape}")
    if len(stride) != 2 or min(stride) < 1:
        raise ValueError(f"{op} stride must be two positive ints, got {stride}")
    if len(padding) != 4 or min(padding) < 0:
        raise ValueError(f"{op} padding must be four non-negative ints, got {padding}")
    _, _, h, w = x_shape
    top, bottom, left, right = padding
    ho = _out_size(h, kernel[0], stride[0], top, bottom)
    wo = _out_size(w, kernel[1], stride[1], left, right)
    if ho < 1 or wo < 1:
        raise ValueError(f"{op}: kernel {kernel} does not fit input {x_shape} padded {padding}")
    return ho, wo


def _scatter_windows(
    dwin: np.ndarray,
    padded_hw: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
) -> np.ndarray:
    """Adjoint of ``_windows`` followed by cropping the padding.

    ``dwin`` is (N, C, Ho, Wo, KH, KW), a gradient per window element; overlapping windows add
    up. Returns the gradient of the unpadded input, (N, C, H, W).
    """
    n, c, ho, wo, kh, kw = dwin.shape
    sh, sw = stride
    hp, wp = padded_hw
    dxp = np.zeros((n, c, hp, wp), dtype=dwin.dtype)  # (N, C, Hp, Wp)
    for i in range(kh):
        for j in range(kw):
            # window element (i, j) of output (p, q) sits at padded pixel (i + sh*p, j + sw*q)
            dxp[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw] += dwin[
                :, :, :, :, i, j
            ]
    top, bottom, left, right = padding
    # crop (N, C, Hp, Wp) -> (N, C, H, W)
    return np.ascontiguousarray(dxp[:, :, top : hp - bottom, left : wp - right])


# --------------------------------------------------------------------------- conv2d


@dataclass(frozen=True)
class Conv2dCache:
    # zero-padded input, channels-last and contiguous, (N, Hp, Wp, C); for a pointwise
    # convolution (1x1 kernel, no padding) the channels-first input at the strided pixels,
    # (N, C, Ho*Wo)
    xh: np.ndarray
    w: np.ndarray  # kernel, (O, C, KH, KW)
    has_bias: bool
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    out_hw: tuple[int, int]  # (Ho, Wo)
    in_hw: tuple[int, int] = (0, 0)  # (H, W) of the unpadded input

    @property
    def pointwise(self) -> bool:
        """A 1x1 kernel without padding: a matrix product per image, channels-first."""
        return _pointwise(self.w, self.padding)


def _pointwise(w: np.ndarray, padding: tuple[int, int, int, int]) -> bool:
    return w.shape[2:] == (1, 1) and not any(padding)


def _im2col(
    xh: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], out_hw: tuple[int, int]
) -> np.ndarray:
    """Patch matrix of a padded channels-last input ``xh`` (N, Hp, Wp, C).

    Row ``(n, p, q)`` holds the window at output position (p, q), flattened in (KH, KW, C) order:
    returns (N*Ho*Wo, KH*KW*C). Channels-last keeps every copied run of C values contiguous.
    """
    n, _, _, c = xh.shape
    kh, kw = kernel
    sh, sw = stride
    ho, wo = out_hw
    # (N, Hp, Wp, C) -> (N, Hp - KH + 1, Wp - KW + 1, C, KH, KW): all stride-1 windows (a view)
    win = sliding_window_view(xh, (kh, kw), axis=(1, 2))
    # keep every sh-th / sw-th window start -> (N, Ho, Wo, C, KH, KW)
    win = win[:, : sh * (ho - 1) + 1 : sh, : sw * (wo - 1) + 1 : sw]
    # (N, Ho, Wo, C, KH, KW) -> (N, Ho, Wo, KH, KW, C) -> (N*Ho*Wo, KH*KW*C), one copy
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, kh * kw * c)


def _kernel_matrix(w: np.ndarray) -> np.ndarray:
    """OIHW kernel as the matrix matching ``_im2col`` columns: (O, C, KH, KW) -> (O, KH*KW*C)."""
    o = w.shape[0]
    # (O, C, KH, KW) -> (O, KH, KW, C) -> (O, KH*KW*C)
    return w.transpose(0, 2, 3, 1).reshape(o, -1)


def conv2d_forward(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
) -> tuple[np.ndarray, Conv2dCache]:
    """2-D cross-correlation (what every DL framework calls convolution), no dilation, no groups.

    ``x`` is (N, C, H, W), ``w`` is (O, C, KH, KW) ("OIHW"), ``b`` is (O,) or None, ``stride`` is
    (sh, sw) and ``padding`` is explicit zero padding (top, bottom, left, right). Returns ``y`` of
    shape (N, O, Ho, Wo) with Ho = (H + top + bottom - KH) // sh + 1 (same for Wo) and
    ``y[n, o, p, q] = b[o] + sum_{c, i, j} w[o, c, i, j] * xpad[n, c, sh*p + i, sw*q + j]``.
    Internally the input is moved to channels-last once so that im2col copies contiguous runs;
    a pointwise kernel (1x1, no padding) is one matrix product per image, channels-first as given.
    """
    stride = tuple(stride)
    padding = tuple(padding)
    if w.ndim != 4 or w.shape[1] != x.shape[1]:
        raise ValueError(f"conv2d kernel {w.shape} does not match input {x.shape} (OIHW)")
    o, _, kh, kw = w.shape
    ho, wo = _check_geometry("conv2d", x.shape, (kh, kw), stride, padding)
    if b is not None and b.shape != (o,):
        raise ValueError(f"conv2d bias shape {b.shape} != ({o},)")
    n = x.shape[0]
    if _pointwise(w, padding):
        return _pointwise_forward(x, w, b, stride, (ho, wo))
    # (N, C, H, W) -> (N, C, Hp, Wp) -> (N, Hp, Wp, C), contiguous
    xh = np.ascontiguousarray(_pad(x, padding, 0).transpose(0, 2, 3, 1))
    cols = _im2col(xh, (kh, kw), stride, (ho, wo))  # (N*Ho*Wo, KH*KW*C)
    y = cols @ _kernel_matrix(w).T  # (N*Ho*Wo, KH*KW*C) @ (KH*KW*C, O) -> (N*Ho*Wo, O)
    if b is not None:
        y += b  # broadcast over rows
    # (N*Ho*Wo, O) -> (N, Ho, Wo, O) -> (N, O, Ho, Wo)
    y = np.ascontiguousarray(y.reshape(n, ho, wo, o).transpose(0, 3, 1, 2))
    cache = Conv2dCache(
        xh=xh,
        w=w,
        has_bias=b is not None,
        stride=stride,
        padding=padding,
        out_hw=(ho, wo),
        in_hw=x.shape[2:],
    )
    return y, cache


def conv2d_backward(
    dy: np.ndarray, cache: Conv2dCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients of ``conv2d_forward`` given ``dy`` (N, O, Ho, Wo).

    Returns ``(dx, dw, db)`` with shapes (N, C, H, W), (O, C, KH, KW) and (O,); ``db`` is None
    when the forward had no bias. The patch matrix is rebuilt from the cached padded input
    rather than stored (it is KH*KW times larger). Padded cells receive gradient but are cropped.
    """
    if cache.pointwise:
        return _pointwise_backward(dy, cache)
    xh, w = cache.xh, cache.w
    n, hp, wp, c = xh.shape
    o, _, kh, kw = w.shape
    ho, wo = cache.out_hw
    sh, sw = cache.stride
    # (N, O, Ho, Wo) -> (N, Ho, Wo, O) -> (N*Ho*Wo, O)
    dy2 = dy.transpose(0, 2, 3, 1).reshape(n * ho * wo, o)
    db = dy2.sum(axis=0) if cache.has_bias else None  # (O,)
    cols = _im2col(xh, (kh, kw), cache.stride, (ho, wo))  # (N*Ho*Wo, KH*KW*C)
    dwm = dy2.T @ cols  # (O, N*Ho*Wo) @ (N*Ho*Wo, KH*KW*C) -> (O, KH*KW*C)
    # (O, KH*KW*C) -> (O, KH, KW, C) -> (O, C, KH, KW)
    dw = np.ascontiguousarray(dwm.reshape(o, kh, kw, c).transpose(0, 3, 1, 2))
    # gradient of every patch entry: (N*Ho*Wo, O) @ (O, KH*KW*C) -> (N, Ho, Wo, KH, KW, C)
    dcols = (dy2 @ _kernel_matrix(w)).reshape(n, ho, wo, kh, kw, c)
    # adjoint of im2col: patch entry (i, j) of output (p, q) came from padded pixel
    # (sh*p + i, sw*q + j); overlapping windows add up. One strided add per kernel position.
    dxh = np.zeros((n, hp, wp, c), dtype=dcols.dtype)  # (N, Hp, Wp, C)
    for i in range(kh):
        for j in range(kw):
            dxh[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw] += dcols[
                :, :, :, i, j
            ]
    top, bottom, left, right = cache.padding
    # crop the padding and go back to channels-first: (N, Hp, Wp, C) -> (N, C, H, W)
    dx = dxh[:, top : hp - bottom, left : wp - right].transpose(0, 3, 1, 2)
    return np.ascontiguousarray(dx), dw, db


def _pointwise_forward(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    stride: tuple[int, int],
    out_hw: tuple[int, int],
) -> tuple[np.ndarray, Conv2dCache]:
    """A 1x1 convolution without padding: ``y[n] = W @ x[n]`` over the strided pixels, with no
    layout change and no patch matrix (ResNet's bottlenecks are mostly these)."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    ho, wo = out_hw
    sh, sw = stride
    xs = x if (sh, sw) == (1, 1) else x[:, :, : sh * (ho - 1) + 1 : sh, : sw * (wo - 1) + 1 : sw]
    xs = xs.reshape(n, c, ho * wo)  # (N, C, Ho, Wo) -> (N, C, Ho*Wo): a view when stride 1
    y = np.matmul(w.reshape(o, c), xs)  # (O, C) @ (N, C, Ho*Wo) -> (N, O, Ho*Wo)
    if b is not None:
        y += b[:, None]
    cache = Conv2dCache(
        xh=xs, w=w, has_bias=b is not None, stride=stride, padding=(0, 0, 0, 0),
        out_hw=out_hw, in_hw=(h, wd),
    )  # fmt: skip
    return y.reshape(n, o, ho, wo), cache  # (N, O, Ho*Wo) -> (N, O, Ho, Wo)


def _pointwise_backward(
    dy: np.ndarray, cache: Conv2dCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients of :func:`_pointwise_forward`: ``dW = sum_n dy[n] x[n]^T``, ``dx[n] = W^T dy[n]``
    at the strided pixels (zero elsewhere)."""
    xs, w = cache.xh, cache.w
    n, c, _ = xs.shape
    o = w.shape[0]
    ho, wo = cache.out_hw
    h, wd = cache.in_hw
    sh, sw = cache.stride
    dy3 = dy.reshape(n, o, ho * wo)  # (N, O, Ho, Wo) -> (N, O, Ho*Wo)
    db = dy3.sum(axis=(0, 2)) if cache.has_bias else None  # (O,)
    # sum over images and pixels: (N, O, P) x (N, C, P) -> (O, C) -> (O, C, 1, 1)
    dw = np.tensordot(dy3, xs, axes=([0, 2], [0, 2])).reshape(w.shape)
    dxs = np.matmul(w.reshape(o, c).T, dy3)  # (C, O) @ (N, O, Ho*Wo) -> (N, C, Ho*Wo)
    dxs = dxs.reshape(n, c, ho, wo)  # (N, C, Ho*Wo) -> (N, C, Ho, Wo)
    if (sh, sw) == (1, 1):
        return dxs, dw, db
    dx = np.zeros((n, c, h, wd), dtype=dxs.dtype)
    dx[:, :, : sh * (ho - 1) + 1 : sh, : sw * (wo - 1) + 1 : sw] = dxs
    return dx, dw, db


def grouped_conv2d_forward(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    groups: int,
) -> tuple[np.ndarray, tuple[Conv2dCache, ...]]:
    """``groups`` independent convolutions side by side (``groups`` = channels: depthwise).

    The C input channels and the O outputs are split into ``groups`` runs of C/groups and
    O/groups; output run g reads input run g alone, with kernel rows g*O/groups ... of ``w``
    (O, C/groups, KH, KW). Each run is :func:`conv2d_forward`; the outputs are concatenated on
    the channel axis, so ``y[:, o]`` belongs to group ``o // (O / groups)``.
    """
    c, o = x.shape[1], w.shape[0]
    if c % groups or o % groups or w.shape[1] * groups != c:
        raise ValueError(
            f"grouped conv2d: {groups} groups do not fit kernel {w.shape}, input {x.shape}"
        )
    cg, og = c // groups, o // groups
    ys, caches = [], []
    for g in range(groups):
        bg = None if b is None else b[g * og : (g + 1) * og]
        xg = x[:, g * cg : (g + 1) * cg]  # (N, C/groups, H, W)
        y, cache = conv2d_forward(xg, w[g * og : (g + 1) * og], bg, stride, padding)
        ys.append(y)
        caches.append(cache)
    return np.concatenate(ys, axis=1), tuple(caches)  # (N, O, Ho, Wo)


def grouped_conv2d_backward(
    dy: np.ndarray, caches: tuple[Conv2dCache, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients of :func:`grouped_conv2d_forward`: each group's :func:`conv2d_backward` on its
    own outputs' gradient, joined back on the axes they were split on."""
    og = dy.shape[1] // len(caches)
    parts = [conv2d_backward(dy[:, g * og : (g + 1) * og], c) for g, c in enumerate(caches)]
    dx = np.concatenate([p[0] for p in parts], axis=1)  # (N, C, H, W)
    dw = np.concatenate([p[1] for p in parts], axis=0)  # (O, C/groups, KH, KW)
    db = None if parts[0][2] is None else np.concatenate([p[2] for p in parts])
    return dx, dw, db


# --------------------------------------------------------------------------- max pooling


@dataclass(frozen=True)
class MaxPool2dCache:
    arg: np.ndarray  # (N, C, Ho, Wo) int: flat row-major index of the max within its window
    padded_hw: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]


def maxpool2d_forward(
    x: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
) -> tuple[np.ndarray, MaxPool2dCache]:
    """Max pooling over (KH, KW) windows of a (N, C, H, W) input; returns (N, C, Ho, Wo).

    Padding (top, bottom, left, right) is filled with -inf, so padded cells never win; each
    padding must be smaller than the kernel along its axis, so that every window holds at least
    one real cell. Output size as for conv2d. Ties resolve to the first maximum in row-major
    window order, which is where ``maxpool2d_backward`` routes the gradient.
    """
    kernel = tuple(kernel)
    stride = tuple(stride)
    padding = tuple(padding)
    kh, kw = kernel
    ho, wo = _check_geometry("maxpool2d", x.shape, kernel, stride, padding)
    top, bottom, left, right = padding
    if max(top, bottom) >= kh or max(left, right) >= kw:
        raise ValueError(f"maxpool2d padding {padding} must be smaller than the kernel {kernel}")
    xp = _pad(x, padding, -np.inf)  # (N, C, Hp, Wp)
    win = _windows(xp, kernel, stride, (ho, wo))  # (N, C, Ho, Wo, KH, KW)
    n, c = x.shape[:2]
    # (N, C, Ho, Wo, KH, KW) -> (N, C, Ho, Wo, KH*KW), row-major within the window (a copy)
    flat = win.reshape(n, c, ho, wo, kh * kw)
    arg = flat.argmax(axis=-1)  # (N, C, Ho, Wo); argmax returns the first maximum on ties
    y = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]  # (N, C, Ho, Wo)
    cache = MaxPool2dCache(
        arg=arg, padded_hw=xp.shape[2:], kernel=kernel, stride=stride, padding=padding
    )
    return y, cache


def maxpool2d_backward(dy: np.ndarray, cache: MaxPool2dCache) -> np.ndarray:
    """Gradient of ``maxpool2d_forward``: ``dy`` (N, C, Ho, Wo) -> ``dx`` (N, C, H, W).

    Each output's gradient goes to the arg-max cell of its window (the first one on ties);
    overlapping windows (e.g. kernel 3, stride 2) that pick the same cell accumulate.
    """
    kh, kw = cache.kernel
    # one-hot over window positions: (N, C, Ho, Wo, KH*KW) -> (N, C, Ho, Wo, KH, KW)
    positions = np.arange(kh * kw)
    dwin = (cache.arg[..., None] == positions) * dy[..., None]
    dwin = dwin.reshape(*dy.shape, kh, kw).astype(dy.dtype, copy=False)
    return _scatter_windows(dwin, cache.padded_hw, cache.stride, cache.padding)


# --------------------------------------------------------------------------- average pooling


@dataclass(frozen=True)
class AvgPool2dCache:
    divisor: np.ndarray  # (Ho, Wo) in the input dtype: each window's divisor
    padded_hw: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]


def avgpool2d_divisor(
    hw: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    count_include_pad: bool,
) -> np.ndarray:
    """Each window's divisor, (Ho, Wo) float64: ``kh * kw`` everywhere when ``count_include_pad``,
    else the number of real (unpadded) cells in the window (a sum pooling of ones)."""
    kh, kw = kernel
    ho, wo = _check_geometry("avgpool2d", (1, 1, *hw), kernel, stride, padding)
    if count_include_pad:
        return np.full((ho, wo), float(kh * kw))
    ones = _pad(np.ones((1, 1, *hw)), padding, 0.0)  # (1, 1, Hp, Wp): 1 at real cells
    return _windows(ones, kernel, stride, (ho, wo)).sum(axis=(-2, -1))[0, 0]  # (Ho, Wo)


def avgpool2d_forward(
    x: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    count_include_pad: bool,
) -> tuple[np.ndarray, AvgPool2dCache]:
    """Average pooling over (KH, KW) windows of a (N, C, H, W) input; returns (N, C, Ho, Wo).

    Padding (top, bottom, left, right) is zeros, each smaller than the kernel along its axis
    (every window holds a real cell). Each window's sum is divided by ``kh * kw`` when
    ``count_include_pad`` (PyTorch's and ONNX's flag: padded zeros counted), else by the number
    of real cells in it. Output size as for conv2d.
    """
    kernel = tuple(kernel)
    stride = tuple(stride)
    padding = tuple(padding)
    kh, kw = kernel
    ho, wo = _check_geometry("avgpool2d", x.shape, kernel, stride, padding)
    top, bottom, left, right = padding
    if max(top, bottom) >= kh or max(left, right) >= kw:
        raise ValueError(f"avgpool2d padding {padding} must be smaller than the kernel {kernel}")
    divisor = avgpool2d_divisor(x.shape[2:], kernel, stride, padding, count_include_pad)
    divisor = divisor.astype(x.dtype)  # small integers: exact in any float dtype
    xp = _pad(x, padding, 0.0)  # (N, C, Hp, Wp)
    win = _windows(xp, kernel, stride, (ho, wo))  # (N, C, Ho, Wo, KH, KW)
    y = win.sum(axis=(-2, -1)) / divisor  # (N, C, Ho, Wo), in x's dtype
    cache = AvgPool2dCache(
        divisor=divisor, padded_hw=xp.shape[2:], kernel=kernel, stride=stride, padding=padding
    )
    return y, cache


def avgpool2d_backward(dy: np.ndarray, cache: AvgPool2dCache) -> np.ndarray:
    """Gradient of ``avgpool2d_forward``: ``dy`` (N, C, Ho, Wo) -> ``dx`` (N, C, H, W).

    Each output's gradient divided by its window's divisor reaches every cell of the window
    (padded cells' shares are cropped away); overlapping windows accumulate.
    """
    kh, kw = cache.kernel
    share = dy / cache.divisor  # (N, C, Ho, Wo)
    # (N, C, Ho, Wo) -> (N, C, Ho, Wo, KH, KW): the same share at every window position
    dwin = np.broadcast_to(share[..., None, None], (*dy.shape, kh, kw))
    return _scatter_windows(dwin, cache.padded_hw, cache.stride, cache.padding)


# --------------------------------------------------------------------------- global average pool


@dataclass(frozen=True)
class GlobalAvgPoolCache:
    x_shape: tuple[int, ...]  # (N, C, H, W)


def global_avgpool_forward(x: np.ndarray) -> tuple[np.ndarray, GlobalAvgPoolCache]:
    """Mean over the spatial axes: (N, C, H, W) -> (N, C)."""
    if x.ndim != 4:
        raise ValueError(f"global_avgpool expects an (N, C, H, W) input, got shape {x.shape}")
    y = x.mean(axis=(2, 3))  # (N, C), accumulated in x's dtype
    return y, GlobalAvgPoolCache(x_shape=x.shape)


def global_avgpool_backward(dy: np.ndarray, cache: GlobalAvgPoolCache) -> np.ndarray:
    """Gradient of the spatial mean: ``dy`` (N, C) spread evenly, ``dx`` (N, C, H, W)."""
    n, c, h, w = cache.x_shape
    # (N, C) -> (N, C, 1, 1) -> broadcast (N, C, H, W); dividing by a Python int keeps the dtype
    return np.broadcast_to((dy / (h * w))[:, :, None, None], (n, c, h, w)).copy()
