"""bf16 against fp32 per backend: the step time ratio of the same model under the two precision
policies (issue 18's target: bf16 ResNet-50 features <= 0.6x fp32 in the fastest backend).

Each (backend, precision) runs in its own process (a framework's precision policy and thread
pools are process settings in some backends): every round starts one child per pair, the two
precisions of a backend back to back in alternating order, and each child builds the workload
with the canonical weights under ``Runtime`` (all usable cores), runs ``--warmup`` untimed steps
and ``--steps`` timed ones at ``--batch`` (``--image-size`` for images), and prints their times.
Per backend the figure is the median over rounds of the per-round ratio bf16 / fp32 of the
children's median steps, with a bootstrap 95% interval over rounds (< 1: bf16 faster). The
child also reports the effective GFLOP/s (spec FLOPs / median step) so a reader can set it
against the machine's peaks (``rosetta.runner.peak``).

    python -m benchmarks bf16_ratio [--backends torch,tensorflow,jax] [--workload resnet50]
                                    [--batch 32] [--image-size 224] [--rounds 3] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from benchmarks.common import Ratio, median_interval, random_batch, report, run_child

PRECISIONS = ("fp32", "bf16")


def child(backend: str, workload: str, precision: str, batch: int, image: int, steps: int,
          warmup: int) -> None:  # fmt: skip
    """Build and time one (backend, precision); print the step times and the model's FLOPs."""
    import time

    from rosetta.backends import make
    from rosetta.runner.data import feature_images
    from rosetta.spec import canonical_weights, get_workload

    w = get_workload(workload)
    if image and w.task != "train":
        w = w.at_image_size(image)  # the same model and parameters (global average pooling)
    model = make(backend, w, canonical_weights(w), precision=precision)
    if w.task == "train":
        x, y = random_batch(w, batch)
        b = next(iter(model.loader(x, y, np.arange(batch), batch)))

        def step():
            return model.train_step(b)
    else:
        x = feature_images(w, 0, batch)
        b = next(iter(model.loader(x, None, np.arange(batch), batch)))

        def step():
            return model.predict(b)

    for _ in range(warmup):
        model.sync(step())
    times = []
    for _ in range(steps):
        model.sync()
        t0 = time.perf_counter_ns()
        model.sync(step())
        times.append((time.perf_counter_ns() - t0) / 1e9)
    mode = model.manifest().get("precision_mode", "")
    print(json.dumps({"times": times, "shape": list(w.input.shape), "mode": mode}))


def _run_child(a: argparse.Namespace, backend: str, precision: str) -> dict:
    return run_child("bf16_ratio", [f"{backend}:{precision}", "--workload", a.workload, "--batch",
                     str(a.batch), "--image-size", str(a.image_size), "--steps", str(a.steps),
                     "--warmup", str(a.warmup)], timeout=1200)  # fmt: skip


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks bf16_ratio")
    p.add_argument("--backends", default="torch,tensorflow,jax")
    p.add_argument("--workload", default="resnet50")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224, help="features workloads only")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        backend, precision = a.child.split(":")
        child(backend, a.workload, precision, a.batch, a.image_size, a.steps, a.warmup)
        return 0
    load_before = [round(v, 2) for v in os.getloadavg()]
    rows, notes = [], {"load_before": load_before, "per_round_medians_s": {}, "modes": {}}
    for backend in a.backends.split(","):
        per_round = []
        for r in range(a.rounds):
            order = PRECISIONS if r % 2 == 0 else PRECISIONS[::-1]
            meds = {}
            for prec in order:
                res = _run_child(a, backend, prec)
                meds[prec] = float(np.median(res["times"]))
                notes["modes"][f"{backend} {prec}"] = res["mode"]
            per_round.append(meds)
            print(f"  {backend} round {r}: fp32 {meds['fp32'] * 1e3:.1f} ms, bf16 "
                  f"{meds['bf16'] * 1e3:.1f} ms", flush=True)  # fmt: skip
        ratios = np.array([m["bf16"] / m["fp32"] for m in per_round])
        lo, hi = median_interval(ratios)
        row = Ratio(
            f"{a.workload} {backend} bf16/fp32",
            float(np.median(ratios)),
            lo,
            hi,
            float(np.median([m["bf16"] for m in per_round])),
            float(np.median([m["fp32"] for m in per_round])),
            len(ratios),
        )
        print(row.line(), flush=True)
        rows.append(row)
        notes["per_round_medians_s"][backend] = per_round
    notes["load_after"] = [round(v, 2) for v in os.getloadavg()]
    notes["batch"], notes["image_size"] = a.batch, a.image_size
    report("bf16_ratio", rows, notes)
    return 0
