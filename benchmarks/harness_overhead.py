"""Harness overhead: the runner's timed training loop against a bare loop, interleaved.

The same backend model runs the same native batches through
``rosetta.runner.steps.timed_steps`` (the one timed loop that produces every record: a sync and a
clock read around each sampled step, losses kept native) and through a bare
``for batch in batches: model.train_step(batch)`` loop. Rounds alternate A B A B in one process
after warm-up; the figure is the ratio of median round times with a bootstrap 95% interval.
Target: <= 1.01 for every backend.

    python -m benchmarks harness_overhead [--backend numpy_ref] [--workloads cnn,gru]
                                          [--rounds 12] [--steps 4]
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import interleaved, ratio, report
from rosetta import backends
from rosetta.runner.steps import timed_steps
from rosetta.spec import canonical_weights, get_workload


def _batches(model, workload, n: int, batch_size: int) -> list:
    """``n`` native batches of random data in the workload's input format."""
    rng = np.random.default_rng(0)
    total = n * batch_size
    if workload.input.dtype == "int32":
        x = rng.integers(1, 30000, size=(total, *workload.input.shape)).astype(np.int32)
    else:
        x = rng.random((total, *workload.input.shape), dtype=np.float32)
    y = rng.integers(0, workload.output_shape[0], size=total)
    return list(model.loader(x, y, np.arange(total), batch_size))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks harness_overhead")
    p.add_argument("--backend", default="numpy_ref")
    p.add_argument("--workloads", default="cnn,gru")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=4, help="training steps per round")
    p.add_argument("--threads", type=int, default=None, help="default: all usable cores")
    args = p.parse_args(argv)
    mod = backends.load(args.backend)
    rows = []
    for name in args.workloads.split(","):
        w = get_workload(name)
        bs = w.profile("full").batch_size
        model = backends.make(mod, w, canonical_weights(w), threads=args.threads)
        batches = _batches(model, w, args.steps, bs)

        def harness(model=model, batches=batches):
            timed_steps(model, model.train_step, batches, cold=False, keep_outputs=True)

        def bare(model=model, batches=batches):
            loss = None
            for b in batches:
                loss = model.train_step(b)
            model.sync(loss)

        times = interleaved({"harness": harness, "bare": bare}, rounds=args.rounds, warmup=1)
        rows.append(ratio(f"{args.backend} {name} harness/bare", times["harness"], times["bare"]))
    report(f"harness_overhead_{args.backend}", rows, {"steps_per_round": args.steps})
    return 0
