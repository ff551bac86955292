"""Lowering overhead of the torch backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_torch [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--device cpu|cuda] [--hand-first] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.torch`` from the canonical weights) and
the hand-written idiomatic model (``benchmarks/handwritten/torch_models.py``, loaded with the
same weights, same memory format, same threads and device, compiled where the lowered model
compiles) first show that they compute the
same outputs; then ``benchmarks._lowering`` times their steps interleaved (the cnn, gru and
transformer train steps, the resnet50 features step) and writes lowered / hand-written with its
interval (target <= 1.05), the load and the fraction of the measured ceiling each side reaches.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks import _torch_common as tc
from benchmarks._lowering import Pair, assert_same, run, workload_batch


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])


def setup(args: argparse.Namespace) -> dict:
    import torch

    return {"device": args.device, "torch": torch.__version__}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written torch model of ``name``, checked equal."""
    import torch

    from benchmarks.handwritten import torch_models as hw
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    lowered = tc.build(w, canonical_weights(w), args.device, args.threads or None)
    hand = hw.MODELS[name]().to(args.device)
    hw.copy_weights(lowered.net, hand)
    fmt = torch.channels_last if lowered.layout == "NHWC" else torch.contiguous_format
    hand = hand.to(memory_format=fmt)
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))  # the same tensors
    compiled = w.task != "train" and lowered.compile_backend == "inductor"
    if compiled:  # the lowered features compile (inductor with freezing): so does the
        import torch._inductor.config as inductor  # hand-written model, as PyTorch's guides do

        inductor.freezing = True
        hand = torch.compile(hand, backend="inductor", dynamic=False)

    hand.eval()  # same function first (eval: no dropout), else the timing means nothing
    with torch.no_grad():
        assert_same(lowered.predict(batch).cpu().numpy(), hw.features_step(hand, batch[0]).cpu())
    facts = {"layout": lowered.manifest()["layout"], "threads": torch.get_num_threads(),
             "compile": lowered.compile_reason,
             "handwritten_compile": "inductor, freezing" if compiled else "eager"}  # fmt: skip
    sync = tc.sync_for(args.device)
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
        sides = (lambda: lowered.train_step(batch),
                 lambda: hw.train_step(hand, opt, batch[0], batch[1]))  # fmt: skip
    else:
        sides = (lambda: lowered.predict(batch), lambda: hw.features_step(hand, batch[0]))
    return Pair(*sides, train=w.task == "train", batch=len(x), sync=sync, facts=facts)


def main(argv: list[str]) -> int:
    return run("torch", prepare, argv, setup=setup, options=options)
