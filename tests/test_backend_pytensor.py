"""PyTensor-specific checks the conformance suite does not make: the linker setting (the Runtime's
``pytensor_linker``) resolves, falls back and refuses as documented, the Numba linker
computes what the reference computes, through the same gate a cell runs, the Transformer's
masked ops refuse in one line a graph that gives them no token ids, ResNet-50's paddings read
their batch size off the model input (what keeps its build seconds, not minutes), and a concat
follows the time-major sequences a GRU scans."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make, numpy_ref, runtime_for
from rosetta.errors import BackendError
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload, load_workload, ops
from rosetta.spec.probes import probe_batch, probe_workload
from rosetta.spec.workload import InputSpec
from tests.conformance.conftest import gate_batch

if not backends.status("pytensor").usable:
    pytest.skip("pytensor is not installed", allow_module_level=True)

from rosetta.backends.pytensor import runtime as rt  # noqa: E402

MLP = Path(__file__).parent / "workloads" / "mlp.yaml"


def test_default_linker_is_c_where_a_compiler_exists_and_numba_where_none(monkeypatch):
    if not rt.compiler():
        pytest.skip("no C++ compiler here")
    assert rt.resolve_linker("default").name == "cvm"
    monkeypatch.setattr(rt, "compiler", lambda: "")  # a machine without g++
    fallback = rt.resolve_linker("default")
    assert fallback.name == "numba" and "no C++ compiler" in fallback.reason
    with pytest.raises(BackendError, match="needs a C\\+\\+ compiler") as err:
        rt.resolve_linker("cvm")
    assert "--pytensor-linker numba" in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_linker_is_one_line_naming_the_valid_ones():
    with pytest.raises(BackendError, match="not one of default, cvm, numba") as err:
        runtime_for("pytensor", options={"linker": "theano"})
    assert "\n" not in str(err.value)


@pytest.mark.slow  # Numba compiles every op of a new graph: minutes on the shared 2-core machine
def test_numba_linker_passes_the_gate_and_is_recorded():
    w = load_workload(MLP)
    params = canonical_weights(w, seed=0)
    model = make("pytensor", w, params, dtype="float64", options={"linker": "numba"})
    rng = np.random.default_rng(0)
    x = rng.random((4, *w.input.shape), dtype=np.float32)
    y = np.array([0, 3, 9, 1])
    result = run_gate(model, w, params, x, y, "float64")
    assert result.equivalent, result.divergence
    man = model.manifest()
    assert man["linker"] == "numba" and "asked for" in man["linker_reason"]


@pytest.mark.slow
def test_numba_linker_max_pool_matches_the_reference():
    op = ops.MaxPool2D((3, 3), (2, 2), (1, 1, 1, 1))  # ResNet's stem: padded, overlapping
    x = np.random.default_rng(1).normal(size=(2, 3, 9, 9))
    want = numpy_ref.run_op(op, x, runtime_for(numpy_ref, dtype="float64"))
    mod = backends.load("pytensor")
    got = mod.run_op(op, x, runtime_for(mod, dtype="float64", options={"linker": "numba"}))
    np.testing.assert_array_equal(got, want)  # a max selects: exact


def test_bf16_is_refused_with_its_reason_before_anything_is_built():
    w = load_workload(MLP)
    with pytest.raises(BackendError, match="does not run precision bf16") as err:
        make("pytensor", w, canonical_weights(w, seed=0), precision="bf16")
    assert "NumPy has no bfloat16" in str(err.value) and "\n" not in str(err.value)
    why = backends.precision_unsupported("pytensor", "bf16", "cpu")  # what the plan skips with
    assert "NumPy has no bfloat16" in why


def test_a_masked_op_without_token_ids_is_one_line():
    """Attention and the masked mean read the padding mask the model makes from its token ids;
    a graph that reaches them from features (what the localiser's suffix cut builds) is refused
    in one line naming the op, before anything is compiled."""
    w = get_workload("transformer")
    suffix = replace(w, graph=w.graph[2:], input=InputSpec((150, 128), "float32"))  # the blocks on
    with pytest.raises(BackendError, match="attention block.0.attn reads the padding mask") as err:
        make("pytensor", suffix, canonical_weights(suffix, seed=0))
    assert "token ids" in str(err.value) and "\n" not in str(err.value)


def test_every_padding_reads_its_batch_size_off_the_model_input():
    """ResNet-50's paddings (``pt.alloc``) and convolutions' reshapes take the batch size from the
    model's input variable: ``pt.alloc`` infers its static shape by rewriting its arguments'
    whole graph, so a size read off a layer's output deep in the network made each of its 18
    paddings rewrite everything before it (the build took 11 s instead of 1 at 32x32). Nothing
    is compiled: the graph is read."""
    from pytensor.graph.basic import Constant, ancestors
    from pytensor.tensor.basic import Alloc

    w = get_workload("resnet50").at_image_size(32)
    model = make("pytensor", w, canonical_weights(w, seed=0))
    (x,), (out,), _ = model._graphs["predict"]
    allocs = [v.owner for v in ancestors([out]) if v.owner and isinstance(v.owner.op, Alloc)]
    assert len(allocs) >= 18  # the stem's and every 3x3 convolution's padding, the pooling's
    for node in allocs:  # the shape's roots: the input alone (no layer's parameters)
        roots = {v for v in ancestors(node.inputs[1:]) if v.owner is None}
        read = {v for v in roots if not isinstance(v, Constant)}
        assert read == {x}, f"{node} reads {sorted(map(str, read))}"


def test_the_manifest_lists_what_runs_in_c_and_what_in_python():
    """Issue 50 item 9: the manifest said PyTensor's dot products were C BLAS ops; with no BLAS
    linked ``Dot22`` runs Python's ``perform``. ``ops_run`` reads each compiled function's
    thunks: the CNN's predict holds C thunks and, unlinked, its six dense/im2col Dot22s in
    Python."""
    from rosetta.backends.pytensor import runtime as settings

    if settings.compiler() is None:
        pytest.skip("no C++ compiler: the numba linker runs")
    w = get_workload("cnn")
    model = make("pytensor", w, canonical_weights(w, 0))
    model.predict_numpy(np.zeros((2, 3, 32, 32), dtype=np.float32))
    ops = model.manifest()["ops_run"]["predict"]
    assert ops["c"] > 50
    if not settings.load().config.blas__ldflags:
        assert ops["python"].get("Dot22", 0) >= 4, ops


@pytest.mark.slow  # a layout path beyond the probes' (quick-tier budget)
@pytest.mark.parametrize("axis", [0, 1])
def test_a_time_major_concat_matches_the_reference(axis):
    """The compiled graph holds embedded sequences time-major (T, N, E) (the generated file
    batch-major): a concat of time (axis 0) joins native axis 0, of features (axis 1) axis 2."""
    embedding, gru, head = probe_workload("gru", 0).graph
    graph = ops.Graph((embedding, ops.GELU("erf"), ops.Concat(axis), gru, head),
                      ((-1,), (0,), (0, 1), (2,), (3,)), ("s", "g", "", "", ""))  # fmt: skip
    w = replace(probe_workload("gru", 0), graph=(graph,))
    params = canonical_weights(w, 0)
    x, y = probe_batch(w)
    model = make("pytensor", w, params, dtype="float64")
    assert run_gate(model, w, params, x, y, "float64").equivalent


@pytest.mark.parametrize(
    "name,size",
    [
        ("cnn", None),
        ("gru", None),
        # two builds and compiles each: ~7 s (transformer) and ~15 s (ResNet-50 at 32x32, 53
        # convolutions) with PyTensor's compile cache warm; the quick tier has ~8 s for all four
        pytest.param("transformer", None, marks=pytest.mark.slow),
        pytest.param("resnet50", 32, marks=pytest.mark.slow),
    ],
)
def test_handwritten_models_compute_what_the_lowered_ones_compute(name, size):
    """The speed benchmark (``benchmarks/lowering_pytensor.py``) compares the two; it only means
    something if they are the same model, the lowered weights loaded by position. float64, the
    evaluation forward: the two graphs order their sums differently (NCHW im2col with rows
    channel-major against NHWC taps tap-major, batch-major against time-major attention), ~1e-16
    per op; measured at most 1.7e-15 of the outputs' scale (ResNet-50's 53 convolutions), hence
    1e-12. A slip (a tap order, a gate block, a missing mask) moves them O(1)."""
    from benchmarks.handwritten import pytensor_models as hw

    w = get_workload(name)
    w = w.at_image_size(size) if size else w
    model = make("pytensor", w, canonical_weights(w), dtype="float64")
    hand = hw.MODELS[name](w.input.shape, dtype="float64")
    hw.copy_weights(model, hand)
    x, _ = gate_batch(w, n=2)
    batch = next(iter(model.loader(x, None, np.arange(2), 2)))
    got = model.to_numpy(model.predict(batch))
    xin = x.astype(np.float64) if x.dtype.kind == "f" else x  # NCHW images, (N, T) ids
    want = hw.features_step(hw.compile_features(hand, "CVM"), xin)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.slow  # compiles both sides' training steps (gradients, updates): 7-40 s each
@pytest.mark.parametrize("name", ["cnn", "gru", "transformer"])
def test_handwritten_train_steps_are_the_lowered_ones(name):
    """Three steps of the hand-written update rules (momentum SGD, Adam, AdamW decaying the
    linear matrices only) against the lowered model's compiled step, dropout off on both sides,
    float64. The losses agree to summation order (measured 1.6e-14 relative); each parameter's
    change after 3 steps to 1e-8 of its largest entry: Adam divides by sqrt(v_hat), so an entry
    whose gradient is ~eps turns rounding into update noise (measured 9.3e-11, the
    transformer), while a wrong rule moves it by >= 1e-2 (the decay on one more tensor: lr * wd
    against lr, a missing bias correction: O(1))."""
    from benchmarks.handwritten import pytensor_models as hw

    w = get_workload(name)
    model = make("pytensor", w, canonical_weights(w), dtype="float64")
    model.set_dropout(False)
    hand = hw.MODELS[name](w.input.shape, dtype="float64")
    hw.copy_weights(model, hand)
    step = hw.compile_train(name, hand, w.optimizer, "CVM", dropout=False)
    x, y = gate_batch(w, n=4)
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    xin = x.astype(np.float64) if x.dtype.kind == "f" else x
    before = list(model.get_params().values())
    for _ in range(3):
        want = float(hw.train_step(step, xin, y))
        np.testing.assert_allclose(float(model.train_step(batch)), want, rtol=1e-12)
    for (pname, got), var, p0 in zip(model.get_params().items(), hand.params, before,
                                     strict=True):  # fmt: skip
        change = var.get_value() - p0
        assert np.abs(change).max() > 0, pname
        np.testing.assert_allclose(got - p0, change, rtol=0, atol=1e-8 * np.abs(change).max(),
                                   err_msg=pname)  # fmt: skip
