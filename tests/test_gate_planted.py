"""The gate is tested by planted defects: each classic mistake is caught ("not equivalent") AND
named at its place (the op walking forward, the segment walking back from the loss, or the
optimiser), through the same ``run_gate`` a cell calls, with the float64 gate and localisation on.

The batches contain what real data contains: an all-black image (with the canonical zero biases
every pre-activation of it is exactly 0, where ReLU's gradient convention shows) and pre-padded
reviews.
"""

from __future__ import annotations

import numpy as np
import pytest

from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload
from tests import planted
from tests.conformance.conftest import gate_batch


def _workload(name):
    w = get_workload(name)
    return w.at_image_size(32) if name == "resnet50" else w


def _batch(w):
    x, y = gate_batch(w, n=4, seed=1)
    if w.input.dtype != "int32":
        x[0] = 0.0  # a black image
    return x, y


# defect -> (workload, what the one-line verdict must name)
EXPECTED = {
    "fc1_no_permutation": ("cnn", "forward diverge first at op 13 dense fc1"),
    "gru_zr_swapped": ("gru", "forward diverge first at op 1 gru gru"),
    "adam_eps_in_sqrt": ("gru", "in the optimiser"),
    "adam_keras_eps": ("gru", "in the optimiser"),
    "adamw": ("gru", "in the optimiser"),
    "momentum_0.5": ("cnn", "in the optimiser"),
    "bn_mean_var_swapped": ("resnet50", "forward diverge first at op 1 batchnorm"),
    "relu_half_at_zero": ("cnn", "relu"),
    "kernel_entry_off": ("cnn", "forward (float64) diverge first at op 6 conv2d conv3"),
}


@pytest.mark.parametrize("defect", planted.DEFECTS)
def test_planted_defect_is_caught_and_named(defect):
    name, named = EXPECTED[defect]
    w = _workload(name)
    params = canonical_weights(w, 0)
    x, y = _batch(w)
    build = planted.build(defect)
    model = build(w, params, "float32")
    result = run_gate(model, w, params, x, y if w.task == "train" else None, "float32", build=build)
    assert not result.equivalent, f"{defect} passed the gate: {result.checks}"
    assert named in result.divergence, f"{defect}: {result.divergence}"
    assert "\n" not in result.divergence


def test_a_correct_backend_passes_with_the_same_batches():
    for name in ("cnn", "gru"):
        w = _workload(name)
        params = canonical_weights(w, 0)
        x, y = _batch(w)
        from rosetta.backends import make, numpy_ref

        def build(wl, p, dtype):
            return make(numpy_ref, wl, p, dtype=dtype)

        result = run_gate(build(w, params, "float32"), w, params, x, y, "float32", build=build)
        assert result.equivalent, result.divergence
        assert any(c.what == "params (float64)" for c in result.checks)  # the float64 gate ran
        assert result.drift and all(np.isfinite(e.violation) for e in result.drift)
