"""The bytes a step must move (the roofline's denominator), against counts made by hand from the
layer tables of rosetta/models/*.yaml."""

from __future__ import annotations

import pytest

from rosetta.spec import get_workload
from rosetta.spec.traffic import step_traffic

# CNN, per sample: conv1 50x32x32, conv2 50x32x32, pool 50x16x16, conv3 100x16x16,
# conv4 100x16x16, pool 100x8x8, fc1 512, fc2 10 (ReLU, dropout, flatten fuse)
CNN_ACT = 51200 + 51200 + 12800 + 25600 + 25600 + 6400 + 512 + 10
CNN_PARAMS = (3 * 50 * 9 + 50) + (50 * 50 * 9 + 50) + (50 * 100 * 9 + 100) + (100 * 100 * 9 + 100)
CNN_PARAMS += 6400 * 512 + 512 + 512 * 10 + 10
# GRU, per sample: embedding 150x125, every step's state 150x100, fc 2; Adam keeps two moments
GRU_ACT = 150 * 125 + 150 * 100 + 2
GRU_PARAMS = 30000 * 125 + (125 + 100) * 300 + 2 * 300 + 100 * 2 + 2


def test_cnn_training_step_by_hand():
    t = step_traffic(get_workload("cnn"), 64)
    assert get_workload("cnn").num_params == CNN_PARAMS
    assert t.weights == 4 * CNN_PARAMS * 4  # read, gradient written and read, update written
    assert t.optimiser == 2 * CNN_PARAMS * 4  # SGD momentum: one buffer, read and written
    assert t.activations == 3 * 64 * CNN_ACT * 4  # written, read by the backward, gradient
    assert t.input == 64 * 3 * 32 * 32 * 4
    assert t.total == t.weights + t.optimiser + t.activations + t.input


def test_gru_counts_every_step_state_and_adams_two_moments():
    t = step_traffic(get_workload("gru"), 64)
    assert t.activations == 3 * 64 * GRU_ACT * 4
    assert t.optimiser == 2 * 2 * GRU_PARAMS * 4
    assert t.input == 64 * 150 * 4


def test_bf16_halves_activations_not_master_weights():
    w = get_workload("cnn")
    f, b = step_traffic(w, 64, "fp32"), step_traffic(w, 64, "bf16")
    assert b.activations * 2 == f.activations
    assert (b.weights, b.optimiser, b.input) == (f.weights, f.optimiser, f.input)
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        step_traffic(w, 64, "fp8")


def test_features_step_reads_weights_once_and_writes_activations_once():
    w = get_workload("resnet50")
    t = step_traffic(w, 32, input_shape=(3, 64, 64))
    assert t.optimiser == 0 and t.weights == (w.num_params + w.num_buffers) * 4
    # the output (2048 features) is the last materialised tensor; the stem conv's 64x32x32 the first
    assert t.activations > 32 * (64 * 32 * 32 + 2048) * 4
    assert step_traffic(w, 32, input_shape=(3, 128, 128)).activations > 3.9 * t.activations
