"""The localiser reads every backend in the canonical layout: a clean build of every backend x
workload stays within the forward tolerance at **every** op of its graph (each prefix, as
``rosetta.runner.localise.forward_probe`` builds and compares it), whatever layout the backend
computes in (NHWC images, an NHWC flatten's H, W, C rows, time-major sequences and GRU
states), and within the gradient tolerance at every segment walking back from the loss (each
suffix fed the reference's activation: features before a dense layer, a sequence before the GRU,
which each backend's loader takes in its own layout). A backend whose
``Model.output_to_canonical`` (or loader) misses one of its layouts reads as thousands of times
over tolerance (a shape mismatch as inf) at that op, and a gate failure would then be blamed on
it instead of on the op at fault.

float32 only: a layout is the same in float64, and float32's bounds are ~1e6 x tighter than
what a permuted activation misses them by. ResNet-50 runs at the quick suite's small image size
and is marked slow (one build per prefix, at its 13 distinct prefixes of 37).
"""

from __future__ import annotations

import pytest

from rosetta.backends import make
from rosetta.runner import localise
from rosetta.spec import get_workload
from tests.conformance.conftest import RESNET_SIZE, gate_batch, require_training, weights


def _probe(backend, workload, cuts=None):
    params = weights(workload)
    x, _ = gate_batch(workload, n=2)

    def build(w, p, dtype):
        return make(backend, w, p, dtype=dtype)

    tol = workload.tolerances["float32"].forward
    return localise.forward_probe(build, workload, params, x, "float32", tol, cuts)


def _assert_clean(backend, workload, errors, cuts=None):
    assert len(errors) == len(cuts or workload.graph)  # every op (every cut) was probed
    over = [f"{e.label}: {e.violation:.3g}x" for e in errors if not e.violation <= 1.0]
    assert not over, f"{backend.NAME} {workload.name}: a clean build reads over tolerance at {over}"


@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_every_prefix_of_a_clean_build_is_within_tolerance(backend, name):
    w = get_workload(name)
    _assert_clean(backend, w, _probe(backend, w))


@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_every_suffix_of_a_clean_build_is_probed_and_within_tolerance(backend, name):
    require_training(backend)  # the suffixes are compared by their gradients
    w = get_workload(name)
    params = weights(w)
    x, y = gate_batch(w, n=4)

    def build(wl, p, dtype):
        return make(backend, wl, p, dtype=dtype)

    tol = w.tolerances["float32"].grads
    errors = localise.gradient_probe(build, w, params, x, y, "float32", tol)
    bad = [f"{e.label}: {e.violation:.3g}x" for e in errors if not e.violation <= 1.0]
    assert not bad, f"{backend.NAME} {name}: a clean build reads over tolerance (or unprobed) {bad}"


@pytest.mark.slow
def test_each_distinct_prefix_of_a_clean_resnet50_is_within_tolerance(backend):
    """ResNet-50 at each kind of op in each stage (``localise.distinct_cuts``: 13 of its 37
    prefixes; a bottleneck repeated at the same shape is read through the same layout), one
    build per prefix; the CNN and the GRU above are probed at every prefix."""
    w = get_workload("resnet50").at_image_size(RESNET_SIZE)
    cuts = localise.distinct_cuts(w)
    _assert_clean(backend, w, _probe(backend, w, cuts), cuts)


def test_distinct_cuts_reach_every_op_kind_and_stage_of_resnet50():
    """The ResNet-50 probe's cuts end at every kind of op and at every output shape its graph
    has (the stem, each stage's first bottleneck and its ReLU, the pooling), and at its last op."""
    w = get_workload("resnet50").at_image_size(RESNET_SIZE)
    cuts = localise.distinct_cuts(w)
    kinds, shapes, shape = set(), set(), w.input.shape
    for node in w.graph:
        shape = node.out_shape(shape)
        kinds.add(type(node).__name__)
        shapes.add(tuple(shape))
    ends = [w.graph[k - 1] for k in cuts]
    assert {type(n).__name__ for n in ends} == kinds
    assert cuts == sorted(set(cuts)) and cuts[-1] == len(w.graph)
    reached, shape = set(), w.input.shape
    for k, node in enumerate(w.graph, 1):
        shape = node.out_shape(shape)
        if k in cuts:
            reached.add(tuple(shape))
    assert reached == shapes and len(cuts) < len(w.graph)
