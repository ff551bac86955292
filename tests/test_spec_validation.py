"""Malformed specs fail with one line naming the file, the field and what was expected."""

from __future__ import annotations

import copy

import pytest
import yaml

from rosetta.errors import SpecError
from rosetta.spec import load_workload, models_dir


def _base(name: str) -> dict:
    return yaml.safe_load((models_dir() / f"{name}.yaml").read_text())


def _load(tmp_path, raw, name="cnn"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw))
    return load_workload(path)


def _mutate(name, fn):
    raw = copy.deepcopy(_base(name))
    fn(raw)
    return raw


CASES = [
    # (workload, mutation, field named in the message, words of "expected")
    ("cnn", lambda r: r["layers"][0].update(op="conv3d"), "layers[0].op", "one of"),
    ("cnn", lambda r: r["layers"][0].pop("padding"), "layers[0].padding", "a value"),
    (
        "cnn",
        lambda r: r["layers"][0].update(padding="same"),
        "layers[0].padding",
        "[top, bottom, left, right]",
    ),
    (
        "cnn",
        lambda r: r["layers"][0].update(out_channels="fifty"),
        "layers[0].out_channels",
        "positive integer",
    ),
    (
        "cnn",
        lambda r: r["layers"][0].update(paddin=[1, 1, 1, 1]),
        "layers[0].paddin",
        "no such field",
    ),
    ("cnn", lambda r: r["layers"][5].update(rate=1.5), "layers[5].rate", "[0, 1)"),
    (
        "cnn",
        lambda r: r["layers"][0]["init"].update(kernel="xavier"),
        "layers[0].init.kernel",
        "unknown initialiser",
    ),
    ("cnn", lambda r: r["layers"][12].update(order="HWC"), "layers[12].order", "CHW"),
    ("cnn", lambda r: r.update(task="inference"), "task", "one of"),
    ("cnn", lambda r: r["optimizer"].update(op="rmsprop"), "optimizer.op", "sgd, adam or adamw"),
    ("cnn", lambda r: r["profiles"].pop("smoke"), "profiles.smoke", "a value"),
    (
        "cnn",
        lambda r: r["profiles"]["ci"].update(batch_size=0),
        "profiles.ci.batch_size",
        "positive integer",
    ),
    (
        "cnn",
        lambda r: r["tolerances"]["float32"].pop("grads"),
        "tolerances.float32.grads",
        "a value",
    ),
    ("cnn", lambda r: r.update(name="vgg"), "name", "file's stem"),
    # shapes that do not fit
    (
        "cnn",
        lambda r: r["layers"].insert(
            13, {"op": "maxpool2d", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0, 0, 0]}
        ),
        "layers[13]",
        "fits layer",
    ),
    ("cnn", lambda r: r["input"].update(shape=[3, 2, 2]), "layers[9]", "fits layer"),  # 2nd pool
    ("cnn", lambda r: r["layers"][-1].update(units=7), "layers", "10 classes"),
    (
        "gru",
        lambda r: r["layers"][1].update(gate_order=["r", "z", "h"]),
        "layers[1].gate_order",
        "[z, r, h]",
    ),
    ("gru", lambda r: r["layers"][1].update(reset_after=False), "layers[1].reset_after", "true"),
    ("gru", lambda r: r["dataset"].update(padding="middle"), "dataset.padding", "one of"),
    ("gru", lambda r: r["layers"][0].update(vocab=20000), "layers[0]", "num_words"),
    ("gru", lambda r: r["input"].update(shape=[100]), "input", "maxlen"),
    ("resnet50", lambda r: r["layers"][4].update(block="basic"), "layers[4].block", "blocks"),
    (
        "resnet50",
        lambda r: r["layers"][4]["args"].pop("width"),
        "layers[4].args.width",
        "block parameter",
    ),
    (
        "resnet50",
        lambda r: r["layers"][5]["first"].update(project=False),
        "layers[5]",
        "residual branches",
    ),
    (
        "resnet50",
        lambda r: r["blocks"]["bottleneck"]["layers"][0]["body"][0].update(out_channels="$depth"),
        "blocks.bottleneck",
        "placeholder",
    ),
    ("resnet50", lambda r: r["layers"][0].update(name="bn1"), "layers[1].name", "unique"),
]


@pytest.mark.parametrize("workload,mutate,field,expected", CASES)
def test_malformed_spec_names_file_field_and_expectation(
    tmp_path, workload, mutate, field, expected
):
    with pytest.raises(SpecError) as info:
        _load(tmp_path, _mutate(workload, mutate), name=workload)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(str(tmp_path / f"{workload}.yaml"))
    assert f"'{field}" in msg, msg
    assert expected in msg, msg


def test_unmodified_copies_load(tmp_path):
    for name in ("cnn", "gru", "resnet50"):
        assert _load(tmp_path, _base(name), name=name).name == name


def test_the_same_bytes_parse_once_and_an_edited_file_is_read_again(tmp_path):
    """A run writing 600 records read the spec 600 times (~0.1 s of PyYAML each): the bytes
    parse once per process; an edit, even of one field, is seen at the next load, and an edit
    that breaks the file fails as it would without the cache."""
    raw = _base("cnn")
    first = _load(tmp_path, raw)
    assert load_workload(tmp_path / "cnn.yaml") is first
    edited = copy.deepcopy(raw)
    edited["description"] = "edited"
    again = _load(tmp_path, edited)
    assert again is not first and again.description == "edited"
    with pytest.raises(SpecError, match="cnn.yaml: not valid YAML"):
        _load(tmp_path, "name: cnn\nlayers: [\n")


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match=r"cnn\.yaml: not valid YAML at line 3"):
        _load(tmp_path, "name: cnn\nlayers: [\n  - {op: relu\n")
    with pytest.raises(SpecError, match="spec file not found"):
        load_workload(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="expected a mapping"):
        _load(tmp_path, "- just\n- a list\n")


def test_unknown_workload_lists_valid_ones():
    from rosetta.spec import get_workload

    with pytest.raises(
        SpecError, match="unknown workload 'vgg'; valid workloads: cnn, decoder, gru, resnet50"
    ):
        get_workload("vgg")


def _probe(op: str, fn) -> dict:
    from rosetta.spec.probes import probe_spec

    raw = probe_spec(op, 0)
    fn(raw["layers"])
    return raw


# the decoder's ops (issue 45): layers[0] is the probe's embedding (vocab 40, dim 8), layers[1]
# the op under test
DECODER_CASES = [
    ("tied_dense", lambda ls: ls[1].update(tie="nowhere"), "layers[1].tie",
     "an embedding layer before lm_head (probe_embedding)"),
    ("tied_dense", lambda ls: ls[1].update(units=41), "layers[1].units",
     "40, the vocab of the tied table probe_embedding"),
    ("tied_dense", lambda ls: ls.insert(1, {"op": "dense", "name": "wider", "units": 6,
                                            "bias": False, "init": {"kernel": "glorot_uniform"}}),
     "layers[2].tie", "an embedding 8 wide, as lm_head's input (width 6)"),
    ("tied_dense", lambda ls: ls[1].pop("tie"), "layers[1].tie", "a value"),
    ("causal_attention", lambda ls: ls[1].update(heads=3), "layers[1].heads",
     "3 heads do not divide the width 8"),
    ("causal_attention", lambda ls: ls[1].update(mask="tokens"), "layers[1].mask",
     "no such field"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "mutate", "field", "expected"), DECODER_CASES)
def test_a_decoder_op_out_of_shape_is_one_line(tmp_path, op, mutate, field, expected):
    raw = _probe(op, mutate)
    with pytest.raises(SpecError) as e:
        _load(tmp_path, raw, name=raw["name"])
    msg = str(e.value)
    assert "\n" not in msg and field in msg and expected in msg, msg


def _decoder(fn) -> dict:
    raw = copy.deepcopy(_base("decoder"))
    fn(raw["profiles"]["ci"]["generate"])
    return raw


GENERATE_CASES = [
    (lambda g: g.update(new_tokens=0), "profiles.ci.generate.new_tokens", "positive integer"),
    (lambda g: g.update(prompt_len=100, new_tokens=29), "profiles.ci.generate.new_tokens",
     "prompt_len + new_tokens <= the context 128"),
    (lambda g: g.update(batches=[]), "profiles.ci.generate.batches", "a list of batch sizes"),
    (lambda g: g.update(beam=4), "profiles.ci.generate.beam", "no such field"),
]  # fmt: skip


@pytest.mark.parametrize(("mutate", "field", "expected"), GENERATE_CASES)
def test_a_generate_profile_out_of_range_is_one_line(tmp_path, mutate, field, expected):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, _decoder(mutate), name="decoder")
    msg = str(e.value)
    assert "\n" not in msg and f"'{field}" in msg and expected in msg, msg


def test_only_a_decoder_generates(tmp_path):
    raw = _mutate("transformer", lambda r: r["profiles"]["ci"].update(
        generate={"prompt_len": 4, "new_tokens": 4, "batches": [1]}))  # fmt: skip
    with pytest.raises(SpecError, match="profiles.ci.generate.*only a decoder generates"):
        _load(tmp_path, raw, name="transformer")


def test_a_context_longer_than_the_position_table_names_max_len(tmp_path):
    raw = _mutate("decoder", lambda r: r["layers"][1].update(max_len=64))
    with pytest.raises(SpecError, match="max_len") as e:
        _load(tmp_path, raw, name="decoder")
    assert "\n" not in str(e.value)
