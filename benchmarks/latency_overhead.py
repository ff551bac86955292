"""Latency overhead: the runner's synchronised single-request loop against a bare loop.

The same backend model answers the same batch-1 requests through
``rosetta.runner.latency.request_times`` (what every record's ``metrics.latency`` comes from: a
sync before each request, a clock read around it, a sync on its output) and through a bare
``for b in batches: model.predict(b)`` loop with one sync at the end. Rounds alternate A B A B in
one process after warm-up; the figure is the ratio of median round times with a bootstrap 95%
interval. Target: <= 1.02 for every backend (run it on a quiet machine).

    python -m benchmarks latency_overhead [--backend torch] [--workloads cnn,gru,resnet50]
                                          [--rounds 12] [--requests 50]
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import interleaved, ratio, report
from rosetta import backends
from rosetta.runner.latency import LatencyPlan, request_times
from rosetta.spec import canonical_weights, get_workload


def _inputs(workload, n: int) -> np.ndarray:
    """``n`` random samples in the workload's canonical input format."""
    rng = np.random.default_rng(0)
    if workload.input.dtype == "int32":
        return rng.integers(1, 30000, size=(n, *workload.input.shape)).astype(np.int32)
    return rng.random((n, *workload.input.shape), dtype=np.float32)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks latency_overhead")
    p.add_argument("--backend", default="torch")
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--requests", type=int, default=50, help="batch-1 requests per round")
    p.add_argument("--precision", default="fp32")
    args = p.parse_args(argv)
    rows = []
    for name in args.workloads.split(","):
        spec = get_workload(name)
        w = spec.profile("full").workload_for(spec)
        model = backends.make(args.backend, w, canonical_weights(w), precision=args.precision)
        x = _inputs(w, 8)
        batches = list(model.loader(x, None, np.arange(len(x)), 1))
        plan = LatencyPlan(warmup=0, n=args.requests)

        def measured(model=model, batches=batches, plan=plan):
            request_times(model.predict, model.sync, batches, plan)

        def bare(model=model, batches=batches, n=args.requests):
            out = None
            for i in range(n):
                out = model.predict(batches[i % len(batches)])
            model.sync(out)

        times = interleaved({"measured": measured, "bare": bare}, rounds=args.rounds, warmup=1)
        label = f"{args.backend} {name} latency/bare"
        rows.append(ratio(label, times["measured"], times["bare"]))
    report(
        f"latency_overhead_{args.backend}",
        rows,
        {"requests_per_round": args.requests, "precision": args.precision, "target": 1.02},
    )
    return 0
