"""The hand-written NumPy models (``benchmarks/handwritten/numpy_models.py``) compute what the
lowered ``numpy_ref`` models compute: the yardstick ``benchmarks/lowering_numpy_ref.py`` times
the reference against only means something if it is the same function, forward, backward and
optimiser step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rosetta.backends import make
from rosetta.spec import canonical_weights, get_workload
from tests.conformance.conftest import gate_batch


def _pair(name: str, size: int | None = None):
    """The lowered float64 model of ``name`` and the hand-written one holding its weights."""
    from benchmarks.handwritten import numpy_models as hw

    w = get_workload(name)
    w = w.at_image_size(size) if size else w
    model = make("numpy_ref", w, canonical_weights(w), dtype="float64")
    hand = hw.MODELS[name]("float64")
    hw.copy_weights(model, hand)
    return w, model, hand


@pytest.mark.parametrize(
    "name,size",
    [
        ("cnn", None),
        ("gru", None),
        pytest.param("transformer", None, marks=pytest.mark.slow),
        pytest.param("resnet50", 32, marks=pytest.mark.slow),
    ],
)
def test_handwritten_numpy_models_compute_what_the_lowered_ones_compute(name, size):
    """float64, the evaluation forward (a review of padding only in the transformer's batch:
    the spec's all-padding rule): the two order their sums differently (NHWC tensordot against
    the reference's channels-first windows, batch-major against its own GRU loop), ~1e-16 per
    op; measured at most 1.6e-15 of the outputs' scale (ResNet-50's 53 convolutions), hence
    1e-12. A slip (a tap order, a gate block, a missing mask, BatchNorm unfolded) moves them
    O(1)."""
    from benchmarks.handwritten import numpy_models as hw

    w, model, hand = _pair(name, size)
    x, _ = gate_batch(w, n=3)
    if name == "transformer":
        x[1] = 0
    batch = next(iter(model.loader(x, None, np.arange(3), 3)))
    want = model.to_numpy(model.predict(batch))
    got = hw.features_step(hand, x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize(
    "name", ["cnn", "gru", pytest.param("transformer", marks=pytest.mark.slow)]
)
def test_handwritten_numpy_train_steps_are_the_lowered_ones(name):
    """Three steps of the hand-written backward passes and update rules (momentum SGD, Adam,
    AdamW decaying the spec's roles only) against the lowered model's, dropout off, float64:
    the losses to summation order (1e-12), each parameter's change after 3 steps to 1e-8 of its
    largest entry (measured at most 2.3e-12, the transformer's; Adam divides by sqrt(v_hat),
    so a near-zero gradient turns rounding into update noise)."""
    from benchmarks.handwritten import numpy_models as hw

    w, model, hand = _pair(name)
    model.set_dropout(False)
    hand.set_dropout(False)
    x, y = gate_batch(w, n=4)
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    before = model.get_params()
    for _ in range(3):
        want = float(model.train_step(batch))
        np.testing.assert_allclose(hw.train_step(hand, x, y, w.optimizer), want, rtol=1e-12)
    got = hw.canonical(hand)
    for pname, after in model.get_params().items():
        change = after - before[pname]
        assert np.abs(change).max() > 0, pname
        np.testing.assert_allclose(got[pname] - before[pname], change, rtol=0,
                                   atol=1e-8 * np.abs(change).max(), err_msg=pname)  # fmt: skip


@pytest.mark.slow  # three more transformer steps
def test_a_decay_on_every_tensor_is_caught():
    """The train-step check above can fail: AdamW decaying every tensor (the tables, biases and
    LayerNorms too) moves those tensors' change by lr * wd * w, far above its 1e-8 bound."""
    from benchmarks.handwritten import numpy_models as hw

    w, model, hand = _pair("transformer")
    model.set_dropout(False)
    hand.set_dropout(False)
    x, y = gate_batch(w, n=4)
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    before = model.get_params()
    everything = dataclasses.replace(w.optimizer, decay=("table", "gamma", "beta", "bias",
                                                         *w.optimizer.decay))  # fmt: skip
    for _ in range(3):
        model.train_step(batch)
        hw.train_step(hand, x, y, everything)
    got, after = hw.canonical(hand), model.get_params()
    worst = max(np.abs((got[k] - before[k]) - (after[k] - before[k])).max()
                / np.abs(after[k] - before[k]).max() for k in after)  # fmt: skip
    assert worst > 1e-3


def test_copy_weights_refuses_another_workload_s_model_in_one_line():
    from benchmarks.handwritten import numpy_models as hw

    w = get_workload("gru")
    model = make("numpy_ref", w, canonical_weights(w), dtype="float32")
    with pytest.raises(ValueError, match=r"^copy_weights: the cnn parameters differ at \[") as e:
        hw.copy_weights(model, hw.MODELS["cnn"]("float32"))
    assert "\n" not in str(e.value)
