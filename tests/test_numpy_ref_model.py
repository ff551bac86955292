"""The reference backend on the three real specs: whole-model gradients, training, features."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta.backends import make, numpy_ref
from rosetta.spec import canonical_weights, get_workload


def _images(n: int, rng: np.random.Generator, size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Learnable toy images: class k lights up a class-specific 8x8 patch and colour, plus noise."""
    y = rng.integers(0, 10, size=n)
    x = rng.uniform(0, 0.3, size=(n, 3, size, size))
    for i, k in enumerate(y):
        r, c = divmod(int(k), 4)
        x[i, k % 3, r * 8 : r * 8 + 8, c * 8 : c * 8 + 8] += 0.7
    return x.astype(np.float32), y


def _reviews(n: int, rng: np.random.Generator, t: int = 150) -> tuple[np.ndarray, np.ndarray]:
    """Learnable toy token sequences: background ids, plus class-specific ids near the end."""
    y = rng.integers(0, 2, size=n)
    x = rng.integers(3, 30000, size=(n, t))
    for i, k in enumerate(y):
        pos = rng.choice(np.arange(t - 40, t), size=8, replace=False)
        x[i, pos] = 100 + 5 * k + rng.integers(0, 5, size=8)
    return x.astype(np.int32), y


def _loss(model, x, y) -> float:
    """Forward-only loss (the evaluation-mode logits through the reference cross-entropy)."""
    from rosetta.backends.numpy_ref import nn

    return float(nn.softmax_cross_entropy_forward(model.predict_numpy(x), y)[0])


def _fd_check(model, x, y, n_coords: int, rng: np.random.Generator) -> None:
    """Central differences of the loss against loss_and_grads at random coordinates (float64).

    Step eps = 1e-7: the CNN has ~10^5 ReLU inputs per image, so a larger step often straddles a
    kink (measured: at eps = 1e-6 about one coordinate in ten is off by ~1e-4 relative; at 1e-7
    all agree to ~1e-7). Truncation error is ~eps^2, negligible; rounding is ~1e-16 * loss / eps
    ~ 1e-9, so the bound |numeric - analytic| <= 1e-5 |analytic| + 1e-7 catches any wrong term
    (a missing factor or transposition is off by O(|g|)) with room for rounding.
    """
    _, grads = model.loss_and_grads(x, y)
    params = model.get_params()
    eps = 1e-7
    for name, g in grads.items():
        assert g.shape == params[name].shape and g.dtype == np.float64
        flat = rng.choice(g.size, size=min(n_coords, g.size), replace=False)
        for idx in flat:
            pos = np.unravel_index(idx, g.shape)
            losses = []
            for sign in (1, -1):
                p = {k: v.copy() for k, v in params.items()}
                p[name][pos] += sign * eps
                model.set_params(p)
                losses.append(_loss(model, x, y))
            numeric = (losses[0] - losses[1]) / (2 * eps)
            assert abs(numeric - g[pos]) <= 1e-5 * abs(g[pos]) + 1e-7, (name, pos, numeric, g[pos])
    model.set_params(params)


def test_cnn_whole_model_gradients_match_finite_differences():
    w = get_workload("cnn")
    rng = np.random.default_rng(0)
    model = make(numpy_ref, w, canonical_weights(w, 0), dtype="float64")
    x, y = _images(2, rng)
    _fd_check(model, x, y, n_coords=3, rng=rng)


def test_gru_whole_model_gradients_match_finite_differences():
    w = get_workload("gru")
    rng = np.random.default_rng(1)
    model = make(numpy_ref, w, canonical_weights(w, 0), dtype="float64")
    x, y = _reviews(3, rng, t=20)
    # the embedding gradient is dense but non-zero only on the rows of ids present: check those
    _fd_check(model, x, y, n_coords=4, rng=rng)
    _, grads = model.loss_and_grads(x, y)
    used = np.unique(x)
    unused = np.setdiff1d(np.arange(30000), used)
    assert np.all(grads["embedding.table"][unused] == 0)
    assert np.all(np.abs(grads["embedding.table"][used]).sum(axis=1) > 0)


# quick-tier budget (stop 58): the slow tier runs it; the GRU's learning test stays quick
@pytest.mark.slow
def test_cnn_trains_on_learnable_images():
    w = get_workload("cnn")
    rng = np.random.default_rng(0)
    model = make(numpy_ref, w, canonical_weights(w, 0), seed=0)
    x, y = _images(16, rng)  # one small batch, fitted repeatedly: the loss must fall
    losses = [float(model.train_step((x, y))) for _ in range(30)]  # measured: 2.31 -> 0.73
    assert np.isfinite(losses).all()
    assert np.mean(losses[-3:]) < 0.6 * np.mean(losses[:3]), losses
    assert np.mean(model.predict_numpy(x).argmax(axis=1) == y) > 0.5  # chance is 0.1


def test_gru_trains_on_learnable_sequences():
    w = get_workload("gru")
    rng = np.random.default_rng(0)
    model = make(numpy_ref, w, canonical_weights(w, 0), seed=0)
    x, y = _reviews(512, rng, t=60)
    losses = [
        model.train_step((x[i : i + 64], y[i : i + 64]))
        for _ in range(3)
        for i in range(0, 512, 64)
    ]
    assert np.mean(losses[-4:]) < 0.7 * np.mean(losses[:4]), losses
    x_test, y_test = _reviews(256, np.random.default_rng(1), t=60)
    assert np.mean(model.predict_numpy(x_test).argmax(axis=1) == y_test) > 0.8  # chance is 0.5


def test_resnet50_extracts_2048_features_and_float32_agrees_with_float64():
    w = get_workload("resnet50")
    params = canonical_weights(w, 0)
    x = np.random.default_rng(0).uniform(0, 1, size=(2, 3, 64, 64)).astype(np.float32)
    f32 = make(numpy_ref, w, params, dtype="float32").predict_numpy(x)
    f64 = make(numpy_ref, w, params, dtype="float64").predict_numpy(x)
    assert f32.shape == (2, 2048) and f32.dtype == np.float32
    assert np.isfinite(f32).all() and (f32 >= 0).all()  # averages of ReLU outputs
    assert f32.std() > 0.01  # not collapsed
    # the gate's own bound holds between our two precisions
    w.tolerances["float32"].forward.check(f32, f64, "resnet50 features")


@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_float32_matches_float64_within_the_spec_tolerances(name):
    # seed 2 puts a ReLU input of the cnn within float32 rounding of 0 (a kink flip, measured):
    # the case the float32 gradient tolerance is designed for
    w = get_workload(name)
    params = canonical_weights(w, 0)
    rng = np.random.default_rng(2)
    x, y = _images(8, rng) if name == "cnn" else _reviews(8, rng)
    m32 = make(numpy_ref, w, params, dtype="float32")
    m64 = make(numpy_ref, w, params, dtype="float64")
    tol = w.tolerances["float32"]
    tol.forward.check(m32.predict_numpy(x), m64.predict_numpy(x), f"{name} forward")
    l32, g32 = m32.loss_and_grads(x, y)
    l64, g64 = m64.loss_and_grads(x, y)
    tol.loss.check(l32, l64, f"{name} loss")
    for k in g64:
        assert g32[k].dtype == np.float32
        tol.grads.check(g32[k], g64[k], f"{name} grad {k}")
    # k = 3 deterministic optimiser steps (dropout off) on both precisions
    for m in (m32, m64):
        m.deterministic_steps(x, y, 3)
    p32, p64 = m32.get_params(), m64.get_params()
    for k in w.param_specs:
        if k.trainable:
            change32, change64 = p32[k.name] - params[k.name], p64[k.name] - params[k.name]
            tol.params.check(change32, change64, f"{name} change of {k.name} after 3 steps")


def test_dropout_only_in_training_and_params_roundtrip():
    w = get_workload("cnn")
    params = canonical_weights(w, 0)
    model = make(numpy_ref, w, params, seed=0)
    x, y = _images(4, np.random.default_rng(0))
    np.testing.assert_array_equal(
        model.predict_numpy(x), model.predict_numpy(x)
    )  # eval: deterministic
    loss_eval, _ = model.loss_and_grads(x, y)
    assert model.loss_and_grads(x, y)[0] == loss_eval
    before = model.get_params()
    loss_train = float(model.train_step((x, y)))  # dropout on: a different loss than the eval pass
    assert loss_train != loss_eval
    after = model.get_params()
    assert set(after) == set(params)
    assert not np.array_equal(after["fc1.kernel"], before["fc1.kernel"])
    model.set_params(params)
    np.testing.assert_array_equal(model.get_params()["fc1.kernel"], params["fc1.kernel"])


def test_predict_keeps_no_tape_and_computes_the_taped_forward_bit_for_bit():
    """predict runs ``Ctx(backward=False)``: no layer's cache outlives the layers that read its
    output (ResNet-50 at 224 would otherwise hold every activation to the end). The same
    operations run: its output equals a taped forward's exactly, and its backward refuses."""
    from rosetta.backends.numpy_ref import loader
    from rosetta.backends.numpy_ref.layers import Ctx

    w = get_workload("cnn")
    model = make(numpy_ref, w, canonical_weights(w, 0))
    x, _ = _images(4, np.random.default_rng(3))
    taped, _ = model.net(loader.as_input(x, model.dtype), Ctx(model.params, False, None))
    np.testing.assert_array_equal(model.predict_numpy(x), taped)
    _, back = model.net(
        loader.as_input(x, model.dtype), Ctx(model.params, False, None, backward=False)
    )
    with pytest.raises(RuntimeError, match="no tape kept"):
        back(np.ones_like(taped))
