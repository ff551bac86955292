"""Lowering overhead of the torch backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_torch [--workloads cnn,gru,resnet50] [--rounds N] [--threads N]``

For each workload the lowered model (``rosetta.backends.torch.build`` from the canonical weights)
and the hand-written idiomatic model (``benchmarks/handwritten/torch_models.py``, loaded with the
same weights, same memory format, same threads and device) first show that they compute the
same outputs; then their steps are timed interleaved after warm-up: the cnn train step at batch
64, the gru and the transformer train steps at 64 x 150, the resnet50 features step at
32 x 224^2. The figure is the median ratio lowered / hand-written with a bootstrap 95%
interval; the target is <= 1.05. For resnet50 and the transformer the note also gives the
fraction of the machine's fp32 GEMM peak the backend reaches (the spec's FLOPs, attention
included).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks import _torch_common as tc
from benchmarks.common import Ratio, interleaved, ratio, report
from benchmarks.handwritten import torch_models as hw
from rosetta.spec import canonical_weights

#: default timed rounds per workload (each round times both sides once): a few minutes in all
ROUNDS = {"cnn": 20, "gru": 30, "resnet50": 8, "transformer": 20}


def measure(
    name: str, rounds: int, device: str, threads: int | None, hand_first: bool = False
) -> tuple[Ratio, dict]:
    """Ratio lowered / hand-written for one workload, and its note."""
    w, x, y = tc.workload_batch(name)
    lowered = tc.build(w, canonical_weights(w), device, threads)
    hand = hw.MODELS[name]().to(device)
    hw.copy_weights(lowered.net, hand)
    fmt = torch.channels_last if lowered.layout == "NHWC" else torch.contiguous_format
    hand = hand.to(memory_format=fmt)
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))  # the same tensors

    hand.eval()  # same function first (eval: no dropout), else the timing means nothing
    want = hw.features_step(hand, batch[0])
    got = lowered.predict(batch)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)

    if w.task == "train":
        hand.train()
        o = w.optimizer
        betas = (getattr(o, "beta1", 0.9), getattr(o, "beta2", 0.999))
        if name == "cnn":
            opt = torch.optim.SGD(hand.parameters(), lr=o.lr, momentum=o.momentum)
        elif name == "transformer":
            groups = hw.adamw_groups(hand, o.weight_decay)
            opt = torch.optim.AdamW(groups, lr=o.lr, betas=betas, eps=o.eps)
        else:
            opt = torch.optim.Adam(hand.parameters(), lr=o.lr, betas=betas, eps=o.eps)
        steps = {
            "lowered": lambda: lowered.train_step(batch),
            "handwritten": lambda: hw.train_step(hand, opt, batch[0], batch[1]),
        }
    else:
        steps = {
            "lowered": lambda: lowered.predict(batch),
            "handwritten": lambda: hw.features_step(hand, batch[0]),
        }
    if hand_first:  # the order within a round, to rule out a first-mover effect
        steps = dict(reversed(steps.items()))
    before = tc.load_avg()
    times = interleaved(steps, rounds=rounds, warmup=2, sync=tc.sync_for(device))
    row = ratio(f"{name} lowered/handwritten", times["lowered"], times["handwritten"])
    note = {
        "batch": list(batch[0].shape),
        "layout": lowered.manifest()["layout"],
        "threads": torch.get_num_threads(),
        "load_before": before,
        "load_after": tc.load_avg(),
        "lowered_s": times["lowered"],
        "handwritten_s": times["handwritten"],
    }
    if name in ("resnet50", "transformer"):
        # spec FLOPs of the forward pass; a train step is ~3x that (forward + backward)
        gflop = w.flops_per_sample() * len(x) / 1e9 * (3 if w.task == "train" else 1)
        peak = tc.GEMM_PEAK_GFLOPS_PER_THREAD * torch.get_num_threads()  # CPU figure only
        note["gflop_per_batch"] = gflop
        note["gflops_lowered"] = gflop / row.median_a
        note["gemm_peak_gflops"] = peak
        note["fraction_of_gemm_peak"] = gflop / row.median_a / peak
        note["floor_s_at_peak"] = gflop / peak
    return row, note


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks lowering_torch")
    p.add_argument("--workloads", default="cnn,gru,resnet50,transformer")
    p.add_argument("--rounds", type=int, default=0, help="timed rounds (default: per workload)")
    p.add_argument("--threads", type=int, default=0, help="threads (default: all usable cores)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--hand-first", action="store_true", help="time hand-written first per round")
    args = p.parse_args(argv)
    rows, notes = [], {"device": args.device, "torch": torch.__version__}
    notes["order"] = "handwritten first" if args.hand_first else "lowered first"
    for name in args.workloads.split(","):
        row, note = measure(
            name, args.rounds or ROUNDS[name], args.device, args.threads, args.hand_first
        )
        print(row.line(), flush=True)
        rows.append(row)
        notes[name] = note
    report("lowering_torch", rows, notes)
    return 0
