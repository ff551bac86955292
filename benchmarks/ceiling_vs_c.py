"""The measured ceiling against a hand-written C FMA loop on the same machine (issue 32: within
10% is the target).

Builds ``benchmarks/fma_c/fma.c`` (OpenMP, one thread per core, its own accumulators and loop)
and the ceiling's own kernel (``rosetta/runner/ceiling.c``, as ``rosetta bench`` builds it), then
runs them alternately for ``--rounds`` rounds (A B, B A, ...: drift hits both alike). Per round
the ratio is the ceiling's fp32 GFLOP/s (its best fp32 kernel, as :func:`ceiling.measure` takes
it) over the C loop's; the figure is the median ratio with a bootstrap 95% interval over rounds.
Run it alone on a quiet machine: timings under load mean nothing.

    python -m benchmarks ceiling_vs_c [--rounds 5] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from benchmarks.common import OUT_DIR, median_interval
from rosetta.runner import ceiling
from rosetta.runtime import usable_cores

FMA_C = Path(__file__).parent / "fma_c" / "fma.c"
C_FLAGS = ("-O3", "-march=native", "-fopenmp")


def c_loop(binary: Path, threads: int, seconds: float) -> float:
    """The hand-written loop's best total GFLOP/s on ``threads`` OpenMP threads, one per core."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PLACES": "cores",
           "OMP_PROC_BIND": "close"}  # fmt: skip
    out = subprocess.run([str(binary), str(seconds), "3"], capture_output=True, text=True,
                         env=env, check=True, timeout=600)  # fmt: skip
    return float(json.loads(out.stdout)["gflops"])


def ceiling_fp32(binary: Path, threads: int, seconds: float) -> float:
    """The ceiling's fp32 figure: its best fp32 kernel on every core, best of its repetitions."""
    built = ceiling.kernels_built(binary)
    names = [k for k in ceiling.FP32_KERNELS if k in built] or [ceiling.PORTABLE]
    return max(
        ceiling.compute_rate(ceiling.run_program(binary, k, threads, seconds, ceiling.REPS))[
            "gflops"
        ]
        for k in names
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks ceiling_vs_c")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="per repetition of each kernel")
    args = ap.parse_args(argv)
    threads = usable_cores()
    compiler, why = ceiling.find_compiler()
    if compiler is None:
        print(f"cannot compare: {why}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        c_bin = Path(tmp) / "fma_c"
        subprocess.run([compiler["path"], *C_FLAGS, "-o", str(c_bin), str(FMA_C)], check=True)
        k_bin, flags = ceiling.build(compiler, Path(tmp))
        rows = []
        for r in range(args.rounds):
            order = ("c", "ceiling") if r % 2 == 0 else ("ceiling", "c")
            got = {}
            for which in order:
                if which == "c":
                    got[which] = c_loop(c_bin, threads, args.seconds)
                else:
                    got[which] = ceiling_fp32(k_bin, threads, args.seconds)
            rows.append({**got, "ratio": got["ceiling"] / got["c"]})
            print(f"round {r}: C loop {got['c']:.1f}  ceiling {got['ceiling']:.1f} GFLOP/s  "
                  f"ratio {rows[-1]['ratio']:.3f}")  # fmt: skip
    ratios = [x["ratio"] for x in rows]
    lo, hi = median_interval(ratios)
    med = sorted(ratios)[len(ratios) // 2]
    verdict = "within 10%" if 0.9 <= med <= 1.1 else "NOT within 10%"
    print(f"ceiling / C loop: {med:.3f} [{lo:.3f}, {hi:.3f}] on {threads} cores: {verdict}")
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / "ceiling_vs_c.json"
    path.write_text(json.dumps({
        "benchmark": "ceiling_vs_c", "rounds": rows, "median_ratio": med, "ci95": [lo, hi],
        "threads": threads, "compiler": {**compiler, "flags": flags, "c_loop_flags": C_FLAGS},
        "load_avg": list(os.getloadavg()), "verdict": verdict,
    }, indent=1))  # fmt: skip
    print(f"written: {path}")
    return 0
