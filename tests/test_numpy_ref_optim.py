"""Tests of the NumPy reference optimisers (SGD with momentum/Nesterov, Adam).

Expected values are computed by writing the documented recurrences out explicitly, one Python
float (float64) at a time, independently of the vectorised, in-place implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rosetta.backends.numpy_ref.optim import SGD, Adam

W0 = [1.0, -2.0, 0.5]
CURV = [1.0, 3.0, 0.5]  # f(w) = 0.5 * sum(CURV * w^2), so g = CURV * w


def quad_grad(w: np.ndarray) -> np.ndarray:
    return np.asarray(CURV, dtype=w.dtype) * w


def run(opt, steps: int, dtype=np.float64) -> np.ndarray:
    params = {"w": np.array(W0, dtype=dtype)}
    for _ in range(steps):
        opt.step(params, {"w": quad_grad(params["w"])})
    return params["w"]


# --------------------------------------------------------------------------- SGD


def test_sgd_literal_values() -> None:
    """Constant gradient 1, lr 0.1, momentum 0.9: buf = 1, 1.9, 2.71; w = 0.9, 0.71, 0.439."""
    opt = SGD(lr=0.1, momentum=0.9)
    params = {"w": np.array([1.0])}
    for expected in (0.9, 0.71, 0.439):
        opt.step(params, {"w": np.array([1.0])})
        np.testing.assert_allclose(params["w"], [expected], rtol=1e-14)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_three_steps_by_hand(nesterov: bool) -> None:
    lr, mu = 0.1, 0.9
    expected = []
    for w, a in zip(W0, CURV, strict=True):
        buf = 0.0
        for _ in range(3):
            g = a * w
            buf = mu * buf + g
            w = w - lr * (g + mu * buf if nesterov else buf)
        expected.append(w)
    got = run(SGD(lr=lr, momentum=mu, nesterov=nesterov), 3)
    np.testing.assert_allclose(got, expected, rtol=1e-14)


def test_sgd_plain_three_steps_by_hand() -> None:
    lr = 0.2
    expected = []
    for w, a in zip(W0, CURV, strict=True):
        for _ in range(3):
            w = w - lr * a * w
        expected.append(w)
    np.testing.assert_allclose(run(SGD(lr=lr), 3), expected, rtol=1e-14)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_pytorch_form_equals_keras_form(nesterov: bool) -> None:
    """With constant lr, buf = mu*buf + g; w -= lr*buf equals v = mu*v - lr*g; w += v."""
    lr, mu = 0.05, 0.8
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((6, 4))  # gradient sequence, independent of w
    params = {"w": np.zeros(4)}
    opt = SGD(lr=lr, momentum=mu, nesterov=nesterov)
    w_keras, v = np.zeros(4), np.zeros(4)
    for g in grads:
        opt.step(params, {"w": g})
        v = mu * v - lr * g
        w_keras = w_keras + (mu * v - lr * g if nesterov else v)
        # equal up to float rounding (the two forms round different intermediate products)
        np.testing.assert_allclose(params["w"], w_keras, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "opt", [SGD(lr=0.1), SGD(lr=0.1, momentum=0.9), SGD(lr=0.1, momentum=0.9, nesterov=True)]
)
def test_sgd_minimises_a_quadratic(opt) -> None:
    w = run(opt, 300)
    np.testing.assert_allclose(w, 0.0, atol=1e-6)


def test_sgd_rejects_nesterov_without_momentum() -> None:
    with pytest.raises(ValueError):
        SGD(lr=0.1, nesterov=True)


# --------------------------------------------------------------------------- Adam


def test_adam_literal_values() -> None:
    """A constant gradient g gives m_hat = g and v_hat = g^2, so each step is lr*g/(|g|+eps)."""
    opt = Adam(lr=0.1)
    params = {"w": np.array([1.0, 1.0])}
    for k in range(1, 4):
        opt.step(params, {"w": np.array([0.5, -2.0])})
        np.testing.assert_allclose(
            params["w"],
            [1 - k * 0.1 * 0.5 / (0.5 + 1e-8), 1 + k * 0.1 * 2 / (2 + 1e-8)],
            rtol=1e-14,
        )


def test_adam_three_steps_by_hand() -> None:
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    expected = []
    for w, a in zip(W0, CURV, strict=True):
        m = v = 0.0
        for t in range(1, 4):
            g = a * w
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            m_hat = m / (1 - b1**t)
            v_hat = v / (1 - b2**t)
            w = w - lr * m_hat / (math.sqrt(v_hat) + eps)
        expected.append(w)
    got = run(Adam(lr=lr, beta1=b1, beta2=b2, eps=eps), 3)
    np.testing.assert_allclose(got, expected, rtol=1e-13)


def test_adam_eps_placement_differs_from_keras_only_by_eps_scaling() -> None:
    """Keras: lr_t = lr*sqrt(1-b2^t)/(1-b1^t), w -= lr_t*m/(sqrt(v)+eps_k). It equals ours when
    eps = eps_k / sqrt(1 - b2^t); with a constant eps the difference is tiny when |g| >> eps."""
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-7
    rng = np.random.default_rng(1)
    grads = rng.standard_normal((5, 3))
    params = {"w": np.zeros(3)}
    opt = Adam(lr=lr, beta1=b1, beta2=b2, eps=eps)
    w_k, m, v = np.zeros(3), np.zeros(3), np.zeros(3)
    for t, g in enumerate(grads, start=1):
        opt.step(params, {"w": g})
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
        w_k = w_k - lr_t * m / (np.sqrt(v) + eps)
    np.testing.assert_allclose(params["w"], w_k, rtol=1e-4)
    assert not np.array_equal(params["w"], w_k)


def test_adam_minimises_a_quadratic() -> None:
    w = run(Adam(lr=0.05), 2000)
    f = 0.5 * np.sum(np.asarray(CURV) * w**2)
    f0 = 0.5 * np.sum(np.asarray(CURV) * np.asarray(W0) ** 2)
    assert f < 1e-6 * f0
    np.testing.assert_allclose(w, 0.0, atol=1e-2)


# --------------------------------------------------------------------------- shared behaviour

OPTIMISERS = {
    "sgd": lambda: SGD(lr=0.1),
    "sgd_momentum": lambda: SGD(lr=0.1, momentum=0.9),
    "sgd_nesterov": lambda: SGD(lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda: Adam(lr=0.01),
}


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
@pytest.mark.parametrize("grad_dtype", [np.float32, np.float64])
def test_float32_params_stay_float32_in_place(name: str, grad_dtype) -> None:
    opt = OPTIMISERS[name]()
    w = np.array(W0, dtype=np.float32)
    view = w[:]  # an alias must see the in-place update
    params = {"w": w}
    for _ in range(3):
        opt.step(params, {"w": quad_grad(params["w"]).astype(grad_dtype)})
    assert params["w"] is w and params["w"].dtype == np.float32
    np.testing.assert_array_equal(view, w)
    assert not np.array_equal(w, np.array(W0, dtype=np.float32))
    for group in opt.state_dict().values():
        for value in group.values():
            if isinstance(value, np.ndarray):
                assert value.dtype == np.float32
    # float32 arithmetic tracks the float64 trajectory to float32 precision
    ref = run(OPTIMISERS[name](), 3, np.float64)
    np.testing.assert_allclose(w, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_params_without_grad_are_skipped(name: str) -> None:
    opt = OPTIMISERS[name]()
    params = {"w": np.array(W0), "bn.mean": np.array([3.0, 4.0])}
    opt.step(params, {"w": np.ones(3)})
    opt.step(params, {"w": np.ones(3), "bn.mean": None})
    np.testing.assert_array_equal(params["bn.mean"], [3.0, 4.0])
    assert all("bn.mean" not in group for group in opt.state_dict().values())
    with pytest.raises(KeyError):
        opt.step(params, {"typo": np.ones(3)})
    with pytest.raises(ValueError):
        opt.step(params, {"w": np.ones(2)})
