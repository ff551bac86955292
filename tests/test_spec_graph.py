"""The spec is a graph: layers that name their inputs (``id``, ``inputs``), ``add`` and
``concat``, a chain as the default and ``residual`` as sugar for a body, a shortcut and an add.

The sugar is checked the strict way: a ResNet-style block written as a residual and the same
block written as a wired graph have the same parameters, bit-equal canonical weights, the same
FLOPs, and the NumPy reference computes bit-equal outputs and gradients for both (the same
arithmetic in the same order: ``body + shortcut``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from rosetta.backends import make
from rosetta.errors import SpecError
from rosetta.spec import canonical_weights, load_workload, ops
from rosetta.spec.graph import walk
from rosetta.spec.probes import probe_spec

_CONV = {"op": "conv2d", "stride": [1, 1], "bias": False, "init": {"kernel": "he_normal"}}


def _conv(name: str, out: int, k: int, **more) -> dict:
    pad = k // 2
    return {**_CONV, "name": name, "out_channels": out, "kernel": [k, k],
            "padding": [pad] * 4, **more}  # fmt: skip


def _spec(layers: list) -> dict:
    """A training spec on 3x6x6 images (the probes' frame: dataset, loss, profiles)."""
    raw = probe_spec("relu", 0)
    raw.update(name="graph", layers=[*layers, *raw["layers"][1:]])  # the probe's head
    return raw


def _load(tmp_path, raw: dict):
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_workload(path)


RESIDUAL = [
    _conv("stem", 4, 3),
    {"op": "residual",
     "body": [_conv("a", 4, 3), {"op": "relu"}, _conv("b", 4, 3)],
     "shortcut": {"layers": [_conv("proj", 4, 1)]}},
    {"op": "relu"},
]  # fmt: skip
WIRED = [
    {**_conv("stem", 4, 3), "id": "stem"},
    _conv("a", 4, 3),
    {"op": "relu"},
    {**_conv("b", 4, 3), "id": "body"},
    {**_conv("proj", 4, 1), "inputs": ["stem"], "id": "shortcut"},
    {"op": "add", "inputs": ["body", "shortcut"]},
    {"op": "relu"},
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The block as a residual and as a wired graph."""
    folder = tmp_path_factory.mktemp("specs")
    return _load(folder, _spec(RESIDUAL)), _load(folder, _spec(WIRED))


def test_a_list_naming_inputs_is_one_graph_and_a_chain_stays_a_tuple(pair):
    sugar, wired = pair
    assert not any(isinstance(n, ops.Graph) for n in sugar.graph)
    (graph,) = wired.graph  # the whole list, the probe's head (flatten, dense) included
    assert isinstance(graph, ops.Graph)
    # stem reads the input, a the stem, ..., proj the stem again, add body and shortcut, and
    # the layers naming no inputs read the layer before them
    assert graph.inputs == ((-1,), (0,), (1,), (2,), (0,), (3, 4), (5,), (6,), (7,))
    assert graph.ids == ("stem", "", "", "body", "shortcut", "", "", "", "")


def test_residual_is_sugar_for_a_wired_add(pair):
    sugar, wired = pair
    assert [p.name for p in sugar.param_specs] == [p.name for p in wired.param_specs]
    assert sugar.output_shape == wired.output_shape == (10,)
    assert sugar.flops_per_sample() == wired.flops_per_sample()
    ws, ww = canonical_weights(sugar, 0), canonical_weights(wired, 0)
    assert all(np.array_equal(ws[k], ww[k]) for k in ws) and ws.keys() == ww.keys()
    x = np.random.default_rng(0).random((3, 3, 6, 6), dtype=np.float32)
    y = np.array([1, 4, 7])
    outs = []
    for w in (sugar, wired):
        model = make("numpy_ref", w, ws, dtype="float64")
        outs.append((model.predict_numpy(x), *model.loss_and_grads(x, y)))
    (f1, l1, g1), (f2, l2, g2) = outs
    assert np.array_equal(f1, f2) and l1 == l2
    assert g1.keys() == g2.keys() and all(np.array_equal(g1[k], g2[k]) for k in g1)


def test_walk_opens_a_graph_with_each_nodes_own_inputs(pair):
    _, wired = pair
    seen = [(n.OP, i, o) for n, i, o in walk(wired.graph, wired.input.shape)]
    assert seen[4] == ("conv2d", (4, 6, 6), (4, 6, 6))  # proj reads the stem's output
    assert seen[5] == ("add", ((4, 6, 6), (4, 6, 6)), (4, 6, 6))


def test_concat_shapes_and_channels_count(tmp_path):
    layers = [
        {**_conv("left", 2, 3), "inputs": ["input"], "id": "left"},
        {**_conv("right", 5, 1), "inputs": ["input"], "id": "right"},
        {"op": "concat", "axis": 0, "inputs": ["left", "right", "input"]},
    ]
    w = _load(tmp_path, _spec(layers))
    (graph,) = w.graph
    assert graph.node_shapes((3, 6, 6))[2][1] == (2 + 5 + 3, 6, 6)
    assert w.param_specs[-2].shape == (10 * 6 * 6, 10)  # the head reads all 360 features


def _fails(tmp_path, layers, field: str, words: str) -> None:
    with pytest.raises(SpecError) as exc:
        _load(tmp_path, _spec(layers))
    msg = str(exc.value)
    assert "\n" not in msg and f"field '{field}'" in msg and words in msg, msg


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda ls: ls[4].update(inputs=["nowhere"]), "layers[4].inputs", "earlier layers"),
        (lambda ls: ls[4].update(inputs=["add"]), "layers[4].inputs", "earlier layers"),
        (lambda ls: ls[5].pop("inputs"), "layers[5].inputs", "two or more"),
        (lambda ls: ls[5].update(inputs=["body"]), "layers[5].inputs", "two or more"),
        (lambda ls: ls[1].update(inputs=["stem", "stem"]), "layers[1].inputs", "one input"),
        (lambda ls: ls[3].update(id="stem"), "layers[3].id", "unique in its list"),
        (lambda ls: ls[3].update(id="input"), "layers[3].id", "not 'input'"),
        (lambda ls: ls[3].update(id="not a name"), "layers[3].id", "a name matching"),
        (lambda ls: ls[1].update(inputs="stem"), "layers[1].inputs", "a list of ids"),
        # proj reads the input instead of the stem: the add's shapes differ (3 vs 4 channels)
        (lambda ls: ls[4].update(inputs=["input"], out_channels=3), "layers[5]", "differ"),
        # the add reads body twice: the shortcut is computed and read by no layer
        (lambda ls: ls[5].update(inputs=["body", "body"]), "layers[4]", "read by no layer"),
    ],
    ids=["unknown-id", "later-id", "add-without-inputs", "add-of-one", "relu-of-two",
         "duplicate-id", "id-input", "bad-id", "inputs-not-a-list", "shapes-differ",
         "dangling-branch"],
)  # fmt: skip
def test_bad_wiring_is_one_line_naming_the_field(tmp_path, mutate, field, words):
    layers = copy.deepcopy(WIRED)
    mutate(layers)
    _fails(tmp_path, layers, field, words)


def test_a_variadic_op_in_a_chain_needs_its_inputs(tmp_path):
    _fails(tmp_path, [_conv("c", 3, 3), {"op": "add"}], "layers[1].inputs", "two or more")


def test_concat_axis_outside_the_rank_names_the_field(tmp_path):
    layers = [
        {**_conv("left", 2, 3), "id": "left"},
        {"op": "concat", "axis": 3, "inputs": ["left", "input"]},
    ]
    _fails(tmp_path, layers, "layers[1].axis", "outside")
