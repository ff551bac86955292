"""Ray executor overhead: one cell through Ray against the same cell run locally, interleaved.

Each round runs the same one-cell matrix (``--backend`` x ``--workload``, profile ``ci``, the
python cell executor) twice, each into a fresh run folder: once with the local executor, once as
a Ray task on a local Ray instance (one ``rosetta_cell`` slot, so the cells run one at a time as
on a cluster). Ray is started once before the rounds (its start-up is reported on its own, not
per cell). The figures: the ratio of median per-cell wall times (bootstrap 95% interval) and the
per-cell overhead in seconds, ``median(ray) - median(local)``. Target: <= 2 s per cell.

    python -m benchmarks ray_overhead [--backend numpy_ref] [--workload gru] [--rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.common import interleaved, ratio, report
from rosetta.runner.config import CellConfig
from rosetta.runner.matrix import Display, Plan, run_matrix
from rosetta.runner.ray_executor import RayOptions, connect
from rosetta.runner.rundir import RunDir


class _Quiet(Display):
    def done(self, label: str, status: str, detail: str) -> None:
        if status != "ok":
            raise RuntimeError(f"{label}: {status} ({detail}); the benchmark needs ok cells")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks ray_overhead")
    p.add_argument("--backend", default="numpy_ref")
    p.add_argument("--workload", default="gru")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args(argv)
    from rosetta.datasets import prepare_data
    from rosetta.spec import get_workload

    tmp = Path(tempfile.mkdtemp(prefix="rosetta-ray-overhead-"))
    data_dir = _synthetic_data(tmp / "data")
    dataset = get_workload(args.workload).dataset.name
    source = prepare_data([dataset], str(data_dir), say=lambda _: None)[dataset]
    template = CellConfig(backend="", workload="", profile="ci", data_dir=str(data_dir))
    local = Plan((args.backend,), (args.workload,), template, executor="python",
                 data_sources={args.workload: source})  # fmt: skip
    on_ray = replace(local, ray=RayOptions())
    t0 = time.perf_counter()
    print(connect(RayOptions()))
    connect_s = time.perf_counter() - t0
    counter = iter(range(10**6))

    def one_cell(plan: Plan) -> None:
        run_id = f"r{next(counter)}"
        with RunDir(tmp / "results", run_id, {"bench": "ray_overhead"}, create=True) as run:
            run_matrix(plan, run, _Quiet())

    try:
        times = interleaved(
            {"ray": lambda: one_cell(on_ray), "local": lambda: one_cell(local)},
            rounds=args.rounds,
            warmup=args.warmup,
        )
    finally:
        import ray

        ray.shutdown()
    overhead = float(np.median(times["ray"]) - np.median(times["local"]))
    row = ratio(f"{args.backend} x {args.workload}: ray/local", times["ray"], times["local"])
    notes = {"per_cell_overhead_s": overhead, "target_s": 2.0, "ray_start_s": connect_s,
             "rounds": args.rounds, "executor": "python", "profile": "ci"}  # fmt: skip
    report("ray_overhead", [row], notes)
    print(f"per-cell overhead: {overhead:+.2f} s (target <= 2 s); Ray start-up {connect_s:.1f} s")
    return 0 if overhead <= 2.0 else 1


def _synthetic_data(folder: Path) -> Path:
    """Small synthetic IMDB and CIFAR-10, enough for the ci profile."""
    from rosetta import datasets

    folder.mkdir(parents=True)
    datasets.write_synthetic_imdb(folder, n_train=600, n_test=300)
    datasets.write_synthetic_cifar10(folder, n_train=600, n_test=300)
    return folder
