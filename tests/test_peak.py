"""Peaks: each framework's GEMM in its own process, the conv probe, the measured ceiling beside
them, and the flag when a BLAS runs below the CPU's best ISA (the ceiling itself:
tests/test_ceiling.py)."""

from __future__ import annotations

import pytest

from rosetta.runner import manifest, peak


def test_blas_below_isa_flag():
    avx2 = [{"internal_api": "openblas", "architecture": "Haswell", "library": "libopenblas.so"}]
    fast = [{"internal_api": "openblas", "architecture": "SkylakeX", "library": "libopenblas.so"}]
    mkl = [{"internal_api": "mkl", "architecture": None, "library": "libmkl_rt.so"}]
    avx512 = {"avx2", "avx512f"}
    assert "Haswell kernel" in manifest.blas_below_isa(avx2, avx512)
    assert manifest.blas_below_isa(fast, avx512) == ""
    assert manifest.blas_below_isa(mkl, avx512) == ""
    assert manifest.blas_below_isa(avx2, {"avx2"}) == ""  # AVX2 *is* that CPU's best
    numpy_wheel = [dict(avx2[0], library="libscipy_openblas64_-32a4b2a6.so")]
    assert "numpy_ref and Chainer" in manifest.blas_below_isa(numpy_wheel, avx512)


def test_blas_kernels_are_in_the_manifest():
    import numpy as np

    np.ones((4, 4)) @ np.ones((4, 4))  # NumPy's BLAS is loaded
    env = manifest.environment()
    assert any(k["internal_api"] in ("openblas", "mkl", "blis") for k in env["blas_kernels"])
    assert isinstance(env["blas_below_isa"], str)


def test_a_failing_probe_is_an_error_not_a_crash():
    assert "error" in peak.run_probe("raise SystemExit('no such framework')", 1)
    assert "error" in peak.run_probe("import time; time.sleep(10)", 1, timeout=1)


@pytest.mark.slow  # quick-tier budget (stop 58): test_ceiling's quick tests measure the peaks
def test_machine_peaks_measures_numpy_and_the_conv_probe():
    pytest.importorskip("torch")
    got = peak.machine_peaks(threads=1, frameworks=("numpy",))
    g = got["gemm"]["gflops"]["numpy"]
    assert g["fp32"] > 0.5 and g["bf16"] is None and "bfloat16" in g["bf16_why"]
    conv = got["conv"]["gflops"]
    assert conv["fp32"] > 0.5 and conv["bf16"] > 0.1
    assert got["best_measured_fp32_gflops"] == g["fp32"]
    ceiling = got["ceiling"]
    assert ceiling["threads"] == 1 and ceiling["fp32"]["gflops"] > 0.5
    if ceiling["method"] == "fma kernel":
        # one core's FMA loop beats its GEMM (the GEMM also moves data): a ceiling that counted
        # FLOP per iteration wrong by a factor (lanes, accumulators, 2 per FMA) would not
        assert ceiling["fp32"]["gflops"] > 0.6 * g["fp32"]
    assert "effective GFLOP/s" in got["label"]
