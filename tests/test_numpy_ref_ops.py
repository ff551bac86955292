"""Tests of the NumPy reference ops: gradients, forward values, dtypes, edge cases.

Every op is checked four ways:

1. analytic gradients against central finite differences in float64 (``test_gradients``);
2. forward values against an independent naive implementation or known values;
3. dtype preservation in float32, forward and backward (``test_float32_stays_float32``);
4. op-specific behaviour (dropout statistics, pooling ties, embedding range, GRU gate order).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from rosetta.backends.numpy_ref import conv, nn, rnn

# --------------------------------------------------------------------------- gradient checking

FD_EPS = 1e-6
# Tolerance for analytic vs numeric gradients (float64). The central difference has truncation
# error O(eps^2 * f''') ~ 1e-12 relative, and rounding error ~ ulp(L) / eps ~ 1e-16 * |L| / 1e-6,
# i.e. up to ~1e-8 absolute for the |L| ~ 10-100 of these tests (measured worst case: 9e-9 on
# conv2d, relative error <= 4e-7). A correct gradient therefore passes rtol=1e-5 with a wide
# margin plus atol=1e-7 for entries whose true value is ~0, while a wrong or missing term (an
# error of the order of the gradient itself, O(0.1-1) here) fails by orders of magnitude;
# test_gradient_check_catches_a_wrong_gradient shows even a 0.1% error is caught.
GRAD_RTOL = 1e-5
GRAD_ATOL = 1e-7


@dataclass
class Case:
    """One op under test: ``forward(**inputs) -> (y, cache)``, ``backward(dy, cache) -> grads``.

    ``backward`` returns a dict keyed by the names in ``wrt`` (the differentiable inputs).
    """

    forward: Callable[..., tuple[Any, Any]]
    backward: Callable[[Any, Any], dict[str, np.ndarray]]
    inputs: dict[str, Any]
    wrt: tuple[str, ...]


def numeric_grad(case: Case, name: str, r: np.ndarray) -> np.ndarray:
    """Central finite difference of L = sum(r * y) wrt ``case.inputs[name]``, element by element."""
    a = case.inputs[name]
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        old = a[idx]
        a[idx] = old + FD_EPS
        lp = np.sum(r * case.forward(**case.inputs)[0])
        a[idx] = old - FD_EPS
        lm = np.sum(r * case.forward(**case.inputs)[0])
        a[idx] = old
        g[idx] = (lp - lm) / (2 * FD_EPS)
    return g


def distinct(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Values spaced >= 0.05 apart (a shuffled grid): max-pool arg-maxes are stable under FD."""
    size = math.prod(shape)
    return (rng.permutation(size).reshape(shape) * 0.05 - size * 0.025).astype(dtype)


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Normal values with |x| >= 0.1, so ReLU's kink at 0 is never crossed by an FD step."""
    x = rng.standard_normal(shape)
    return (np.sign(x) * (np.abs(x) + 0.1)).astype(dtype)


# --------------------------------------------------------------------------- op cases


def conv_case(rng, dtype, x_shape, w_shape, stride, padding, bias, groups=1) -> Case:
    inputs = {
        "x": rng.standard_normal(x_shape).astype(dtype),
        "w": rng.standard_normal(w_shape).astype(dtype),
        "b": rng.standard_normal(w_shape[0]).astype(dtype) if bias else None,
    }

    def forward(x, w, b):
        if groups > 1:
            return conv.grouped_conv2d_forward(x, w, b, stride, padding, groups)
        return conv.conv2d_forward(x, w, b, stride, padding)

    def backward(dy, cache):
        grads = conv.grouped_conv2d_backward if groups > 1 else conv.conv2d_backward
        dx, dw, db = grads(dy, cache)
        assert (db is None) == (not bias)
        return {"x": dx, "w": dw, "b": db}

    return Case(forward, backward, inputs, ("x", "w", "b") if bias else ("x", "w"))


def maxpool_case(rng, dtype, x_shape, kernel, stride, padding) -> Case:
    def forward(x):
        return conv.maxpool2d_forward(x, kernel, stride, padding)

    def backward(dy, cache):
        return {"x": conv.maxpool2d_backward(dy, cache)}

    return Case(forward, backward, {"x": distinct(rng, x_shape, dtype)}, ("x",))


def avgpool_case(rng, dtype, x_shape, kernel, stride, padding, count_include_pad) -> Case:
    def forward(x):
        return conv.avgpool2d_forward(x, kernel, stride, padding, count_include_pad)

    def backward(dy, cache):
        return {"x": conv.avgpool2d_backward(dy, cache)}

    return Case(forward, backward, {"x": distinct(rng, x_shape, dtype)}, ("x",))


def gap_case(rng, dtype) -> Case:
    return Case(
        conv.global_avgpool_forward,
        lambda dy, c: {"x": conv.global_avgpool_backward(dy, c)},
        {"x": rng.standard_normal((2, 3, 4, 5)).astype(dtype)},
        ("x",),
    )


def relu_case(rng, dtype) -> Case:
    return Case(
        nn.relu_forward,
        lambda dy, c: {"x": nn.relu_backward(dy, c)},
        {"x": away_from_zero(rng, (3, 4, 5), dtype)},
        ("x",),
    )


def sigmoid_case(rng, dtype) -> Case:
    x = rng.standard_normal((3, 4, 5)) * 4  # both tails: |x| up to ~16, where exp(x) alone
    x[0, 0, :2] = (-800.0, 800.0)  # would overflow float64 (and float32 long before)
    return Case(
        nn.sigmoid_forward,
        lambda dy, c: {"x": nn.sigmoid_backward(dy, c)},
        {"x": x.astype(dtype)},
        ("x",),
    )


def dropout_case(rng, dtype) -> Case:
    mask = nn.dropout_mask((4, 6), 0.4, np.random.default_rng(7))

    def forward(x):
        return nn.dropout_forward(x, np.float64(0.4), mask)  # numpy scalar rate must not upcast

    return Case(
        forward,
        lambda dy, c: {"x": nn.dropout_backward(dy, c)},
        {"x": rng.standard_normal((4, 6)).astype(dtype)},
        ("x",),
    )


def flatten_case(rng, dtype) -> Case:
    return Case(
        nn.flatten_forward,
        lambda dy, c: {"x": nn.flatten_backward(dy, c)},
        {"x": rng.standard_normal((2, 3, 2, 4)).astype(dtype)},
        ("x",),
    )


def dense_case(rng, dtype, bias: bool) -> Case:
    inputs = {
        "x": rng.standard_normal((4, 5)).astype(dtype),
        "w": rng.standard_normal((5, 3)).astype(dtype),
        "b": rng.standard_normal(3).astype(dtype) if bias else None,
    }

    def backward(dy, cache):
        dx, dw, db = nn.dense_backward(dy, cache)
        return {"x": dx, "w": dw, "b": db}

    return Case(nn.dense_forward, backward, inputs, ("x", "w", "b") if bias else ("x", "w"))


def batchnorm_case(rng, dtype, x_shape) -> Case:
    c = x_shape[1]
    inputs = {
        "x": rng.standard_normal(x_shape).astype(dtype),
        "gamma": rng.standard_normal(c).astype(dtype),
        "beta": rng.standard_normal(c).astype(dtype),
        "mean": rng.standard_normal(c).astype(dtype),
        "var": rng.uniform(0.5, 2.0, c).astype(dtype),
    }

    def forward(x, gamma, beta, mean, var):
        return nn.batchnorm_forward(x, gamma, beta, mean, var, np.float64(1e-3))

    def backward(dy, cache):
        dx, dgamma, dbeta = nn.batchnorm_backward(dy, cache)
        return {"x": dx, "gamma": dgamma, "beta": dbeta}

    return Case(forward, backward, inputs, ("x", "gamma", "beta"))


def add_case(rng, dtype, n: int = 2) -> Case:
    names = ("a", "b", "c")[:n]

    def backward(dy, cache):
        return dict(zip(names, nn.add_backward(dy, cache), strict=True))

    inputs = {k: rng.standard_normal((2, 3, 4)).astype(dtype) for k in names}
    return Case(lambda **xs: nn.add_forward(*xs.values()), backward, inputs, names)


def concat_case(rng, dtype, axis: int) -> Case:
    """Three parts of different sizes along ``axis`` (of the batched array)."""
    shapes = []
    for size in (2, 1, 3):
        shape = [2, 3, 4, 5]
        shape[axis] = size
        shapes.append(tuple(shape))
    inputs = {k: rng.standard_normal(s).astype(dtype) for k, s in zip("abc", shapes, strict=True)}

    def backward(dy, cache):
        return dict(zip("abc", nn.concat_backward(dy, cache), strict=True))

    return Case(
        lambda **xs: nn.concat_forward(list(xs.values()), axis), backward, inputs, ("a", "b", "c")
    )


def graph_case(rng, dtype) -> Case:
    """A wired graph whose input and one inner output are each read twice: ``a = x Wa``,
    ``b = a Wb``, ``y = a + b + x`` (the backward must sum both paths into ``x`` and ``a``)."""
    from rosetta.backends.numpy_ref import layers

    model = layers.graph(
        [layers.dense("a", False), layers.dense("b", False), layers.add()],
        [(-1,), (0,), (0, 1, -1)],
    )
    inputs = {
        "x": rng.standard_normal((4, 5)).astype(dtype),
        "wa": rng.standard_normal((5, 5)).astype(dtype),
        "wb": rng.standard_normal((5, 5)).astype(dtype),
    }

    def forward(x, wa, wb):
        ctx = layers.Ctx({"a.kernel": wa, "b.kernel": wb}, training=True, rng=None)
        y, back = model(x, ctx)
        return y, (back, ctx)

    def backward(dy, cache):
        back, ctx = cache
        dx = back(dy)
        return {"x": dx, "wa": ctx.grads["a.kernel"], "wb": ctx.grads["b.kernel"]}

    return Case(forward, backward, inputs, ("x", "wa", "wb"))


def _elementwise_case(forward, backward, x) -> Case:
    return Case(forward, lambda dy, c: {"x": backward(dy, c)}, {"x": x}, ("x",))


def tanh_case(rng, dtype) -> Case:
    x = (rng.standard_normal((3, 4, 5)) * 2).astype(dtype)
    return _elementwise_case(nn.tanh_forward, nn.tanh_backward, x)


def softmax_case(rng, dtype, shape: tuple[int, ...]) -> Case:
    """Over the last axis of a (N, K) batch, a (N, T, E) sequence or a (N, C, H, W) image
    (each row apart); logits of spread 3, so rows are far from uniform and from one-hot."""
    x = (3 * rng.standard_normal(shape)).astype(dtype)
    return _elementwise_case(nn.softmax_forward, nn.softmax_backward, x)


def hardswish_case(rng, dtype) -> Case:
    """Values on every piece, none within 0.05 of a kink (-3, 3: finite differences)."""
    x = rng.uniform(-6, 6, (4, 6))
    x = np.where(np.abs(np.abs(x) - 3) < 0.05, x + 0.1, x).astype(dtype)
    return _elementwise_case(nn.hardswish_forward, nn.hardswish_backward, x)


def clip_case(rng, dtype) -> Case:
    """Values on both sides of both bounds, none within 0.05 of one."""
    x = rng.uniform(-1, 7, (4, 6))
    x = np.where((np.abs(x) < 0.05) | (np.abs(x - 6) < 0.05), x + 0.1, x).astype(dtype)
    return _elementwise_case(lambda x: nn.clip_forward(x, 0.0, 6.0), nn.clip_backward, x)


def mul_case(rng, dtype) -> Case:
    names = ("a", "b", "c")

    def backward(dy, cache):
        return dict(zip(names, nn.mul_backward(dy, cache), strict=True))

    inputs = {k: rng.standard_normal((2, 3, 4)).astype(dtype) for k in names}
    return Case(lambda **xs: nn.mul_forward(*xs.values()), backward, inputs, names)


def embedding_case(rng, dtype) -> Case:
    ids = np.array([[1, 3, 1, 0], [3, 3, 5, 1]])  # repeated ids; ids 2 and 4 never used
    inputs = {"ids": ids, "table": rng.standard_normal((6, 3)).astype(dtype)}
    return Case(
        nn.embedding_forward,
        lambda dy, c: {"table": nn.embedding_backward(dy, c)},
        inputs,
        ("table",),
    )


def softmax_ce_case(rng, dtype) -> Case:
    inputs = {
        "logits": (3 * rng.standard_normal((5, 4))).astype(dtype),
        "labels": np.array([0, 3, 3, 1, 2]),
    }
    return Case(
        nn.softmax_cross_entropy_forward,
        # the loss is a scalar: dy plays the role of dloss (a numpy float64 must not upcast)
        lambda dy, c: {"logits": nn.softmax_cross_entropy_backward(c, dloss=np.float64(dy))},
        inputs,
        ("logits",),
    )


def gru_case(rng, dtype, n=2, t=4, e=3, h=5) -> Case:
    inputs = {
        "x": rng.standard_normal((n, t, e)).astype(dtype),
        "kernel": (0.5 * rng.standard_normal((e, 3 * h))).astype(dtype),
        "recurrent_kernel": (0.5 * rng.standard_normal((h, 3 * h))).astype(dtype),
        "bias_input": (0.5 * rng.standard_normal(3 * h)).astype(dtype),
        "bias_recurrent": (0.5 * rng.standard_normal(3 * h)).astype(dtype),
    }

    def backward(dy, cache):
        names = ("x", "kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
        return dict(zip(names, rnn.gru_backward(dy, cache), strict=True))

    return Case(rnn.gru_forward, backward, inputs, tuple(inputs))


def lstm_case(rng, dtype, n=2, t=4, e=3, h=5) -> Case:
    inputs = {
        "x": rng.standard_normal((n, t, e)).astype(dtype),
        "kernel": (0.5 * rng.standard_normal((e, 4 * h))).astype(dtype),
        "recurrent_kernel": (0.5 * rng.standard_normal((h, 4 * h))).astype(dtype),
        "bias": (0.5 * rng.standard_normal(4 * h)).astype(dtype),
    }

    def backward(dy, cache):
        names = ("x", "kernel", "recurrent_kernel", "bias")
        return dict(zip(names, rnn.lstm_backward(dy, cache), strict=True))

    return Case(rnn.lstm_forward, backward, inputs, tuple(inputs))


CASES: dict[str, Callable[[np.random.Generator, Any], Case]] = {
    "conv2d_s2_asym_pad_bias": lambda rng, dt: conv_case(
        rng, dt, (2, 3, 7, 6), (4, 3, 3, 2), (2, 2), (1, 0, 2, 1), True
    ),
    "conv2d_s2_asym_pad_nobias": lambda rng, dt: conv_case(
        rng, dt, (2, 3, 7, 6), (4, 3, 3, 2), (2, 2), (1, 0, 2, 1), False
    ),
    "conv2d_s12_k23_nopad": lambda rng, dt: conv_case(
        rng, dt, (2, 2, 5, 7), (3, 2, 2, 3), (1, 2), (0, 0, 0, 0), True
    ),
    "conv2d_1x1_s2": lambda rng, dt: conv_case(
        rng, dt, (2, 3, 5, 5), (4, 3, 1, 1), (2, 2), (0, 0, 0, 0), False
    ),
    # the pointwise path (one matrix product per image): a bias, and strides that differ by axis
    "conv2d_1x1_bias_s12": lambda rng, dt: conv_case(
        rng, dt, (2, 3, 4, 5), (2, 3, 1, 1), (1, 2), (0, 0, 0, 0), True
    ),
    "conv2d_3x3_same": lambda rng, dt: conv_case(
        rng, dt, (1, 2, 4, 4), (2, 2, 3, 3), (1, 1), (1, 1, 1, 1), True
    ),
    "conv2d_depthwise_s2_bias": lambda rng, dt: conv_case(
        rng, dt, (2, 3, 7, 6), (3, 1, 3, 3), (2, 2), (1, 1, 1, 1), True, groups=3
    ),
    "conv2d_depthwise_x2_asym_pad": lambda rng, dt: conv_case(
        rng, dt, (2, 2, 5, 6), (4, 1, 3, 2), (1, 1), (0, 1, 1, 0), False, groups=2
    ),
    "conv2d_grouped_2x2": lambda rng, dt: conv_case(
        rng, dt, (2, 4, 5, 5), (6, 2, 3, 3), (1, 2), (1, 1, 0, 1), True, groups=2
    ),
    "maxpool_2x2_s2": lambda rng, dt: maxpool_case(rng, dt, (2, 3, 6, 6), (2, 2), (2, 2), (0,) * 4),
    "maxpool_3x3_s2_pad1": lambda rng, dt: maxpool_case(
        rng, dt, (2, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1)
    ),
    "maxpool_2x3_s1_asym_pad": lambda rng, dt: maxpool_case(
        rng, dt, (1, 2, 5, 5), (2, 3), (1, 2), (0, 1, 2, 1)
    ),
    "avgpool_2x2_s2": lambda rng, dt: avgpool_case(
        rng, dt, (2, 3, 6, 6), (2, 2), (2, 2), (0,) * 4, True
    ),
    "avgpool_3x3_s2_pad1_counted": lambda rng, dt: avgpool_case(
        rng, dt, (2, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), True
    ),
    "avgpool_3x3_s2_pad1_real_cells": lambda rng, dt: avgpool_case(
        rng, dt, (2, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), False
    ),
    "avgpool_3x2_s1_asym_pad_real_cells": lambda rng, dt: avgpool_case(
        rng, dt, (1, 2, 5, 5), (3, 2), (1, 2), (0, 2, 1, 0), False
    ),
    "avgpool_3x2_s1_asym_pad_counted": lambda rng, dt: avgpool_case(
        rng, dt, (1, 2, 5, 5), (3, 2), (1, 2), (0, 2, 1, 0), True
    ),
    "global_avgpool": gap_case,
    "relu": relu_case,
    "sigmoid": sigmoid_case,
    "dropout": dropout_case,
    "flatten": flatten_case,
    "dense_bias": lambda rng, dt: dense_case(rng, dt, True),
    "dense_nobias": lambda rng, dt: dense_case(rng, dt, False),
    "batchnorm_4d": lambda rng, dt: batchnorm_case(rng, dt, (2, 3, 4, 5)),
    "batchnorm_2d": lambda rng, dt: batchnorm_case(rng, dt, (6, 4)),
    "add": add_case,
    "add_three": lambda rng, dt: add_case(rng, dt, 3),
    "concat_channels": lambda rng, dt: concat_case(rng, dt, 1),
    "concat_width": lambda rng, dt: concat_case(rng, dt, 3),
    "graph_fanout": graph_case,
    "tanh": tanh_case,
    "softmax_2d": lambda rng, dt: softmax_case(rng, dt, (4, 6)),
    "softmax_3d": lambda rng, dt: softmax_case(rng, dt, (2, 3, 5)),
    "softmax_4d": lambda rng, dt: softmax_case(rng, dt, (2, 3, 4, 5)),
    "hardswish": hardswish_case,
    "clip": clip_case,
    "mul_three": mul_case,
    "embedding": embedding_case,
    "softmax_ce": softmax_ce_case,
    "gru": gru_case,
    "lstm": lstm_case,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients(name: str) -> None:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    case = CASES[name](rng, np.float64)
    y, cache = case.forward(**case.inputs)
    r = rng.standard_normal(np.shape(y))  # random projection: L = sum(r * y)
    analytic = case.backward(r, cache)
    for w in case.wrt:
        numeric = numeric_grad(case, w, r)
        assert analytic[w].shape == case.inputs[w].shape, w
        np.testing.assert_allclose(
            analytic[w], numeric, rtol=GRAD_RTOL, atol=GRAD_ATOL, err_msg=f"{name}: d/d{w}"
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_stays_float32(name: str) -> None:
    rng = np.random.default_rng(0)
    case = CASES[name](rng, np.float32)
    y, cache = case.forward(**case.inputs)
    assert np.asarray(y).dtype == np.float32
    dy = np.ones(np.shape(y), dtype=np.float32)
    grads = case.backward(dy, cache)
    for w in case.wrt:
        assert grads[w].dtype == np.float32, f"{name}: d/d{w} is {grads[w].dtype}"
        assert grads[w].shape == case.inputs[w].shape


def test_gradient_check_catches_a_wrong_gradient() -> None:
    """The tolerance is tight enough to fail a gradient that is off by a small factor."""
    rng = np.random.default_rng(1)
    case = CASES["dense_bias"](rng, np.float64)
    y, cache = case.forward(**case.inputs)
    r = rng.standard_normal(y.shape)
    wrong = case.backward(r, cache)["w"] * (1 + 1e-3)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            wrong, numeric_grad(case, "w", r), rtol=GRAD_RTOL, atol=GRAD_ATOL
        )


# --------------------------------------------------------------------------- conv2d forward


def naive_conv2d(x, w, b, stride, padding):
    """Direct definition: loops over every output position, no windows, no tensordot."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    top, bottom, left, right = padding
    xp = np.zeros((n, c, h + top + bottom, wd + left + right), dtype=x.dtype)
    xp[:, :, top : top + h, left : left + wd] = x
    ho = (h + top + bottom - kh) // stride[0] + 1
    wo = (wd + left + right - kw) // stride[1] + 1
    y = np.zeros((n, o, ho, wo), dtype=x.dtype)
    for i in range(n):
        for j in range(o):
            for p in range(ho):
                for q in range(wo):
                    r0, c0 = p * stride[0], q * stride[1]
                    y[i, j, p, q] = np.sum(xp[i, :, r0 : r0 + kh, c0 : c0 + kw] * w[j])
                    if b is not None:
                        y[i, j, p, q] += b[j]
    return y


@pytest.mark.parametrize(
    "x_shape,w_shape,stride,padding,bias",
    [
        ((2, 3, 7, 6), (4, 3, 3, 2), (2, 2), (1, 0, 2, 1), True),
        ((1, 2, 8, 8), (3, 2, 3, 3), (1, 1), (1, 1, 1, 1), False),
        ((2, 3, 9, 9), (2, 3, 7, 7), (2, 2), (3, 3, 3, 3), True),  # ResNet stem shape
        ((1, 1, 5, 4), (2, 1, 5, 4), (3, 3), (0, 0, 0, 0), True),  # kernel = whole input
        ((2, 2, 6, 5), (2, 2, 1, 1), (2, 2), (0, 0, 0, 0), False),
        ((2, 3, 4, 5), (4, 3, 1, 1), (1, 1), (0, 0, 0, 0), True),
        ((1, 2, 5, 5), (3, 2, 1, 1), (1, 1), (1, 0, 0, 1), True),  # padded: the im2col path
    ],
)
def test_conv2d_matches_naive(x_shape, w_shape, stride, padding, bias) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0]) if bias else None
    y, _ = conv.conv2d_forward(x, w, b, stride, padding)
    expected = naive_conv2d(x, w, b, stride, padding)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def test_conv2d_is_cross_correlation() -> None:
    """A one-hot kernel at (0, 0) picks the top-left of each window (no kernel flip)."""
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    w = np.zeros((1, 1, 2, 2))
    w[0, 0, 0, 0] = 1.0
    y, _ = conv.conv2d_forward(x, w, None, (1, 1), (0, 0, 0, 0))
    np.testing.assert_array_equal(y[0, 0], x[0, 0, :3, :3])


@pytest.mark.parametrize("groups, shape", [(3, (2, 3, 5, 6)), (2, (1, 4, 6, 5))])
def test_grouped_conv2d_is_a_conv_with_a_block_diagonal_kernel(groups, shape):
    """A grouped convolution equals an ordinary one whose kernel is zero wherever an output
    would read another group's channels: the definition, independent of the split code."""
    rng = np.random.default_rng(groups)
    c, o = shape[1], 2 * shape[1]
    x, b = rng.standard_normal(shape), rng.standard_normal(o)
    w = rng.standard_normal((o, c // groups, 3, 3))
    full = np.zeros((o, c, 3, 3))
    og, cg = o // groups, c // groups
    for g in range(groups):  # output run g reads input run g alone
        full[g * og : (g + 1) * og, g * cg : (g + 1) * cg] = w[g * og : (g + 1) * og]
    y, _ = conv.grouped_conv2d_forward(x, w, b, (2, 1), (1, 0, 1, 1), groups)
    np.testing.assert_allclose(y, naive_conv2d(x, full, b, (2, 1), (1, 0, 1, 1)), rtol=1e-12)


def test_conv2d_rejects_bad_geometry() -> None:
    with pytest.raises(ValueError):
        conv.conv2d_forward(np.zeros((1, 2, 3, 3)), np.zeros((1, 3, 3, 3)), None, (1, 1), (0,) * 4)
    with pytest.raises(ValueError):
        conv.conv2d_forward(np.zeros((1, 2, 3, 3)), np.zeros((1, 2, 5, 5)), None, (1, 1), (0,) * 4)


# --------------------------------------------------------------------------- max pooling


def naive_maxpool(x, kernel, stride, padding):
    """Loops over output positions; -inf padding; first maximum in row-major order wins."""
    n, c, h, w = x.shape
    top, bottom, left, right = padding
    xp = np.full((n, c, h + top + bottom, w + left + right), -np.inf)
    xp[:, :, top : top + h, left : left + w] = x
    ho = (h + top + bottom - kernel[0]) // stride[0] + 1
    wo = (w + left + right - kernel[1]) // stride[1] + 1
    y = np.zeros((n, c, ho, wo))
    src = np.zeros((n, c, ho, wo, 2), dtype=int)  # padded coordinates of the winner
    for i in range(n):
        for j in range(c):
            for p in range(ho):
                for q in range(wo):
                    r0, c0 = p * stride[0], q * stride[1]
                    win = xp[i, j, r0 : r0 + kernel[0], c0 : c0 + kernel[1]]
                    k = int(np.argmax(win))  # first maximum in row-major order
                    y[i, j, p, q] = win.flat[k]
                    src[i, j, p, q] = (r0 + k // kernel[1], c0 + k % kernel[1])
    return y, src


def naive_maxpool_backward(dy, src, x_shape, padding):
    n, c, h, w = x_shape
    top, bottom, left, right = padding
    dxp = np.zeros((n, c, h + top + bottom, w + left + right))
    for idx in np.ndindex(dy.shape):
        r, s = src[idx]
        dxp[idx[0], idx[1], r, s] += dy[idx]
    return dxp[:, :, top : top + h, left : left + w]


@pytest.mark.parametrize(
    "x_shape,kernel,stride,padding",
    [
        ((2, 3, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0)),
        ((2, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1)),  # overlapping windows, as in ResNet
        ((1, 2, 5, 5), (2, 3), (1, 2), (0, 1, 2, 1)),
        ((1, 1, 4, 4), (3, 3), (1, 1), (2, 2, 2, 2)),  # windows mostly made of padding
    ],
)
@pytest.mark.parametrize("ties", [False, True])
def test_maxpool_matches_naive(x_shape, kernel, stride, padding, ties) -> None:
    rng = np.random.default_rng(4)
    if ties:  # few distinct values: many ties, which must go to the first maximum
        x = rng.integers(0, 3, x_shape).astype(np.float64)
    else:
        x = rng.standard_normal(x_shape)
    y, cache = conv.maxpool2d_forward(x, kernel, stride, padding)
    y_ref, src = naive_maxpool(x, kernel, stride, padding)
    np.testing.assert_array_equal(y, y_ref)
    dy = rng.standard_normal(y.shape)
    dx = conv.maxpool2d_backward(dy, cache)
    np.testing.assert_allclose(
        dx, naive_maxpool_backward(dy, src, x_shape, padding), rtol=1e-14, atol=1e-14
    )


def test_maxpool_ties_go_to_first_and_overlaps_accumulate() -> None:
    x = np.zeros((1, 1, 3, 3))  # all equal: every 2x2/1 window picks its top-left cell
    y, cache = conv.maxpool2d_forward(x, (2, 2), (1, 1), (0, 0, 0, 0))
    dx = conv.maxpool2d_backward(np.ones_like(y), cache)
    np.testing.assert_array_equal(dx[0, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    x = np.zeros((1, 1, 5, 5))
    x[0, 0, 2, 2] = 1.0  # the centre belongs to all four 3x3/2 windows
    y, cache = conv.maxpool2d_forward(x, (3, 3), (2, 2), (0, 0, 0, 0))
    np.testing.assert_array_equal(y[0, 0], np.ones((2, 2)))
    dx = conv.maxpool2d_backward(np.full_like(y, 2.0), cache)
    assert dx[0, 0, 2, 2] == 8.0 and dx.sum() == 8.0


def test_maxpool_padding_never_wins() -> None:
    x = -np.ones((1, 1, 2, 2))  # all negative: zero padding would win, -inf padding must not
    y, _ = conv.maxpool2d_forward(x, (3, 3), (1, 1), (1, 1, 1, 1))
    np.testing.assert_array_equal(y, -np.ones((1, 1, 2, 2)))
    with pytest.raises(ValueError):
        conv.maxpool2d_forward(x, (2, 2), (1, 1), (2, 0, 0, 0))


# --------------------------------------------------------------------------- average pooling


def naive_avgpool(x, kernel, stride, padding, count_include_pad):
    """Loops over output positions and window cells; a window's divisor counts its cells that
    fall inside the image (all of them when ``count_include_pad``)."""
    n, c, h, w = x.shape
    top, bottom, left, right = padding
    ho = (h + top + bottom - kernel[0]) // stride[0] + 1
    wo = (w + left + right - kernel[1]) // stride[1] + 1
    y = np.zeros((n, c, ho, wo))
    for p in range(ho):
        for q in range(wo):
            total, real = np.zeros((n, c)), 0
            for i in range(kernel[0]):
                for j in range(kernel[1]):
                    r, s = p * stride[0] + i - top, q * stride[1] + j - left  # unpadded coords
                    if 0 <= r < h and 0 <= s < w:
                        total += x[:, :, r, s]
                        real += 1
            y[:, :, p, q] = total / (kernel[0] * kernel[1] if count_include_pad else real)
    return y


@pytest.mark.parametrize(
    "x_shape,kernel,stride,padding",
    [
        ((2, 3, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0)),
        ((2, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1)),  # overlapping windows
        ((1, 2, 5, 5), (2, 3), (1, 2), (0, 1, 2, 1)),
        ((1, 1, 4, 4), (3, 3), (1, 1), (2, 2, 2, 2)),  # windows mostly made of padding
        ((1, 2, 7, 6), (3, 3), (2, 1), (0, 1, 2, 0)),  # trailing rows no window reaches
    ],
)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avgpool_matches_naive(x_shape, kernel, stride, padding, count_include_pad) -> None:
    """Forward against the loop definition (1e-14: only summation order differs)."""
    x = np.random.default_rng(5).standard_normal(x_shape)
    y, _ = conv.avgpool2d_forward(x, kernel, stride, padding, count_include_pad)
    y_ref = naive_avgpool(x, kernel, stride, padding, count_include_pad)
    np.testing.assert_allclose(y, y_ref, rtol=1e-14, atol=1e-14)


def test_avgpool_divisors_and_padding_rule() -> None:
    """A constant image: counted zeros pull the border down, real-cell averages stay exact."""
    x = np.ones((1, 1, 3, 3))
    y, _ = conv.avgpool2d_forward(x, (3, 3), (1, 1), (1, 1, 1, 1), False)
    np.testing.assert_array_equal(y, np.ones((1, 1, 3, 3)))
    y, _ = conv.avgpool2d_forward(x, (3, 3), (1, 1), (1, 1, 1, 1), True)
    np.testing.assert_array_equal(y[0, 0], [[4 / 9, 6 / 9, 4 / 9], [6 / 9, 1, 6 / 9],
                                            [4 / 9, 6 / 9, 4 / 9]])  # fmt: skip
    with pytest.raises(ValueError):
        conv.avgpool2d_forward(x, (2, 2), (1, 1), (2, 0, 0, 0), True)


# --------------------------------------------------------------------------- other forwards


def test_global_avgpool_values() -> None:
    x = np.arange(24.0).reshape(1, 2, 3, 4)
    y, _ = conv.global_avgpool_forward(x)
    np.testing.assert_array_equal(y, [[5.5, 17.5]])


def test_relu_values_and_zero_gradient_at_zero() -> None:
    x = np.array([-2.0, -0.0, 0.0, 1.5])
    y, cache = nn.relu_forward(x)
    np.testing.assert_array_equal(y, [0.0, 0.0, 0.0, 1.5])
    np.testing.assert_array_equal(nn.relu_backward(np.ones(4), cache), [0.0, 0.0, 0.0, 1.0])


def test_flatten_order_is_c_h_w() -> None:
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5))
    y, cache = nn.flatten_forward(x)
    assert y.shape == (2, 60)
    for c, h, w in [(0, 0, 0), (1, 2, 3), (2, 3, 4), (2, 0, 1)]:
        assert y[1, c * 20 + h * 5 + w] == x[1, c, h, w]
    np.testing.assert_array_equal(nn.flatten_backward(y, cache), x)


def test_dense_values() -> None:
    rng = np.random.default_rng(6)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(2)
    y, _ = nn.dense_forward(x, w, b)
    expected = [
        [sum(x[n, i] * w[i, o] for i in range(4)) + b[o] for o in range(2)] for n in range(3)
    ]
    np.testing.assert_allclose(y, expected, rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (7, 3)])
def test_batchnorm_values(shape) -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal(shape)
    eps = 1e-5
    # mean 0, var 1, gamma 1, beta 0: identity up to the factor 1/sqrt(1 + eps) ~ 1 - 5e-6
    ones, zeros = np.ones(3), np.zeros(3)
    y, _ = nn.batchnorm_forward(x, ones, zeros, zeros, ones, eps)
    np.testing.assert_allclose(y, x / np.sqrt(1 + eps), rtol=1e-14)
    np.testing.assert_allclose(y, x, rtol=1e-5)
    # general statistics, per channel on axis 1, against the formula written per channel
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    mean, var = rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    y, _ = nn.batchnorm_forward(x, gamma, beta, mean, var, eps)
    for c in range(3):
        expected = (x[:, c] - mean[c]) / math.sqrt(var[c] + eps) * gamma[c] + beta[c]
        np.testing.assert_allclose(y[:, c], expected, rtol=1e-12, atol=1e-14)


def test_add_backward_returns_independent_arrays() -> None:
    a, b = np.ones((2, 3)), np.full((2, 3), 2.0)
    y, cache = nn.add_forward(a, b)
    np.testing.assert_array_equal(y, np.full((2, 3), 3.0))
    da, db = nn.add_backward(y, cache)
    da += 1
    np.testing.assert_array_equal(db, y)
    with pytest.raises(ValueError):
        nn.add_forward(a, np.ones((3, 2)))


# --------------------------------------------------------------------------- softmax CE


def test_softmax_ce_uniform_logits_is_log_k() -> None:
    for k in (2, 10, 1000):
        for dtype in (np.float64, np.float32):
            loss, cache = nn.softmax_cross_entropy_forward(
                np.full((4, k), 3.7, dtype=dtype), np.arange(4) % k
            )
            assert loss.dtype == dtype
            np.testing.assert_allclose(loss, math.log(k), rtol=1e-6)
            d = nn.softmax_cross_entropy_backward(cache)
            np.testing.assert_allclose(d.sum(axis=1), 0, atol=1e-7)  # rows of p - onehot sum to 0


def test_softmax_ce_is_stable_for_large_logits() -> None:
    logits = np.array([[1000.0, 0.0], [0.0, 1000.0]], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is fine
        loss, cache = nn.softmax_cross_entropy_forward(logits, np.array([0, 0]))
    # sample 0 is right with certainty (loss 0), sample 1 wrong by 1000: mean loss 500
    np.testing.assert_allclose(loss, 500.0, rtol=1e-6)
    d = nn.softmax_cross_entropy_backward(cache, dloss=2.0)
    np.testing.assert_allclose(d, [[0.0, 0.0], [-1.0, 1.0]], atol=1e-6)


def test_softmax_ce_matches_direct_formula() -> None:
    rng = np.random.default_rng(9)
    logits, labels = rng.standard_normal((6, 5)), rng.integers(0, 5, 6)
    loss, _ = nn.softmax_cross_entropy_forward(logits, labels)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(loss, -np.mean(np.log(p[np.arange(6), labels])), rtol=1e-12)


# --------------------------------------------------------------------------- softmax


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5), (2, 3, 4, 6)])
def test_softmax_rows_sum_to_one_over_the_last_axis_only(shape) -> None:
    x = 4 * np.random.default_rng(11).standard_normal(shape)
    y, _ = nn.softmax_forward(x)
    assert y.shape == x.shape and (y > 0).all()
    np.testing.assert_allclose(y.sum(axis=-1), 1, rtol=0, atol=1e-15)  # float64 rounding
    direct = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)  # safe: |x| is small here
    np.testing.assert_allclose(y, direct, rtol=1e-13, atol=0)
    if len(shape) > 2:  # another axis is not normalised
        assert np.abs(y.sum(axis=-2) - 1).max() > 0.1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_is_stable_for_large_inputs(dtype) -> None:
    """Inputs of 1000 (exp overflows even float64 at 710) give exact, finite answers, and a
    shift of a whole row changes nothing."""
    x = np.array([[1000.0, 0.0, -1000.0], [1000.0, 1000.0, 999.0], [-1000.0, -1000.0, -1000.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is fine
        y, cache = nn.softmax_forward(x.astype(dtype))
        dx = nn.softmax_backward(np.ones_like(y), cache)
    assert y.dtype == dtype and np.isfinite(y).all()
    e = math.exp(-1)
    expected = [[1, 0, 0], [1 / (2 + e), 1 / (2 + e), e / (2 + e)], [1 / 3, 1 / 3, 1 / 3]]
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(y, expected, rtol=rtol, atol=0)
    np.testing.assert_allclose(dx, 0, atol=rtol)  # a constant dy moves no probability
    np.testing.assert_allclose(nn.softmax_forward(x.astype(dtype) - 500)[0], y, rtol=rtol)


# --------------------------------------------------------------------------- dropout


def test_dropout_eval_mode_is_identity() -> None:
    x = np.random.default_rng(10).standard_normal((3, 4)).astype(np.float32)
    y, cache = nn.dropout_forward(x, 0.5, None)
    np.testing.assert_array_equal(y, x)
    assert y.dtype == np.float32
    dy = np.ones_like(x)
    np.testing.assert_array_equal(nn.dropout_backward(dy, cache), dy)


def test_dropout_train_mode_statistics() -> None:
    rate, n = 0.3, 200_000
    rng = np.random.default_rng(11)
    mask = nn.dropout_mask((n,), rate, rng)
    assert mask.dtype == bool and mask.shape == (n,)
    # The dropped fraction is a mean of n Bernoulli(rate) draws: std sqrt(rate(1-rate)/n) ~ 1e-3.
    # A 5-sigma tolerance would fail a correct implementation with probability < 1e-6 for any
    # seed, but catches a keep/drop swap (0.7) or an off-by-anything rate.
    sigma = math.sqrt(rate * (1 - rate) / n)
    assert abs((~mask).mean() - rate) < 5 * sigma
    x = rng.uniform(0.5, 1.5, n)
    y, cache = nn.dropout_forward(x, rate, mask)
    # dropped entries are exactly zero, kept ones exactly x / (1 - rate)
    assert np.all(y[~mask] == 0)
    np.testing.assert_allclose(y[mask], x[mask] / (1 - rate), rtol=1e-15)
    # mean preserved in expectation: mean(y) - mean(x) has std sqrt(E[x^2] rate/(1-rate) / n)
    sigma_mean = math.sqrt(np.mean(x**2) * rate / (1 - rate) / n)
    assert abs(y.mean() - x.mean()) < 5 * sigma_mean
    dx = nn.dropout_backward(np.ones(n), cache)
    np.testing.assert_allclose(dx, mask / (1 - rate), rtol=1e-15)


def test_dropout_mask_is_reproducible_and_validated() -> None:
    a = nn.dropout_mask((5, 5), 0.5, np.random.default_rng(12))
    b = nn.dropout_mask((5, 5), 0.5, np.random.default_rng(12))
    np.testing.assert_array_equal(a, b)
    assert nn.dropout_mask((100,), 0.0, np.random.default_rng(0)).all()
    with pytest.raises(ValueError):
        nn.dropout_mask((3,), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError):
        nn.dropout_forward(np.ones(3), 0.5, np.ones(4, dtype=bool))


# --------------------------------------------------------------------------- embedding


def test_embedding_values_and_repeated_ids_accumulate() -> None:
    table = np.arange(12.0).reshape(4, 3)
    ids = np.array([[2, 2, 0], [2, 1, 0]])
    y, cache = nn.embedding_forward(ids, table)
    assert y.shape == (2, 3, 3)
    np.testing.assert_array_equal(y[0, 1], table[2])
    dtable = nn.embedding_backward(np.ones((2, 3, 3)), cache)
    np.testing.assert_array_equal(dtable[:, 0], [2, 1, 3, 0])  # counts of ids 0..3


@pytest.mark.parametrize("bad", [-1, 4, 100])
def test_embedding_out_of_range_raises(bad) -> None:
    ids = np.array([[0, 1], [bad, 2]])
    with pytest.raises(ValueError, match=str(bad)):
        nn.embedding_forward(ids, np.zeros((4, 3)))


# --------------------------------------------------------------------------- GRU


def torch_style_gru(x, kernel, recurrent_kernel, bias_input, bias_recurrent):
    """Independent GRU in PyTorch's layout and equations (gates r, z, n; weights (3H, in)).

    The canonical [z | r | h] blocks are reordered to PyTorch's [r | z | n] and transposed, as
    the torch backend must do, then the documented torch.nn.GRU equations are applied per step.
    """
    hsz = recurrent_kernel.shape[0]

    def to_torch(m):  # (in, 3H) canonical [z|r|h] -> (3H, in) torch [r|z|n]
        z, r, h = m[..., :hsz], m[..., hsz : 2 * hsz], m[..., 2 * hsz :]
        return np.concatenate([r, z, h], axis=-1).T

    w_ih, w_hh = to_torch(kernel), to_torch(recurrent_kernel)
    b_ih, b_hh = to_torch(bias_input), to_torch(bias_recurrent)

    def sig(a):
        return 1.0 / (1.0 + np.exp(-a))

    n_batch, t_steps, _ = x.shape
    h = np.zeros((n_batch, hsz))
    for t in range(t_steps):
        gi = x[:, t] @ w_ih.T + b_ih
        gh = h @ w_hh.T + b_hh
        r = sig(gi[:, :hsz] + gh[:, :hsz])
        z = sig(gi[:, hsz : 2 * hsz] + gh[:, hsz : 2 * hsz])
        n = np.tanh(gi[:, 2 * hsz :] + r * gh[:, 2 * hsz :])
        h = (1 - z) * n + z * h
    return h


def test_gru_matches_torch_style_reference() -> None:
    rng = np.random.default_rng(13)
    case = gru_case(rng, np.float64, n=3, t=6, e=4, h=5)
    h_last, _ = case.forward(**case.inputs)
    assert h_last.shape == (3, 5)
    np.testing.assert_allclose(h_last, torch_style_gru(**case.inputs), rtol=1e-12, atol=1e-14)


def test_gru_gate_order_matters() -> None:
    """Swapping the z and r blocks changes the output, so the reference test above pins them."""
    rng = np.random.default_rng(14)
    case = gru_case(rng, np.float64)
    h_last, _ = case.forward(**case.inputs)
    swapped = dict(case.inputs)
    for k in ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent"):
        m = case.inputs[k]
        hsz = m.shape[-1] // 3
        swapped[k] = np.concatenate([m[..., hsz : 2 * hsz], m[..., :hsz], m[..., 2 * hsz :]], -1)
    assert np.abs(torch_style_gru(**swapped) - h_last).max() > 1e-3


def test_gru_float32_large_inputs_do_not_overflow() -> None:
    rng = np.random.default_rng(15)
    case = gru_case(rng, np.float32)
    case.inputs["x"] = (1e4 * case.inputs["x"]).astype(np.float32)  # pre-activations ~ 1e4
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        h_last, cache = case.forward(**case.inputs)
        grads = case.backward(np.ones_like(h_last), cache)
    assert h_last.dtype == np.float32 and np.all(np.isfinite(h_last))
    assert np.all(np.abs(h_last) <= 1)
    assert all(np.all(np.isfinite(g)) for g in grads.values())
    s = nn.logistic(np.array([-1e30, -100, 0, 100, 1e30], dtype=np.float32))
    assert s.dtype == np.float32
    # below log(tiny / 2) = -88.0 the logistic is below float32's smallest normal and comes out as
    # about tiny / 2: within tiny (1.2e-38) of the true value
    np.testing.assert_allclose(s, [0, 3.7e-44, 0.5, 1, 1], atol=np.finfo(np.float32).tiny)
    assert np.all(s[:2] > 0)


def test_sigmoid_is_exact_and_finite_at_both_tails() -> None:
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # exp(-x) alone overflows
        y, cache = nn.sigmoid_forward(x)
        dx = nn.sigmoid_backward(np.ones_like(x), cache)
    moderate = np.abs(x) <= 30
    np.testing.assert_allclose(y[moderate], 1 / (1 + np.exp(-x[moderate])), rtol=1e-15)
    assert 0 < y[0] < np.finfo(np.float64).tiny and y[-1] == 1.0 and y[3] == 0.5
    np.testing.assert_allclose(dx[3], 0.25, rtol=1e-15)
