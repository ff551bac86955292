"""Lowering overhead of the Paddle backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_paddle [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.paddle`` from the canonical weights, its
default fast path: ``paddle.jit.to_static`` where ``static_in_effect`` chooses it) and the
hand-written Paddle model (``benchmarks/handwritten/paddle_models.py``, the lowered tensors
loaded by position, the same static choice, threads and device; features deployed through Paddle
Inference by hand where the lowered model runs it) first show that they compute
the same outputs (eval, float32: 1e-4 relative); then ``benchmarks._lowering`` times their steps
interleaved (the cnn, gru and transformer train steps, the resnet50 features step) and writes
lowered / hand-written with its interval, the load and the fraction of the measured ceiling.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """Paddle's threads, before Paddle starts."""
    from rosetta.backends import runtime_for

    runtime_for("paddle", threads=args.threads or None)
    return {}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written Paddle model of ``name``, checked equal."""
    import paddle

    from benchmarks.handwritten import paddle_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    lowered = make("paddle", w, canonical_weights(w), dtype="float32", threads=args.threads or None)
    hand = hw.MODELS[name]()
    hw.copy_weights(lowered.net, hand)
    forward = paddle.jit.to_static(hand) if lowered.static else hand
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))  # the same tensors

    hand.eval()  # the same function first (eval: no dropout), else the timing means nothing
    assert_same(lowered.to_numpy(lowered.predict(batch)), hw.features_step(forward, batch[0]))
    facts = {"static": lowered.static, "static_reason": lowered.static_reason,
             "predictor": lowered.infer, "predictor_reason": lowered.infer_reason,
             "threads": lowered.manifest().get("threads")}  # fmt: skip
    sync = lambda v: float(lowered.to_numpy(v).ravel()[0])  # noqa: E731
    if lowered.infer:  # forward only through Paddle Inference: the hand-written deployment too
        run = hw.deploy(hand, w.input.shape, lowered.runtime.wanted_threads)
        assert_same(lowered.to_numpy(lowered.predict(batch)), run(batch[0].numpy()))
        facts["features"] = lowered.manifest()["features"]
        return Pair(lambda: lowered.predict(batch), lambda: run(batch[0].numpy()),
                    train=False, batch=len(x), sync=sync, facts=facts)  # fmt: skip
    if w.task == "train":
        hand.train()
        opt = hw.optimizer(name, hand, w.optimizer)
        return Pair(lambda: lowered.train_step(batch),
                    lambda: hw.train_step(forward, opt, batch[0], batch[1]),
                    train=True, batch=len(x), sync=sync, facts=facts)  # fmt: skip
    return Pair(lambda: lowered.predict(batch), lambda: hw.features_step(forward, batch[0]),
                train=False, batch=len(x), sync=sync, facts=facts)  # fmt: skip


def main(argv: list[str]) -> int:
    return run("paddle", prepare, argv, setup=setup)
