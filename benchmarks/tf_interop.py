"""TensorFlow's inter-op pool for the GRU: 1 thread against 2 (the cell's default: ``n`` for both
pools, ``backends/tensorflow/runtime.py``).

TensorFlow fixes its pools when its eager context starts, so each setting runs in its own
process: every round starts one child per setting, in alternating order (1 2, 2 1, ...), and
each child builds the GRU with the canonical weights under the runtime (intra-op = all usable
cores), then times ``--steps`` train steps at batch 64 x 150 after 3 warm-up steps and prints
their times. The figure is the median over rounds of the per-round ratio of the children's
median steps (inter-op 1 / inter-op 2), with a bootstrap 95% interval over rounds (< 1: one
inter-op thread faster). Machine load is read before and after.

    python -m benchmarks tf_interop [--rounds 6] [--steps 20] [--workload gru]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from benchmarks.common import Ratio, median_interval, random_batch, report

SETTINGS = (1, 2)


def child(workload: str, inter: int, steps: int) -> None:
    """Build ``workload`` with ``inter`` inter-op threads and print its step times (JSON)."""
    import time

    from rosetta.backends import make
    from rosetta.backends import tensorflow as tf_backend
    from rosetta.backends.tensorflow import runtime as tf_runtime
    from rosetta.spec import canonical_weights, get_workload

    def set_threads(n: int) -> int:  # the runtime's sizing, with the inter-op pool overridden
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(inter)
        return tf_runtime.threads()[0]

    tf_runtime.set_threads = set_threads
    w = get_workload(workload)
    model = make(tf_backend, w, canonical_weights(w))
    n = 64
    x, y = random_batch(w, n)
    batch = next(iter(model.loader(x, y, np.arange(n), n)))
    for _ in range(3):
        model.sync(model.train_step(batch))
    times = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        model.sync(model.train_step(batch))
        times.append((time.perf_counter_ns() - t0) / 1e9)
    print(json.dumps({"threads": tf_runtime.threads(), "times": times}))


def _run_child(workload: str, inter: int, steps: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks", "tf_interop", "--child", str(inter),
           "--workload", workload, "--steps", str(steps)]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks tf_interop")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workload", default="gru")
    p.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.workload, args.child, args.steps)
        return 0
    load_before = [round(v, 2) for v in os.getloadavg()]
    per_round: list[dict[int, float]] = []
    pools = {}
    for r in range(args.rounds):
        order = SETTINGS if r % 2 == 0 else SETTINGS[::-1]
        meds = {}
        for inter in order:
            res = _run_child(args.workload, inter, args.steps)
            meds[inter] = float(np.median(res["times"]))
            pools[inter] = res["threads"]
        per_round.append(meds)
        print(f"  round {r}: " + ", ".join(f"inter-op {k}: {v * 1e3:.1f} ms" for k, v in
                                           sorted(meds.items())), flush=True)  # fmt: skip
    ratios = np.array([m[1] / m[2] for m in per_round])
    lo, hi = median_interval(ratios)
    row = Ratio(
        f"{args.workload} tf inter-op 1/2",
        float(np.median(ratios)),
        float(lo),
        float(hi),
        float(np.median([m[1] for m in per_round])),
        float(np.median([m[2] for m in per_round])),
        len(ratios),
    )
    print(row.line(), flush=True)
    notes = {
        "pools (intra, inter) read back per setting": {str(k): v for k, v in pools.items()},
        "load_before": load_before,
        "load_after": [round(v, 2) for v in os.getloadavg()],
        "per_round_medians_s": per_round,
    }
    report("tf_interop", [row], notes)
    return 0
