"""The serving engines (``onnxruntime``, ``openvino``) beyond the conformance suite: their
precision policies, the settings they record, and that a training cell on them is skipped.

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


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino"])
def test_a_training_cell_is_skipped_and_a_features_cell_runs(engine):
    why = CellConfig(backend=engine, workload="cnn").unsupported()
    assert why.startswith(f"backend {engine!r} is forward-only (a serving engine")
    assert CellConfig(backend=engine, workload="resnet50").unsupported() == ""
    assert CellConfig(backend="numpy_ref", workload="cnn").unsupported() == ""  # it trains
    f64 = CellConfig(backend=engine, workload="resnet50", dtype="float64").unsupported()
    assert f64 == f"backend {engine!r} runs float32 only, not float64"


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
