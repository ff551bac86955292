"""``rosetta export --onnx`` and the two engines that run the file it writes.

The exporter is checked against independent answers: ONNX's own reference evaluator
(``onnx.reference``, a second implementation of every op) in float64 against the float64 NumPy
reference at float64's bounds, and each engine (ONNX Runtime, OpenVINO) loading the written file
against the float64 reference at the spec's float32 bounds (the round trip: export, load, compare).
The GRU's reset convention is shown to matter: the same file with ``linear_before_reset=0`` fails
the gate. Bad input (an op the exporter cannot express, or not in the opset asked for, a corrupt or
foreign ``.onnx``) is one line.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

from rosetta.backends import make, numpy_ref, status  # noqa: E402
from rosetta.cli import main  # noqa: E402
from rosetta.errors import BackendError  # noqa: E402
from rosetta.export import OPSET, graph  # noqa: E402
from rosetta.runner.gate import run_gate  # noqa: E402
from rosetta.spec import get_workload, ops  # noqa: E402
from rosetta.spec.probes import probe_batch, probe_workload, probe_workloads  # noqa: E402
from tests.conformance.conftest import RESNET_SIZE, gate_batch, weights  # noqa: E402

ENGINES = ("onnxruntime", "openvino")


def _workload(name: str):
    w = get_workload(name)
    return w.at_image_size(RESNET_SIZE) if name == "resnet50" else w


def _engine(name: str):
    st = status(name)
    if not st.usable:
        pytest.skip(f"{name}: {st.reason}")
    return name


def _export(name: str, path, capsys) -> None:
    """The file as a user makes it: ``rosetta export`` (ResNet-50 at the suite's 64x64 through
    the same ``to_model``, the command exporting the spec's 224)."""
    if name == "resnet50":
        w = _workload(name)
        onnx.save_model(graph.to_model(w, weights(w)), path)
        return
    assert main(["export", name, "--onnx", str(path)]) == 0
    line = capsys.readouterr().out
    assert line.startswith(f"wrote {path}: workload {name}, opset {OPSET}, ")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["cnn", "gru", "resnet50", "transformer"])
def test_round_trip_export_load_compare(engine, name, tmp_path, capsys):
    _engine(engine)
    w = _workload(name)
    path = tmp_path / f"{name}.onnx"
    _export(name, path, capsys)
    params = weights(w)
    model = make(engine, w, params, onnx_file=str(path))
    x, _ = gate_batch(w, n=2 if name == "resnet50" else 4)
    result = run_gate(model, w, params, x, None, "float32")
    assert result.equivalent, f"{engine} {name}: {result.divergence}"
    assert [c.what for c in result.checks] == ["forward"]
    got = model.get_params()  # the file's initializers read back in canonical layout: exact
    for k, v in params.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def _float64_erf() -> list:
    """ONNX's reference ``Erf`` as it would be in float64: its own computes in float32
    (``np.vectorize(erf, otypes=["f"])``, 1e-7 off), cast back."""
    from onnx.reference.op_run import OpRun

    class Erf(OpRun):
        op_domain = ""

        def _run(self, x):
            return (np.vectorize(math.erf, otypes=[x.dtype])(x),)

    return [Erf]


@pytest.mark.parametrize("name", ["cnn", "gru", "transformer"])
def test_onnx_reference_evaluator_matches_numpy_ref_in_float64(name):
    """The exported graph, run by ONNX's own reference evaluator in float64, is what the float64
    NumPy reference computes, at float64's bounds: the lowering (pads order, flatten order, the
    Gemm's kernel layout, the GRU's gate order and reset convention, the layer norm's variance
    and epsilon (written out in float64: ``graph.layer_norm``), the attention's head split,
    scale and key mask, GELU, the masked mean) is the spec's. The transformer's batch holds a
    review of padding only and one of one token."""
    from onnx.reference import ReferenceEvaluator

    w = get_workload(name)
    params = {k: v.astype(np.float64) for k, v in weights(w).items()}
    x, _ = gate_batch(w, n=2)
    if name == "transformer":  # the mask's edges: every key masked, a single real key
        x = np.concatenate([x, np.zeros_like(x[:2])])
        x[3, -1] = 417
    xin = x if x.dtype == np.int32 else x.astype(np.float64)
    model = graph.to_model(w, params, "float64")
    got = ReferenceEvaluator(model, new_ops=_float64_erf()).run(None, {"input": xin})[0]
    want = make(numpy_ref, w, params, dtype="float64").predict_numpy(xin)
    tol = w.tolerances["float64"].forward
    np.testing.assert_allclose(got, want, rtol=tol.rtol, atol=tol.atol)


def _empty_pasts(w, n: int, dtype: str) -> dict[str, np.ndarray]:
    return {
        name.format(i): np.zeros((n, h, 0, d), dtype=dtype)
        for i, (h, d) in enumerate(graph.cache_shapes(w))
        for name in (graph.PAST_KEY, graph.PAST_VALUE)
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_the_generation_graph_steps_are_the_forward_exports_positions(engine):
    """The decoder's generation graph (KV cache) passes ``onnx.checker`` (full) and declares
    the cache; an engine's prefill of 16 tokens and 3 decode steps give the logits the forward
    export, run by the same engine over the whole window, has at those positions (float32
    bounds). A cache whose positions or mask were wrong moves every step after the prefill."""
    _engine(engine)
    w = get_workload("decoder")
    params = weights(w)
    gen = graph.generation_model(w, params)
    onnx.checker.check_model(gen, full_check=True)
    ins = [i.name for i in gen.graph.input]
    assert ins[:3] == ["input", "past_key_0", "past_value_0"] and len(ins) == 1 + 2 * 4
    assert [o.name for o in gen.graph.output][:2] == ["output", "present_key_0"]
    model = make(engine, w, params)
    x, _ = gate_batch(w, n=3)  # (3, 128)
    full = model.predict_numpy(x)  # (3, 128, V): the forward export
    tol = w.tolerances["float32"].forward
    logits, nxt = model.prefill(x[:, :16])
    np.testing.assert_array_equal(nxt, logits.argmax(-1))
    steps = [logits]
    for t in range(16, 19):
        steps.append(model.decode(x[:, t])[0])
    for k, got in enumerate(steps):
        v = tol.violation(got, full[:, 15 + k])
        assert v <= 1, f"{engine} step {k}: {v:.3g} of the float32 bound"


def test_a_generation_chunk_after_the_cache_reads_the_keys_before_it_in_float64():
    """The generation graph in float64 through ONNX's reference evaluator: a prefill of 8, then
    a chunk of 3 new tokens at once (T > 1 over a cache: query i reads keys j <= S + i), then one
    step; the logits at positions 7, 10 and 11 are the float64 NumPy reference's forward at
    float64's bounds (the chunk's middle queries feed the later layers' cached keys, which
    position 11 reads)."""
    from onnx.reference import ReferenceEvaluator

    w = get_workload("decoder")
    params = {k: v.astype(np.float64) for k, v in weights(w).items()}
    x, _ = gate_batch(w, n=2)
    want = make(numpy_ref, w, params, dtype="float64").predict_numpy(x)  # (2, 128, V)
    run = ReferenceEvaluator(graph.generation_model(w, params, "float64"), new_ops=_float64_erf())
    names = run.output_names
    pasts = _empty_pasts(w, 2, "float64")
    tol = w.tolerances["float64"].forward
    for start, stop in ((0, 8), (8, 11), (11, 12)):
        out = dict(zip(names, run.run(None, {"input": x[:, start:stop], **pasts}), strict=True))
        assert out["present_key_3"].shape == (2, 4, stop, 64)
        np.testing.assert_allclose(out["output"], want[:, stop - 1], rtol=tol.rtol, atol=tol.atol)
        pasts = {k: out[k.replace("past", "present")] for k in pasts}


def test_a_workload_without_causal_attention_has_no_generation_graph():
    with pytest.raises(BackendError, match="does not generate") as e:
        graph.generation_model(get_workload("transformer"), weights(get_workload("transformer")))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "probe", [(op, i) for op, i, _ in probe_workloads() if op in ("add", "concat")]
)
def test_a_wired_graph_in_the_reference_evaluator_matches_numpy_ref_in_float64(probe):
    """The graph probes (``add``: two or three inputs, the masked attention beside its input;
    ``concat``: channels, width, features, a sequence's features), exported in float64 and run
    by ONNX's reference evaluator, are the float64 reference's at float64's bounds: the wiring,
    ``Sum``'s inputs and ``Concat``'s axis (the spec's + 1) are the spec's."""
    from onnx.reference import ReferenceEvaluator

    w = probe_workload(*probe)
    params = {k: v.astype(np.float64) for k, v in weights(w).items()}
    x, _ = probe_batch(w)
    xin = x if x.dtype == np.int32 else x.astype(np.float64)
    model = graph.to_model(w, params, "float64")
    got = ReferenceEvaluator(model, new_ops=_float64_erf()).run(None, {"input": xin})[0]
    want = make(numpy_ref, w, params, dtype="float64").predict_numpy(xin)
    tol = w.tolerances["float64"].forward
    np.testing.assert_allclose(got, want, rtol=tol.rtol, atol=tol.atol)


@pytest.mark.parametrize("index", range(len(ops.Softmax.PROBES)))
def test_softmax_is_one_node_over_the_last_axis_in_float64(index):
    """The softmax probes (wide features, a sequence's E, an image's W), exported in float64
    and run by ONNX's reference evaluator, are the float64 reference's at float64's bounds:
    one ``Softmax`` with ``axis=-1`` (opset 13's one axis)."""
    from onnx.reference import ReferenceEvaluator

    w = probe_workload("softmax", index)
    params = {k: v.astype(np.float64) for k, v in weights(w).items()}
    model = graph.to_model(w, params, "float64")
    (node,) = [n for n in model.graph.node if n.op_type == "Softmax"]
    assert [a.i for a in node.attribute if a.name == "axis"] == [-1]
    x, _ = probe_batch(w)
    xin = x if x.dtype == np.int32 else x.astype(np.float64)
    got = ReferenceEvaluator(model, new_ops=_float64_erf()).run(None, {"input": xin})[0]
    want = make(numpy_ref, w, params, dtype="float64").predict_numpy(xin)
    tol = w.tolerances["float64"].forward
    np.testing.assert_allclose(got, want, rtol=tol.rtol, atol=tol.atol)


def test_a_wired_graph_is_one_node_per_op_reading_its_inputs():
    """``concat`` 0 joins a convolution's channels with the graph's own input (ONNX axis 1) and
    ``add`` 1 sums three tensors in one ``Sum``, one of them read by two other nodes too; the
    text (the engines' ``source.py``) says the same, the concat reading the graph's input."""
    from rosetta.backends import driver
    from rosetta.backends.snippet import RenderCtx
    from rosetta.export.table import RENDER

    w = probe_workload("concat", 0)
    nodes = graph.to_model(w, weights(w)).graph.node
    (cat,) = [n for n in nodes if n.op_type == "Concat"]
    (conv,) = [n for n in nodes if n.op_type == "Conv"]
    assert list(cat.input) == [conv.output[0], graph.INPUT]
    assert [a.i for a in cat.attribute if a.name == "axis"] == [1]
    text = driver.lower(RENDER, w.graph, w.input.shape, RenderCtx()).forward
    assert "h_1 = Concat(h_branch0, {x}, axis=1)  # (N, 5, 6, 6)" in text

    w = probe_workload("add", 1)
    nodes = graph.to_model(w, weights(w)).graph.node
    (total,) = [n for n in nodes if n.op_type == "Sum"]
    assert "Add" not in {n.op_type for n in nodes} and len(total.input) == 3
    (flat,) = [n for n in nodes if n.op_type == "Flatten"]
    readers = [n.op_type for n in nodes if flat.output[0] in n.input]
    assert sorted(readers) == ["Gemm", "Gemm", "Sum"]


def test_gru_reset_convention_is_linear_before_reset(tmp_path, capsys):
    """The spec's reset_after is ONNX's linear_before_reset=1: the same file with 0 (the reset
    gate applied before the recurrent matmul, ONNX's default) fails the forward gate."""
    engine = _engine("onnxruntime")
    w = get_workload("gru")
    path = tmp_path / "gru.onnx"
    _export("gru", path, capsys)
    model = onnx.load_model(path)
    (node,) = [n for n in model.graph.node if n.op_type == "GRU"]
    assert helper.get_node_attr_value(node, "linear_before_reset") == 1
    for a in node.attribute:
        if a.name == "linear_before_reset":
            a.i = 0
    planted = tmp_path / "gru_before_reset.onnx"
    onnx.save_model(model, planted)
    params = weights(w)
    x, _ = gate_batch(w)
    result = run_gate(
        make(engine, w, params, onnx_file=str(planted)), w, params, x, None, "float32"
    )
    assert not result.equivalent and result.checks[0].violation > 2  # 9.3x measured


def test_an_op_the_export_cannot_express_is_one_line():
    @dataclasses.dataclass(frozen=True)
    class Unheard:
        OP = "unheard"

        def out_shape(self, s):
            return s

        def param_specs(self, s):
            return []

        def flops(self, s):
            return 0

    w = get_workload("cnn")
    w = dataclasses.replace(w, graph=(*w.graph[:3], Unheard(), *w.graph[3:]))
    with pytest.raises(BackendError) as err:
        graph.to_model(w, weights(get_workload("cnn")))
    assert str(err.value).startswith(f"ONNX export cannot express op 'unheard' in opset {OPSET}")
    assert "\n" not in str(err.value)


def test_an_op_newer_than_the_opset_asked_for_is_one_line(tmp_path, capsys):
    """LayerNormalization is opset 17's: the transformer at opset 16 is refused in one line
    naming the op and both opsets, and nothing is written; the CNN still exports at 16."""
    target = tmp_path / "t.onnx"
    assert main(["export", "transformer", "--onnx", str(target), "--opset", "16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "op 'layer_norm' in opset 16" in err and "opset 17" in err
    assert list(tmp_path.iterdir()) == []
    assert main(["export", "cnn", "--onnx", str(tmp_path / "c.onnx"), "--opset", "16"]) == 0


@pytest.mark.parametrize(
    "content, says",
    [
        (b"\x08\x07garbage that is not a protobuf of a model" * 3, "not a valid ONNX model"),
        (b"", "not a valid ONNX model"),
        ("cnn", "not an export of workload 'gru'"),  # a valid export of another workload
    ],
    ids=["corrupt", "empty", "foreign"],
)
def test_a_corrupt_or_foreign_onnx_file_is_one_line(content, says, tmp_path, capsys):
    engine = _engine("onnxruntime")
    path = tmp_path / "given.onnx"
    if isinstance(content, str):
        _export(content, path, capsys)
    else:
        path.write_bytes(content)
    w = get_workload("gru")
    with pytest.raises(BackendError) as err:
        make(engine, w, weights(w), onnx_file=str(path))
    msg = str(err.value)
    assert says in msg and "\n" not in msg and "rosetta export gru --onnx FILE" in msg


def test_export_command_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "missing" / "cnn.onnx"
    assert main(["export", "cnn", "--onnx", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and not target.parent.exists()
    assert main(["export", "cnn", "--onnx", str(tmp_path / "x.onnx"), "--opset", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "opset 9" in err
    assert list(tmp_path.iterdir()) == []
