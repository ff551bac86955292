"""Lowering overhead of the Paddle backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_paddle [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S]``

For each workload the lowered model (``rosetta.backends.paddle`` from the canonical weights, its
default fast path: ``paddle.jit.to_static`` where ``static_in_effect`` chooses it) and the
hand-written Paddle model (``benchmarks/handwritten/paddle_models.py``, the lowered tensors
loaded by position, the same static choice, threads and device) first show that they compute
the same outputs (eval, float32: 1e-4 relative); then their steps run interleaved after warm-up
(``benchmarks.common.interleaved``): the cnn train step at batch 64, the gru and transformer
train steps at 64 x 150, the resnet50 features step at 32 images. The figure is the median ratio
lowered / hand-written with its bootstrap 95% interval; the target is <= 1.05. The note records
both sides' programs, the threads and the load average before and after.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from benchmarks.common import Ratio, interleaved, random_batch, ratio, report

BATCH = {"cnn": 64, "gru": 64, "resnet50": 32, "transformer": 64}  # as lowering_torch's
ROUNDS = {"cnn": 20, "gru": 20, "resnet50": 6, "transformer": 20}


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def measure(name: str, rounds: int, threads: int | None, image_size: int) -> tuple[Ratio, dict]:
    """Ratio lowered / hand-written for one workload, and its note."""
    import paddle

    from benchmarks.handwritten import paddle_models as hw
    from rosetta.backends import make
    from rosetta.runner.data import feature_images
    from rosetta.spec import canonical_weights, get_workload

    w = get_workload(name)
    if name == "resnet50" and image_size != 224:
        w = w.at_image_size(image_size)
    x, y = random_batch(w, BATCH[name])
    if name == "resnet50":
        x = feature_images(w, 0, BATCH[name])
    lowered = make("paddle", w, canonical_weights(w), dtype="float32", threads=threads)
    hand = hw.MODELS[name]()
    hw.copy_weights(lowered.net, hand)
    forward = paddle.jit.to_static(hand) if lowered.static else hand
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))  # the same tensors

    hand.eval()  # the same function first (eval: no dropout), else the timing means nothing
    want = hw.features_step(forward, batch[0]).numpy()
    got = lowered.to_numpy(lowered.predict(batch))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())

    if w.task == "train":
        hand.train()
        opt = hw.optimizer(name, hand, w.optimizer)
        steps = {
            "lowered": lambda: lowered.train_step(batch),
            "handwritten": lambda: hw.train_step(forward, opt, batch[0], batch[1]),
        }
    else:
        steps = {
            "lowered": lambda: lowered.predict(batch),
            "handwritten": lambda: hw.features_step(forward, batch[0]),
        }
    before = _load()
    times = interleaved(steps, rounds=rounds, warmup=2, sync=lambda v: float(v.numpy().ravel()[0]))
    row = ratio(f"{name} lowered/handwritten", times["lowered"], times["handwritten"])
    note = {
        "batch": list(x.shape),
        "static": lowered.static,
        "static_reason": lowered.static_reason,
        "threads": lowered.manifest().get("threads"),
        "load_before": before,
        "load_after": _load(),
        "lowered_s": times["lowered"],
        "handwritten_s": times["handwritten"],
    }
    return row, note


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks lowering_paddle")
    p.add_argument("--workloads", default="cnn,gru,resnet50,transformer")
    p.add_argument("--rounds", type=int, default=0, help="timed rounds (default: per workload)")
    p.add_argument("--threads", type=int, default=0, help="threads (default: all usable cores)")
    p.add_argument("--image-size", type=int, default=224, help="resnet50 input size")
    args = p.parse_args(argv)
    from rosetta.backends import runtime_for

    runtime_for("paddle", threads=args.threads or None)  # threads first, before Paddle starts
    rows, notes = [], {}
    for name in args.workloads.split(","):
        row, note = measure(name, args.rounds or ROUNDS[name], args.threads or None,
                            args.image_size)  # fmt: skip
        print(row.line(), flush=True)
        rows.append(row)
        notes[name] = note
    report("lowering_paddle", rows, notes)
    return 0
