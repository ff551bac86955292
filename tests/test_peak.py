"""Peaks: the theoretical rate from ISA flags and a stated clock, each framework's GEMM in its
own process, the conv probe, and the flag when a BLAS runs below the CPU's best ISA."""

from __future__ import annotations

import pytest

from rosetta.runner import manifest, peak

ZEN5 = "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.128\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16\nprocessor\t: 1\ncpu MHz\t\t: 3900.000\n"  # noqa: E501
HASWELL = "cpu MHz\t\t: 2300.0\nflags\t\t: fpu sse2 avx avx2 fma\n"


def test_flop_per_cycle_from_isa_flags():
    z = peak.flops_per_cycle(peak.cpu_flags(ZEN5))
    assert (z["isa"], z["fp32"], z["bf16"]) == ("avx512f", 64, 128)  # 2 x 16 x 2; bf16 doubles
    h = peak.flops_per_cycle(peak.cpu_flags(HASWELL))
    assert (h["isa"], h["fp32"], h["bf16"]) == ("avx2+fma", 32, 32)  # no avx512_bf16: no gain
    assert peak.flops_per_cycle({"sse2"})["fp32"] == 16


def test_clock_source_is_stated(tmp_path):
    f = tmp_path / "scaling_max_freq"
    f.write_text("3900000\n")
    assert peak.cpu_clock(ZEN5, f) == (3.9, f"{f} (3900000 kHz)")
    ghz, source = peak.cpu_clock(ZEN5, tmp_path / "absent")
    assert ghz == pytest.approx(3.9) and "cpu MHz" in source and "nominal" in source
    assert peak.cpu_clock("flags: avx2", tmp_path / "absent")[0] is None


def test_theoretical_is_cores_times_clock_times_flop_per_cycle(tmp_path):
    f = tmp_path / "freq"
    f.write_text("3900000")
    t = peak.theoretical(ZEN5, 2, peak.cpu_clock(ZEN5, f))
    assert t["fp32_gflops"] == pytest.approx(2 * 3.9 * 2 * 16 * 2)  # 499.2: the FMA loop
    assert t["bf16_gflops"] == pytest.approx(2 * t["fp32_gflops"])
    assert "2 cores x 3.9 GHz x 64" in t["formula"]
    assert peak.theoretical("", 2, (None, "no clock"))["fp32_gflops"] is None


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


def test_machine_peaks_measures_numpy_and_the_conv_probe():
    pytest.importorskip("torch")
    got = peak.machine_peaks(threads=1, frameworks=("numpy",))
    g = got["gemm"]["gflops"]["numpy"]
    assert g["fp32"] > 0.5 and g["bf16"] is None and "bfloat16" in g["bf16_why"]
    conv = got["conv"]["gflops"]
    assert conv["fp32"] > 0.5 and conv["bf16"] > 0.1
    assert got["best_measured_fp32_gflops"] == g["fp32"]
    implied = got["implied_clock_ghz"]
    # one core's best GEMM at the ISA's FLOP/cycle implies a clock a real CPU can have: a wrong
    # FLOP count (n^3 for 2 n^3) or lane count would put it outside
    assert implied is not None and 0.05 < implied < 6.0
    assert "effective GFLOP/s" in got["label"]
