"""The measurement behind the paddle backend's ``paddle_static`` default (``rosetta.runtime.
paddle_static_in_effect``): ``paddle.jit.to_static`` against the dynamic graph, per workload.

``python -m benchmarks fastpath_paddle [--workloads cnn,gru,resnet50] [--rounds-scale F]
[--threads N]``

For each workload: the cold start (build + first step, where to_static translates and builds
its programs) once each way, then the steady step interleaved (training workloads: the timed
``train_step``; resnet50: ``predict`` on 32 x 224^2); ratio static / dynamic (< 1: to_static
faster). Run it alone on a quiet machine; make ``default`` static for a task only where the
interval of the ratio lies below 1 and the cold start it adds is worth it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks import _torch_common as tc  # its batches and load readings are framework-free
from benchmarks.common import Ratio, interleaved, ratio, report
from rosetta.backends import make
from rosetta.spec import canonical_weights


def _step(model, batch):
    if model.workload.task == "train":
        return lambda: model.train_step(batch)
    return lambda: model.predict(batch)


def static(name: str, rounds: int, threads: int | None) -> tuple[Ratio, dict]:
    """to_static / dynamic graph: cold start once each, steady step interleaved."""
    w, x, y = tc.workload_batch(name)
    params = canonical_weights(w)
    steps, cold = {}, {}
    for mode in ("dynamic", "static"):
        t0 = time.perf_counter()
        m = make("paddle", w, params, threads=threads or None, paddle_static=(
            "on" if mode == "static" else "off"))  # fmt: skip
        batch = next(iter(m.loader(x, y, np.arange(len(x)), len(x))))
        step = _step(m, batch)
        step()
        cold[mode] = time.perf_counter() - t0
        steps[mode] = step
        print(f"  {name} {mode}: cold start {cold[mode]:.1f} s", flush=True)
    times = interleaved(steps, rounds=rounds, warmup=2)
    row = ratio(f"{name} to_static/dynamic", times["static"], times["dynamic"])
    return row, {"cold_start_s": cold, "load": tc.load_avg()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks fastpath_paddle")
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--rounds-scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    rounds = {"cnn": 15, "gru": 20, "resnet50": 5}
    rows, notes = [], {}
    for name in args.workloads.split(","):
        n = max(3, round(rounds[name] * args.rounds_scale))
        row, note = static(name, n, args.threads)
        print(row.line(), flush=True)
        rows.append(row)
        notes[f"static {name}"] = note
    report("fastpath_paddle", rows, notes)
    return 0
