"""The serving engines (``onnxruntime``, ``openvino``) beyond the conformance suite: their
precision policies, the settings they record, and that a training workload on them runs its
forward pass (gated, timed, served) instead of training.

OpenVINO's CPU plugin computes in bfloat16 *by default* on a CPU with avx512_bf16 or AMX; the
backend states ``INFERENCE_PRECISION_HINT=f32`` for fp32, and the planted test shows why: the
same model compiled with the plugin's default fails the fp32 gate (measured 78x its bound on the
CNN on this machine's avx512_bf16 CPU)."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.backends.openvino.cpuflags import cpu_flags, has_bf16
from rosetta.runner.config import CellConfig
from rosetta.runner.gate import run_gate
from tests.conformance.conftest import gate_batch, weights


def _usable(name: str) -> str:
    st = backends.status(name)
    if not st.usable:
        pytest.skip(f"{name}: {st.reason}")
    return name


# ONNX Runtime in the quick tier; OpenVINO (the same Cell._forward path) in the slow one
@pytest.mark.parametrize(
    "engine", ["onnxruntime", pytest.param("openvino", marks=pytest.mark.slow)]
)
def test_a_training_workload_runs_its_forward_pass_gated_timed_and_served(
    engine, tmp_path, small_data, capsys
):
    """A serving engine's cell of a training workload gates and times the forward pass (no
    training, no accuracy), measures batch-1 latency, stays out of the training tables and
    stands in the serving view beside a training framework's forward pass."""
    _usable(engine)
    from rosetta.report import load_tables
    from rosetta.report.serving import serving_rows
    from tests.bench_helpers import bench, run_records

    assert CellConfig(backend=engine, workload="cnn").unsupported() == ""
    f64 = CellConfig(backend=engine, workload="resnet50", dtype="float64").unsupported()
    assert f64 == f"backend {engine!r} runs float32 only, not float64"
    assert bench(tmp_path, small_data, "--backends", f"torch,{engine}", "--workloads", "gru",
                 "--executor", "python", "--threads", "1", "--run-id", "f") == 0  # fmt: skip
    recs = run_records(tmp_path, "f")
    rec = recs[f"{engine}__gru__t1"]
    assert rec["status"] == "ok" and rec["metrics"]["mode"] == "forward"
    assert [c["what"] for c in rec["equivalence"]["checks"]] == ["forward"]
    assert rec["equivalence"]["equivalent"] and "test_accuracy" not in rec["metrics"]
    assert len(rec["clocks"]["steady_raw_s"]) >= 20  # the test set cycled to FORWARD_STEPS
    assert rec["metrics"]["latency"]["p50"] > 0
    ref = recs["torch__gru__t1"]["metrics"]["predict_at_batch"]
    assert ref["batch"] == 64 and ref["samples_per_s"] > 0  # the trained model's forward pass
    tables = load_tables([tmp_path / "results" / "f"])
    assert list(tables.cells["backend"]) == ["torch"]  # no training time for the engine
    served = {r["backend"]: r["what"] for r in serving_rows(tables)}
    assert served == {engine: "predict", "torch": "predict"}
    assert "forward only" in capsys.readouterr().out  # the run's summary says what it timed


def test_onnxruntime_refuses_bf16_with_its_reason():
    why = backends.precision_unsupported("onnxruntime", "bf16", "cpu")
    assert "does not run precision bf16" in why and "no bfloat16" in why


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino"])
def test_the_settings_in_effect_are_read_back(engine):
    w = backends.load(_usable(engine))
    model = make(w, _cnn(), weights(_cnn()), threads=1)
    settings = model.manifest()["engine_settings"]
    if engine == "onnxruntime":
        assert settings["intra_op_num_threads"] == 1
        assert settings["graph_optimization_level"] == "ORT_ENABLE_ALL"
    else:
        assert settings["INFERENCE_NUM_THREADS"] == "1"
        assert settings["PERFORMANCE_HINT"] == "LATENCY"
        assert settings["INFERENCE_PRECISION_HINT"] == "float32"


def test_a_softmax_layer_is_not_reported_as_attention():
    """The manifest's attention form comes from the spec: a softmax layer is a ``Softmax`` node
    too, and the transformer's attention (a ``Softmax`` among ``MatMul`` nodes) still says so."""
    from rosetta.spec import get_workload
    from rosetta.spec.probes import probe_workload

    _usable("onnxruntime")
    w = probe_workload("softmax", 0)
    model = make("onnxruntime", w, weights(w))
    assert "Softmax" in model.node_counts() and model.manifest()["attention"] == "n/a"
    t = get_workload("transformer")
    assert make("onnxruntime", t, weights(t)).manifest()["attention"].startswith("composed")


def _cnn():
    from rosetta.spec import get_workload

    return get_workload("cnn")


@pytest.mark.skipif(not has_bf16(), reason="this CPU has no avx512_bf16/amx_bf16")
def test_openvino_fp32_needs_the_explicit_f32_hint_on_a_bf16_cpu():
    _usable("openvino")
    w, x = _cnn(), gate_batch(_cnn())[0]
    params = weights(w)
    model = make("openvino", w, params)
    assert run_gate(model, w, params, x, None, "float32").equivalent
    model.config = {k: v for k, v in model.config.items() if k != "INFERENCE_PRECISION_HINT"}
    model.compiled = {}  # compile again with the plugin's default precision
    assert model.engine_settings()["INFERENCE_PRECISION_HINT"] == "bfloat16"
    assert not run_gate(model, w, params, x, None, "float32").equivalent


@pytest.mark.skipif(not has_bf16(), reason="this CPU has no avx512_bf16/amx_bf16")
@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_openvino_bf16_passes_the_bf16_gate_and_really_rounds(name):
    from rosetta.spec import get_workload

    _usable("openvino")
    w = get_workload(name)
    params = weights(w)
    x, _ = gate_batch(w, seed=1)
    model = make("openvino", w, params, precision="bf16")
    result = run_gate(model, w, params, x, None, "bf16")
    assert result.equivalent, result.divergence
    assert model.manifest()["engine_settings"]["INFERENCE_PRECISION_HINT"] == "bfloat16"
    fp32 = make("openvino", w, params).predict_numpy(x)
    scale = np.abs(fp32).max()
    assert np.abs(model.predict_numpy(x) - fp32).max() > 1e-4 * scale  # not fp32 in disguise


def test_openvino_bf16_is_skipped_where_the_cpu_lacks_it(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n")
    assert cpu_flags(str(info)) == {"fpu", "sse2", "avx2", "avx512f"}
    assert not has_bf16(cpu_flags(str(info)))
    assert has_bf16({"avx512f", "avx512_bf16"})


# -- the hand-written baselines: each engine's own tool on the lowered model's export ------------
# (benchmarks/handwritten/engine_sessions.py; timed by benchmarks/lowering_{onnxruntime,openvino})


@pytest.fixture(scope="module")
def tool_export(tmp_path_factory):
    """``name`` -> (workload, weights, the export's ``.onnx`` file, a gate batch): one export per
    workload (resnet50 at 32 px), which both engines' lowered models and tool sessions read."""
    from benchmarks.handwritten.engine_sessions import write_export
    from rosetta.export.graph import to_model
    from rosetta.spec import get_workload

    made: dict = {}

    def get(name: str):
        if name not in made:
            w = get_workload(name)
            w = w.at_image_size(32) if name == "resnet50" else w
            params = weights(w)
            path = write_export(to_model(w, params), tmp_path_factory.mktemp(name))
            made[name] = (w, params, path, gate_batch(w)[0])
        return made[name]

    return get


def _tool_session(engine: str, path, shape):
    """The baseline session of ``engine`` on ``path``: perf_test's defaults, or benchmark_app's
    ``-api sync`` with ``-infer_precision f32`` where the plugin's default is not float32."""
    from benchmarks.handwritten import engine_sessions as es

    if engine == "onnxruntime":
        return es.perf_test_session(path)
    return es.benchmark_app_session(path, shape, precision=es.baseline_precision())


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino"])
@pytest.mark.parametrize(
    "name",
    ["cnn", "gru", "transformer", pytest.param("resnet50", marks=pytest.mark.slow)],
)
def test_the_tool_default_session_computes_the_lowered_models_function(engine, name, tool_export):
    """The engine's tool settings on the lowered model's own export give the lowered model's
    outputs, float32 to 1e-4 relative (the benchmark's check before timing). Both run one graph
    in one engine, so only the split of a reduction across threads could differ (~sqrt(K) ulps,
    under 1e-5 at K = 4608); measured bitwise equal on this 2-core machine."""
    from benchmarks._lowering import assert_same

    w, params, path, x = tool_export(name)
    lowered = make(_usable(engine), w, params, onnx_file=path)
    tool = _tool_session(engine, path, x.shape)
    assert_same(tool.run(x), lowered.predict_numpy(x))
    if engine == "onnxruntime":  # perf_test's -o 99 and -x 0 (ORT picks), read back
        assert tool.settings["graph_optimization_level"] == "ORT_ENABLE_ALL"
        assert tool.settings["intra_op_num_threads"] == 0
    else:  # benchmark_app -api sync: LATENCY, one stream, the baseline computes in float32
        assert tool.settings["PERFORMANCE_HINT"] == "LATENCY"
        assert tool.settings["NUM_STREAMS"] == "1"
        assert tool.settings["INFERENCE_PRECISION_HINT"] == "float32"


def test_the_benchmark_app_baseline_pins_f32_where_the_plugin_default_is_not(tool_export):
    """benchmark_app with no ``-infer_precision`` computes in the CPU plugin's default precision:
    read back from the compiled model, it is bf16 on an avx512_bf16/AMX CPU (OpenVINO's documented
    default; ``has_bf16`` reads /proc/cpuinfo, independently) and then fails the float32 check
    against the lowered model (bf16 keeps 8 significant bits: 6.2e-3 of the largest output on
    this gate batch, 60x the 1e-4 bound), so the baseline pins f32 and passes it. Elsewhere the
    default is f32 and nothing is pinned."""
    from benchmarks._lowering import assert_same
    from benchmarks.handwritten import engine_sessions as es

    _usable("openvino")
    w, params, path, x = tool_export("cnn")
    want = make("openvino", w, params, onnx_file=path).predict_numpy(x)
    plain = es.benchmark_app_session(path, x.shape, precision=None)  # the tool as it comes
    default = plain.settings["INFERENCE_PRECISION_HINT"]
    assert default == es.default_precision()  # a compile gets the device's default
    assert default == ("bfloat16" if has_bf16() else "float32")
    base = _tool_session("openvino", path, x.shape)
    assert base.settings["INFERENCE_PRECISION_HINT"] == "float32"
    assert_same(base.run(x), want)
    if default == "float32":
        assert "-infer_precision" not in base.command
        return
    assert base.command.endswith("-infer_precision f32")
    with pytest.raises(AssertionError):
        assert_same(plain.run(x), want)
