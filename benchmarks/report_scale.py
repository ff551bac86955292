"""``rosetta report`` at scale: wall time and peak memory for a run of N synthetic records.

Writes one run folder of ``--records`` valid schema-2 records (the report tests' fixture
records, ``tests/report_fixtures.py``: raw steps, losses, manifests, equivalence checks) spread
over a sweep grid the way a long run spreads them: 4 backends x 3 workloads x batch sizes
x precisions x thread counts, each point repeated over rounds (the machine drifting a little
per round), then runs ``rosetta report`` on it in a fresh process and reports that process's
wall time and peak RSS (``getrusage(RUSAGE_CHILDREN)``). Target (issue 33): 10,000 records in
under 2 minutes and 1 GB.

    python -m benchmarks report_scale [--records 1000] [--keep DIR]

Timings mean something only on a quiet machine.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT_DIR
from tests.report_fixtures import CELLS_A, ENV, PEAK_GFLOPS, record

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("numpy_ref", "torch", "tensorflow", "jax")
WORKLOADS = ("cnn", "gru", "resnet50")
BATCHES = (16, 32, 64, 128)
PRECISIONS = ("fp32", "bf16")
THREADS = (1, 2)


def _templates() -> dict[tuple[str, str], dict]:
    """One ok record per (workload, backend), from the fixture's numbers."""
    out = {}
    for i, w in enumerate(WORKLOADS):
        ref = CELLS_A[(w, "numpy_ref")]
        for j, b in enumerate(BACKENDS):
            spec = CELLS_A[(w, b)] if CELLS_A[(w, b)]["status"] == "ok" else ref
            spec = {**spec, "equivalent": True}
            out[(w, b)] = record("scale", w, b, spec, source="synthetic", seed=10 * i + j)
    return out


def _scaled(rec: dict, factor: float) -> None:
    """Every time of ``rec`` scaled by ``factor`` (its median interval scales with them)."""
    clocks = rec["clocks"]
    clocks["steady_raw_s"] = [s * factor for s in clocks["steady_raw_s"]]
    clocks["steady"] = {
        k: v * factor if isinstance(v, float) else v for k, v in clocks["steady"].items()
    }
    clocks["end_to_end_s"] *= factor
    clocks["throughput_samples_per_s"] /= factor


def write_records(run_dir: Path, n: int, seed: int = 0) -> int:
    """Write ``n`` records (and ``run.json``) into ``run_dir``; returns the number of rounds."""
    rng = np.random.default_rng(seed)
    templates = _templates()
    grid = [
        (w, b, batch, prec, threads)
        for w in WORKLOADS
        for b in BACKENDS
        for batch in BATCHES
        for prec in PRECISIONS
        for threads in THREADS
    ]
    rounds = -(-n // len(grid))
    run_dir.mkdir(parents=True)
    info = {"schema_version": 2, "run_id": "scale", "created": "2026-11-25T09:00:00+00:00",
            "config": {"profile": "smoke", "device": "cpu", "repeat": rounds},
            "peak_gflops": PEAK_GFLOPS, "environment": ENV}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(info))
    written = 0
    for rnd in range(rounds):
        drift = float(np.exp(rng.normal(0.0, 0.03)))  # the machine's state in this round
        for w, b, batch, prec, threads in grid:
            if written == n:
                return rounds
            rec = copy.deepcopy(templates[(w, b)])
            factor = drift * batch / 64 * (0.6 if prec == "bf16" else 1.0) * (1.8 / threads)
            _scaled(rec, factor)
            rec["config"].update(round=rnd, batch_size=batch, precision=prec, threads=threads)
            rec["point"] = {"batch_size": batch, "precision": prec, "threads": threads,
                            "round": rnd}  # fmt: skip
            stem = f"{b}__{w}__b{batch}-{prec}-t{threads}" + (f"-r{rnd}" if rnd else "")
            (run_dir / f"{stem}.json").write_text(json.dumps(rec))
            written += 1
    return rounds


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks report_scale")
    p.add_argument("--records", type=int, default=1000, help="records in the run (default 1000)")
    p.add_argument("--keep", type=Path, default=None, help="write the run and report here")
    args = p.parse_args(argv)
    if args.records < 1:
        p.error("--records must be at least 1")
    with tempfile.TemporaryDirectory(prefix="report-scale-") as tmp:
        root = args.keep or Path(tmp)
        run_dir = root / "results" / f"scale-{args.records}"
        t0 = time.perf_counter()
        rounds = write_records(run_dir, args.records)
        made = time.perf_counter() - t0
        print(f"wrote {args.records:,} records ({rounds} rounds) to {run_dir} in {made:.1f} s")
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path}
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "rosetta.cli", "report", "--results-dir",
             str(root / "results"), "--out-dir", str(root / "report"), run_dir.name],
            env=env, cwd=ROOT, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode != 0:
            print(f"rosetta report failed (exit {done.returncode})", file=sys.stderr)
            return 1
        page = root / "report" / run_dir.name / "index.html"
        size_mb = page.stat().st_size / 2**20
        print(
            f"rosetta report of {args.records:,} records: {wall:.1f} s wall, peak RSS "
            f"{peak_mb:.0f} MB, page {size_mb:.1f} MB (target: 10,000 in < 120 s, < 1 GB)"
        )
        OUT_DIR.mkdir(exist_ok=True)
        out = OUT_DIR / f"report_scale_{args.records}.json"
        out.write_text(json.dumps({
            "benchmark": "report_scale", "records": args.records, "rounds": rounds,
            "wall_s": wall, "peak_rss_mb": peak_mb, "page_mb": size_mb,
            "load_avg": list(os.getloadavg()), "cpu_count": os.cpu_count(),
        }, indent=1))  # fmt: skip
        print(f"written: {out}")
    return 0
