"""Bounded spec loading: hostile specs are refused with one line naming the file and field.

Every adversarial document is generated here (nothing large is committed). Each test also runs
under a hang guard (``signal.alarm``): before the bounds, the "billion laughs" document ran for
over a minute and ``repeat: 1000000000`` never finished, so a regression fails instead of hanging.
"""

from __future__ import annotations

import copy
import signal

import pytest
import yaml

from rosetta.errors import SpecError
from rosetta.spec import load_workload, models_dir
from rosetta.spec.limits import DEFAULT_LIMITS, SpecLimits, TooLarge, expanded_size

HANG_GUARD_S = 30  # far above the milliseconds these take; only a hang reaches it


@pytest.fixture(autouse=True)
def hang_guard():
    def _fail(signum, frame):
        raise TimeoutError(f"spec loading did not finish within {HANG_GUARD_S} s")

    old = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(HANG_GUARD_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _base(name: str = "cnn") -> dict:
    return yaml.safe_load((models_dir() / f"{name}.yaml").read_text())


def _refused(tmp_path, text: str, name: str = "cnn", **limits) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_workload(path, SpecLimits(**limits) if limits else DEFAULT_LIMITS)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path))
    return msg


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """``levels`` lists of ``width`` aliases to the previous one: width**levels values."""
    lines = ["name: cnn", "a0: &a0 [{op: relu}]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_naming_the_field(tmp_path):
    text = billion_laughs()
    assert len(text) < 2_000  # a tiny file standing for 10**9 values
    msg = _refused(tmp_path, text)
    assert "field 'a" in msg and "aliases are expanded" in msg and "max_nodes" in msg


def test_laughs_inside_layers_are_refused_before_the_graph_is_built(tmp_path):
    raw = _base()
    body = yaml.safe_dump({k: v for k, v in raw.items() if k != "layers"})
    lines = ["l0: &l0 [{op: relu}, {op: relu}]"]
    lines += [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 40)]  # 2**40 layers
    text = body + "blocks: {" + ", ".join(x.replace(": ", ": {layers: ", 1) + "}" for x in lines)
    text += "}\nlayers: *l39\n"
    msg = _refused(tmp_path, text)
    assert "max_nodes" in msg


def test_too_many_aliases(tmp_path):
    text = "name: cnn\nx: &x 1\nys: [" + ", ".join(["*x"] * 50) + "]\n"
    msg = _refused(tmp_path, text, max_aliases=10)
    assert "more than 10 YAML aliases" in msg and "line 3" in msg


def test_recursive_alias(tmp_path):
    msg = _refused(tmp_path, "name: cnn\nlayers: &a [*a]\n")
    assert "field 'layers'" in msg and "recursive" in msg


@pytest.mark.parametrize("style", ["[", "{a: ", "block"])
def test_deep_nesting(tmp_path, style):
    if style == "block":  # indentation only: the composer counts the levels
        body = "".join(f"{' ' * i}k{i}:\n" for i in range(60)) + " " * 60 + "1\n"
    else:  # flow style: refused before PyYAML's scanner (quadratic in flow depth) runs
        closer = "]" if style == "[" else "}"
        body = style * 10_000 + "1" + closer * 10_000 + "\n"
    msg = _refused(tmp_path, "name: cnn\nlayers:\n" + body)
    assert "nested deeper than 50" in msg and "max_depth" in msg


def _with_block(raw: dict, repeat: int, body_len: int = 1, instances: int = 1) -> str:
    raw = copy.deepcopy(raw)
    raw["blocks"] = {"b": {"layers": [{"op": "relu"}] * body_len}}
    raw["layers"] = [{"block": "b", "name": f"x{i}", "repeat": repeat} for i in range(instances)]
    return yaml.safe_dump(raw)


def test_huge_repeat_is_refused_at_once(tmp_path):
    msg = _refused(tmp_path, _with_block(_base(), repeat=1_000_000_000))
    assert "field 'layers[0].repeat'" in msg and "1,000,000,000" in msg and "max_repeat" in msg


def test_many_layers_within_each_repeat_bound(tmp_path):
    msg = _refused(tmp_path, _with_block(_base(), repeat=1000, body_len=50, instances=300))
    assert "more than 5,000 layers" in msg and "max_layers" in msg


def test_block_copies_are_bounded(tmp_path):
    """A block whose YAML is large but builds one layer (an unused shortcut) copied 1000 times."""
    raw = _base()
    unused = {"when": False, "layers": [{"op": "relu"}] * 990}
    body = [{"op": "residual", "body": [{"op": "relu"}], "shortcut": unused}]
    raw["blocks"] = {"b": {"layers": body}}
    raw["layers"] = [{"block": "b", "name": "x", "repeat": 1000}]
    msg = _refused(tmp_path, yaml.safe_dump(raw))
    assert "field 'layers[0].repeat'" in msg and "max_expanded" in msg


def test_parameter_count_is_bounded(tmp_path):
    raw = _base()
    raw["layers"][0]["out_channels"] = 10**12
    msg = _refused(tmp_path, yaml.safe_dump(raw))
    assert "field 'layers[0]'" in msg and "max_params" in msg


def test_activation_size_is_bounded(tmp_path):
    raw = _base()
    raw["input"]["shape"] = [3, 10**9, 10**9]
    msg = _refused(tmp_path, yaml.safe_dump(raw))
    assert "field 'input.shape'" in msg and "max_values" in msg


def test_file_size_is_bounded(tmp_path):
    msg = _refused(tmp_path, "# " + "x" * (DEFAULT_LIMITS.max_bytes + 10) + "\n")
    assert "larger than 100,000 bytes" in msg


@pytest.mark.parametrize("name", ["cnn", "gru", "resnet50"])
def test_real_specs_sit_far_below_every_limit(name):
    """The bounds must never bite a real workload: it loads even with limits 10x tighter."""
    tight = SpecLimits(
        max_nodes=DEFAULT_LIMITS.max_nodes // 10,
        max_expanded=DEFAULT_LIMITS.max_expanded // 10,
        max_layers=DEFAULT_LIMITS.max_layers // 10,
        max_params=DEFAULT_LIMITS.max_params // 10,
        max_values=DEFAULT_LIMITS.max_values // 10,
        max_aliases=0,
        max_depth=DEFAULT_LIMITS.max_depth // 2,
    )
    w = load_workload(models_dir() / f"{name}.yaml", tight)
    assert w.num_params < tight.max_params


def test_expanded_size_counts_shared_values_once_per_use():
    leaf = [1, 2]  # 3 values: the list and its two items
    doc = {"a": [leaf, leaf, leaf]}  # 1 + 2 (key "a" + list) ... see below
    # dict(1) + key(1) + list(1) + 3 * leaf(3) = 12
    assert expanded_size(doc, 100) == 12
    with pytest.raises(TooLarge):
        expanded_size(doc, 11)


def test_too_many_values_stop_the_parser_early(tmp_path):
    msg = _refused(tmp_path, "name: cnn\nx: [" + ", ".join(["1"] * 6_000) + "]\n")
    assert "line 2: more than 5,000 YAML values" in msg and "max_nodes" in msg


def test_brackets_in_strings_and_comments_are_not_nesting(tmp_path):
    text = (models_dir() / "cnn.yaml").read_text()
    text = (
        "# "
        + "[" * 80
        + "\n"
        + text.replace(
            "description: ", "description: '" + "{" * 80 + "' # " + "[" * 80 + "\n_: ", 1
        )
    )
    text = text.replace("\n_: ", "\n# ", 1)  # keep the original description as a comment
    path = tmp_path / "cnn.yaml"
    path.write_text(text)
    assert load_workload(path).description == "{" * 80
