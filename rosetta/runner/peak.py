"""Peaks that mean something: the CPU's theoretical rate, each framework's own GEMM, a conv probe.

An "effective GFLOP/s" figure (the spec's FLOPs over the measured time) can exceed a measured
NumPy sgemm, because a framework may run faster kernels than NumPy's (oneDNN against an
OpenBLAS held to its AVX2 kernel) or fewer multiplications than the spec counts (Winograd
convolutions). So a run records, in ``run.json`` (``machine_peaks()``):

(a) **theoretical** = cores x clock x FLOP per cycle, from the ISA flags in ``/proc/cpuinfo``:
    ``avx512f``: 2 FMA units x 16 fp32 lanes x 2 FLOP = 64 per cycle (Zen 4/5 and Intel's
    server cores have two 512-bit FMA pipes; the flags cannot tell a one-unit part, so this is
    an upper bound there); ``avx2`` + ``fma``: 2 x 8 x 2 = 32; else SSE2 2 x 4 x 2 = 16.
    ``avx512_bf16`` (``VDPBF16PS``: a pair of bf16 products per fp32 lane) doubles the bf16
    rate. The clock is read from the machine, and where it came from is stated:
    ``cpufreq/scaling_max_freq`` when the kernel exposes it, else the highest ``cpu MHz`` in
    ``/proc/cpuinfo`` (on a VM that is often the *nominal* clock: the cores may boost above it,
    so ``implied_clock_ghz`` backs the clock out of the best measured GEMM as a check);
(b) **measured GEMM** per framework, with its own library, fp32 and bf16 (NumPy sgemm,
    ``torch.mm``, ``tf.matmul``, ``jnp.dot``), each in its own subprocess (pools and libraries
    never mix), about a second each; a framework that is not installed is ``None`` with why;
(c) a **convolution probe**: ``torch.nn.functional.conv2d`` 3x3 at the CNN's conv2 shape
    (64 x 50 x 32 x 32 -> 50 channels, padding 1), fp32 and bf16, at direct-convolution FLOPs.

(d), the BLAS kernel each backend runs, is in ``rosetta.runner.manifest`` (per record).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rosetta.runtime import usable_cores

GEMM_N = 1024  # square GEMM side: 2 n^3 = 2.1 GFLOP, ~10-50 ms on one of these cores
REPEATS = 5  # best of: the probe wants the machine's rate, not its noise
PROBE_TIMEOUT_S = 120  # one framework's import + probe
CONV_SHAPE = {"n": 64, "c": 50, "k": 50, "h": 32, "w": 32, "r": 3}  # the CNN's conv2

#: per framework: Python source printing {"fp32": GFLOP/s, "bf16": GFLOP/s or null}; it gets
#: N (the GEMM side) and REPEATS, and best(fn) (the best seconds of REPEATS calls after one warm)
_PRELUDE = """
import json, time
def best(fn):
    fn()
    t = []
    for _ in range(REPEATS):
        s = time.perf_counter(); fn(); t.append(time.perf_counter() - s)
    return min(t)
flop = 2.0 * N ** 3
"""
GEMM_PROBES = {
    "numpy": """
import numpy as np
a = np.random.default_rng(0).random((N, N), dtype=np.float32); b = a.T.copy()
print(json.dumps({"fp32": flop / best(lambda: a @ b) / 1e9, "bf16": None,
                  "bf16_why": "NumPy has no bfloat16 dtype"}))
""",
    "torch": """
import torch
out = {}
for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
    a = torch.rand(N, N, dtype=dt); b = torch.rand(N, N, dtype=dt)
    out[name] = flop / best(lambda: torch.mm(a, b)) / 1e9
print(json.dumps(out))
""",
    "tensorflow": """
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
out = {}
for name, dt in (("fp32", tf.float32), ("bf16", tf.bfloat16)):
    a = tf.cast(tf.random.uniform((N, N)), dt); b = tf.cast(tf.random.uniform((N, N)), dt)
    out[name] = flop / best(lambda: tf.matmul(a, b).numpy()) / 1e9
print(json.dumps(out))
""",
    "jax": """
import jax, jax.numpy as jnp
out = {}
for name, dt in (("fp32", jnp.float32), ("bf16", jnp.bfloat16)):
    a = jax.random.uniform(jax.random.PRNGKey(0), (N, N)).astype(dt); b = a.T
    f = jax.jit(jnp.dot)
    out[name] = flop / best(lambda: f(a, b).block_until_ready()) / 1e9
print(json.dumps(out))
""",
}
CONV_PROBE = """
import torch, torch.nn.functional as F
n, c, k, h, w, r = {n}, {c}, {k}, {h}, {w}, {r}
flop = 2.0 * n * k * h * w * c * r * r  # direct convolution, padding 1 keeps h x w
out = {{}}
for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
    x = torch.rand(n, c, h, w, dtype=dt).to(memory_format=torch.channels_last)
    wt = torch.rand(k, c, r, r, dtype=dt).to(memory_format=torch.channels_last)
    with torch.inference_mode():
        out[name] = flop / best(lambda: F.conv2d(x, wt, padding=1)) / 1e9
print(json.dumps(out))
"""


def cpu_flags(cpuinfo: str) -> set[str]:
    """The ISA flags of the first processor in ``/proc/cpuinfo`` text."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def flops_per_cycle(flags: set[str]) -> dict:
    """FLOP per cycle per core, fp32 and bf16, with the ISA that decides it (module docstring)."""
    if "avx512f" in flags:
        isa, fp32 = "avx512f", 2 * 16 * 2
    elif "avx2" in flags and "fma" in flags:
        isa, fp32 = "avx2+fma", 2 * 8 * 2
    else:
        isa, fp32 = "sse2", 2 * 4 * 2
    bf16 = 2 * fp32 if "avx512_bf16" in flags else fp32  # without it bf16 computes at fp32's
    return {"isa": isa, "fp32": fp32, "bf16": bf16, "avx512_bf16": "avx512_bf16" in flags}


def best_isa(flags: set[str]) -> str:
    """The widest vector ISA the CPU has: ``avx512``, ``avx2`` or ``sse``."""
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if "avx2" in flags else "sse"


MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq")


def cpu_clock(cpuinfo: str, max_freq_file: Path = MAX_FREQ) -> tuple[float | None, str]:
    """(GHz, where it was read): ``scaling_max_freq`` (kHz) if readable, else the highest
    ``cpu MHz`` of ``cpuinfo``; ``(None, why)`` when neither says."""
    try:
        khz = int(max_freq_file.read_text().strip())
        return khz / 1e6, f"{max_freq_file} ({khz} kHz)"
    except (OSError, ValueError):
        pass
    mhz = [
        float(line.split(":", 1)[1])
        for line in cpuinfo.splitlines()
        if line.startswith("cpu MHz") and line.split(":", 1)[1].strip()
    ]
    if mhz:
        return max(mhz) / 1e3, (
            f"/proc/cpuinfo 'cpu MHz' (max over cores, {max(mhz):.0f} MHz; no cpufreq here: on a "
            "VM this is often the nominal clock, and boosted cores run faster)"
        )
    return None, "no clock readable (no cpufreq, no 'cpu MHz')"


def theoretical(cpuinfo: str, cores: int, clock: tuple[float | None, str]) -> dict:
    """(a): cores x clock x FLOP/cycle, fp32 and bf16, GFLOP/s, with every factor stated."""
    ghz, source = clock
    fpc = flops_per_cycle(cpu_flags(cpuinfo))
    out = {
        "cores": cores,
        "clock_ghz": ghz,
        "clock_source": source,
        "flop_per_cycle": fpc,
        "formula": f"{cores} cores x {ghz} GHz x {fpc['fp32']} FLOP/cycle fp32 "
        f"({fpc['isa']}: 2 FMA units x lanes x 2)",
    }
    for p in ("fp32", "bf16"):
        out[f"{p}_gflops"] = None if ghz is None else cores * ghz * fpc[p]
    return out


def run_probe(source: str, threads: int, timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Run one probe's source in a fresh interpreter with ``threads`` BLAS/OpenMP threads;
    its JSON line, or ``{"error": why}`` (not installed, timed out, crashed)."""
    from rosetta.runtime import child_env

    code = f"N = {GEMM_N}\nREPEATS = {REPEATS}\n{_PRELUDE}\n{source}"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env(threads),
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": last[:300]}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": f"unreadable probe output {proc.stdout[-200:]!r}"}


def implied_clock_ghz(measured_gflops: float | None, cores: int, fpc: int) -> float | None:
    """The clock a measured rate implies at ``fpc`` FLOP/cycle on ``cores``: a check on (a)."""
    if not measured_gflops or not cores or not fpc:
        return None
    return measured_gflops / (cores * fpc)


def machine_peaks(threads: int | None = None, frameworks: tuple[str, ...] | None = None) -> dict:
    """Everything of items (a)-(c) for ``run.json``: the theoretical peak with its formula and
    clock source, each framework's measured GEMM (fp32, bf16), the conv probe, and the clock the
    best measured fp32 GEMM implies. ``threads`` defaults to all usable cores; ``frameworks`` to
    every one of ``GEMM_PROBES``. Takes a few seconds per installed framework."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    cores = threads or usable_cores()
    theo = theoretical(cpuinfo, cores, cpu_clock(cpuinfo))
    gemm = {name: run_probe(GEMM_PROBES[name], cores) for name in frameworks or GEMM_PROBES}
    conv = run_probe(CONV_PROBE.format(**CONV_SHAPE), cores)
    best = max(
        (v["fp32"] for v in gemm.values() if isinstance(v.get("fp32"), int | float)), default=None
    )
    return {
        "theoretical": theo,
        "gemm": {"n": GEMM_N, "threads": cores, "gflops": gemm},
        "conv": {"shape": CONV_SHAPE, "op": "torch conv2d 3x3, padding 1", "gflops": conv},
        "best_measured_fp32_gflops": best,
        "implied_clock_ghz": implied_clock_ghz(best, cores, theo["flop_per_cycle"]["fp32"]),
        "best_isa": best_isa(cpu_flags(cpuinfo)),
        "label": "effective GFLOP/s = spec FLOPs / time (may exceed a measured GEMM: faster "
        "kernels or fewer multiplications, e.g. Winograd, than the spec counts)",
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    }
