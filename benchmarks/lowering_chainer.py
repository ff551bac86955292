"""Lowering overhead of the Chainer backend: the lowered model's step vs a hand-written one.

For each workload, the model ``rosetta.backends.chainer`` builds from the spec and the
idiomatic hand-written Chainer model (``benchmarks/handwritten/chainer_models.py``) start from
the same canonical weights (their outputs are checked to agree first), get the same batch and
the same BLAS threads, and are timed in alternation after warm-up (``common.interleaved``).
Rows: ``lowered / handwritten`` (the target is <= 1.05) and ``type_check on / off`` for the
lowered model (the cost of Chainer's per-call type checks that the timed face turns off).
A training step is forward + backward + optimiser update; resnet50 is one inference batch.
FLOP rates count a training step as 3x the forward FLOPs (forward, and backward for inputs and
weights), against the ~200 GFLOP/s GEMM peak of the reference machine.

    python -m benchmarks lowering_chainer [--workloads cnn,gru,resnet50] [--rounds 5]
        [--warmup 1] [--threads N] [--resnet-size 112]

Dropout runs in both models' training steps (the lowered one draws its masks from its own seeded
generator, the hand-written one from Chainer's global draw): the same work per step.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from benchmarks.common import interleaved, ratio, report
from rosetta.backends import make, runtime_for
from rosetta.runner.data import feature_images
from rosetta.spec import canonical_weights, get_workload

GEMM_PEAK = 200e9  # FLOP/s, measured GEMM peak of the reference CPU (both cores)


def _batch(workload, n: int):
    rng = np.random.default_rng(0)
    if workload.name == "resnet50":
        return feature_images(workload, 0, n), None
    if workload.name == "gru":
        (t,) = workload.input.shape
        return rng.integers(3, 30000, size=(n, t)).astype(np.int32), rng.integers(0, 2, n)
    return rng.random((n, *workload.input.shape), dtype=np.float32), rng.integers(0, 10, n)


def bench_workload(
    name: str, rounds: int, warmup: int, resnet_size: int, threads: int | None
) -> tuple[list, dict]:
    from benchmarks.handwritten import chainer_models as hw

    w = get_workload(name)
    if name == "resnet50":
        w = w.at_image_size(resnet_size)
    bs = w.profile("ci").batch_size
    params = canonical_weights(w, 0)
    # every build configures the same runtime (BLAS threads), which the hand-written model shares
    lowered = make("chainer", w, params, threads=threads)
    checked = make("chainer", w, params, threads=threads, type_check=True)
    hand, opt = hw.make(name)
    hand.load_canonical(params)
    if opt is not None:
        opt.setup(hand)
    x, y = _batch(w, bs)
    # the same function first: forward outputs agree within the spec's float32 tolerance
    w.tolerances["float32"].forward.check(
        hw.predict(hand, x), lowered.predict_numpy(x), f"{name}: hand-written vs lowered"
    )
    native = next(iter(lowered.loader(x, y, np.arange(bs), bs)))
    if w.task == "train":
        t32 = y.astype(np.int32)
        steps = {
            "lowered": lambda: lowered.train_step(native),
            "handwritten": lambda: hw.train_step(hand, opt, x, t32),
            "type_check_on": lambda: checked.train_step(native),
        }
        flops = 3 * w.flops_per_sample() * bs
    else:
        steps = {
            "lowered": lambda: lowered.predict(native),
            "handwritten": lambda: hw.predict(hand, x),
            "type_check_on": lambda: checked.predict(native),
        }
        flops = w.flops_per_sample() * bs
    times = interleaved(steps, rounds=rounds, warmup=warmup)
    rows = [
        ratio(f"{name} lowered / handwritten", times["lowered"], times["handwritten"]),
        ratio(f"{name} type_check on / off", times["type_check_on"], times["lowered"]),
    ]
    med = float(np.median(times["lowered"]))
    notes = {
        "batch": bs,
        "input_shape": list(w.input.shape),
        "step": "train (fwd+bwd+update)" if w.task == "train" else "inference batch",
        "lowered_median_s": med,
        "handwritten_median_s": float(np.median(times["handwritten"])),
        "gflop_per_step": flops / 1e9,
        "gflops_lowered": flops / med / 1e9,
        "fraction_of_gemm_peak": flops / med / GEMM_PEAK,
    }
    return rows, notes


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks lowering_chainer")
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per model (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS threads for both sides (default: every usable core)",
    )
    p.add_argument("--resnet-size", type=int, default=112, help="resnet50 input size (224: full)")
    args = p.parse_args(argv)
    used = runtime_for("chainer", threads=args.threads).threads  # read back from NumPy's BLAS
    rows, notes = [], {"threads": used, "load_avg_before": list(os.getloadavg())}
    for name in args.workloads.split(","):
        r, n = bench_workload(name, args.rounds, args.warmup, args.resnet_size, args.threads)
        rows.extend(r)
        notes[name] = n
        print(
            f"{name}: lowered {n['lowered_median_s']:.3f} s/step, {n['gflops_lowered']:.1f} "
            f"GFLOP/s = {100 * n['fraction_of_gemm_peak']:.1f}% of the GEMM peak"
        )
    report("lowering_chainer", rows, notes)
    return 0
