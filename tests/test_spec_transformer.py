"""The Transformer spec: its counts (parameters, FLOPs with attention), the AdamW decay set, and
the bad input its new ops refuse in one line naming the op and the field."""

from __future__ import annotations

import copy

import pytest
import yaml

from rosetta.errors import SpecError
from rosetta.spec import get_workload, load_workload, models_dir, ops


def _raw() -> dict:
    return yaml.safe_load((models_dir() / "transformer.yaml").read_text())


def _load(tmp_path, raw, name="transformer"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_workload(path)


def test_parameter_count_by_hand():
    e, f, t, v = 128, 512, 150, 30000
    block = 2 * 2 * e + 4 * e * e + 3 * e + (e * f + f) + (f * e + e)  # 2 LN, attn, MLP
    want = v * e + t * e + 2 * block + 2 * e + (e * 2 + 2)
    assert get_workload("transformer").num_params == want


def test_same_data_as_the_gru():
    assert get_workload("transformer").dataset == get_workload("gru").dataset
    assert get_workload("transformer").input == get_workload("gru").input


def test_attention_flops_by_hand_and_quadratic_in_length():
    att = ops.Attention(name="a", heads=4, mask="tokens", init={})
    t, e = 150, 128
    macs = 4 * t * e * e + 2 * t * t * e  # q, k, v, o projections; q k^T and p v
    flops = att.flops((t, e))
    assert 2 * macs < flops < 2 * macs * 1.02  # biases and the softmax on top, a little
    # the t^2 terms: doubling T more than doubles the cost
    assert att.flops((2 * t, e)) - 2 * flops == 2 * (2 * t * t * e * 2 + 4 * 4 * t * t)


def test_decay_set_is_the_kernels_only():
    w = get_workload("transformer")
    decayed = {p.name for p in w.param_specs if w.optimizer.decays(p.name)}
    assert decayed == {
        p.name for p in w.param_specs if p.name.endswith("kernel")
    }  # dense and attention kernels
    assert not any(w.optimizer.decays(n) for n in ("embedding.table", "block.0.ln1.gamma"))
    assert len(decayed) == 2 * 6 + 1  # per block 4 attention + 2 MLP kernels, and fc


def _attention(raw: dict) -> dict:
    return raw["blocks"]["encoder"]["layers"][0]["body"][1]


BAD = [
    # (mutation, field in the message, words of the message)
    (lambda r: _attention(r).update(heads=5), "heads", "5 heads do not divide the width 128"),
    (lambda r: r["layers"][1].update(max_len=100), "layers[1].max_len", "more than its table"),
    (lambda r: _attention(r).update(mask="ids"), "mask", "'tokens'"),
    (lambda r: r["layers"][4].update(mask=None), "layers[4].mask", "'tokens'"),
    (lambda r: r["optimizer"].update(decay=[]), "optimizer.decay", "parameter roles"),
]


@pytest.mark.parametrize(("mutate", "field", "words"), BAD)
def test_bad_input_is_one_line_naming_op_and_field(tmp_path, mutate, field, words):
    raw = copy.deepcopy(_raw())
    mutate(raw)
    with pytest.raises(SpecError) as exc:
        _load(tmp_path, raw)
    msg = str(exc.value)
    assert "\n" not in msg
    assert field in msg and words in msg, msg


def test_mask_on_a_non_token_input_is_refused(tmp_path):
    raw = {
        "name": "imgmask",
        "task": "train",
        "dataset": {"name": "cifar10", "classes": 10},
        "input": {"shape": [3, 4, 4], "dtype": "float32"},
        "layers": [
            {"op": "flatten", "order": "CHW"},
            {"op": "dense", "name": "a", "units": 8, "bias": True,
             "init": {"kernel": "glorot_uniform", "bias": "zeros"}},
            {"op": "dense", "name": "b", "units": 10, "bias": True,
             "init": {"kernel": "glorot_uniform", "bias": "zeros"}},
        ],
        "loss": {"op": "softmax_cross_entropy", "reduction": "mean"},
        "optimizer": {"op": "sgd", "lr": 0.1},
        "profiles": {
            p: {"batch_size": 2, "epochs": 1, "train_samples": 4, "test_samples": 4}
            for p in ("ci", "smoke", "full")
        },
        "tolerances": {
            d: {k: {"rtol": 1e-4, "atol": 1e-5} for k in ("forward", "loss", "grads", "params")}
            for d in ("float32", "float64")
        },
    }  # fmt: skip
    _load(tmp_path, raw, "imgmask")  # valid as it is
    # a float (T, E) input pooled with a token mask: the input is not token ids
    raw["input"] = {"shape": [5, 6], "dtype": "float32"}
    raw["layers"] = [
        {"op": "masked_mean", "mask": "tokens"},
        {"op": "dense", "name": "b", "units": 10, "bias": True,
         "init": {"kernel": "glorot_uniform", "bias": "zeros"}},
    ]  # fmt: skip
    with pytest.raises(SpecError) as exc:
        _load(tmp_path, raw, "imgmask")
    msg = str(exc.value)
    assert "layers[0].mask" in msg and "masked_mean" in msg and "token ids" in msg, msg
