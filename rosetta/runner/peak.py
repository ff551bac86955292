"""Peaks that mean something: the measured ceilings, each framework's own GEMM, a conv probe.

An "effective GFLOP/s" figure (the spec's FLOPs over the measured time) is read against a
ceiling the hardware really gives, so a run records, in ``run.json`` (``machine_peaks()``):

(a) the **ceiling** (:mod:`rosetta.runner.ceiling`): a multiply-add kernel compiled at run time
    on every usable core, fp32 and bf16, with FLOP per cycle *measured* (the kernel's rate over
    the clock a dependent add chain shows), and a STREAM triad for the memory bandwidth; where
    no C compiler exists, the best GEMM below stands in, stated as such. (CPU flags cannot tell
    FLOP per cycle: Zen 4 and Zen 5 both flag ``avx512f`` and give 32 and 64.)
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


def gemm_probes() -> dict[str, str]:
    """framework -> its GEMM probe's script: every backend's ``GEMM_PROBE`` (a constant of its
    package, ``rosetta.backends.constant``), once per framework."""
    from rosetta import backends

    out = {}
    for name in backends.names():
        probe = backends.constant(name, "GEMM_PROBE")
        if probe:
            out.setdefault(probe[0], probe[1])
    return out


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


def best_isa(flags: set[str]) -> str:
    """The widest vector ISA the CPU has: ``avx512``, ``avx2`` or ``sse``."""
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if "avx2" in flags else "sse"


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


def machine_peaks(threads: int | None = None, frameworks: tuple[str, ...] | None = None) -> dict:
    """Everything of items (a)-(c) for ``run.json``: the measured ceiling (fp32, bf16, memory
    bandwidth; the best GEMM where no compiler builds the kernel), each framework's measured GEMM
    (fp32, bf16) and the conv probe. ``threads`` defaults to all usable cores; ``frameworks`` to
    every one of :func:`gemm_probes`. Takes a few seconds per installed framework."""
    from rosetta.runner import ceiling

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    cores = threads or usable_cores()
    probes = gemm_probes()
    gemm = {name: run_probe(probes[name], cores) for name in frameworks or probes}
    conv = run_probe(CONV_PROBE.format(**CONV_SHAPE), cores)
    rates = {n: v["fp32"] for n, v in gemm.items() if isinstance(v.get("fp32"), int | float)}
    best = max(rates.values(), default=None)
    best_of = max(rates, key=rates.__getitem__) if rates else ""
    return {
        "ceiling": ceiling.measure(
            cores, best, f"{best_of} {GEMM_N}x{GEMM_N} fp32 matmul on {cores} threads"
        ),
        "gemm": {"n": GEMM_N, "threads": cores, "gflops": gemm},
        "conv": {"shape": CONV_SHAPE, "op": "torch conv2d 3x3, padding 1", "gflops": conv},
        "best_measured_fp32_gflops": best,
        "best_isa": best_isa(cpu_flags(cpuinfo)),
        "cpu_flags": sorted(cpu_flags(cpuinfo) & ISA_FLAGS),
        "label": "effective GFLOP/s = spec FLOPs / time, against the measured ceiling (may exceed "
        "it: fewer multiplications than the spec counts, e.g. Winograd)",
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    }


#: the ISA flags worth naming beside a machine (the reference fractions name machines by them)
ISA_FLAGS = frozenset(
    {"sse2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "asimd",
     "sve"}
)  # fmt: skip
