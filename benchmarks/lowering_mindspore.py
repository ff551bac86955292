"""Lowering overhead of the MindSpore backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_mindspore [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.mindspore`` from the canonical weights,
its default fast path) and the hand-written MindSpore model
(``benchmarks/handwritten/mindspore_models.py``, the lowered tensors loaded by position, the same
threads) first show that they compute the same outputs (eval, float32: 1e-4 relative); then
``benchmarks._lowering`` times their steps interleaved (the cnn, gru and transformer train steps,
the resnet50 features step; the lowered one under ``mindspore.jit``, its default), with the same
model in PyNative (``jit=off``) as an alternative timed in the same rounds (the jit choice's
other side), and writes lowered / hand-written with its interval, the load and the fraction
of the measured ceiling. The hand-written steps use MindSpore's own optimisers
(``nn.Momentum``, ``nn.Adam``, ``nn.AdamWeightDecay``): other rules than the spec's in epsilon's
place and AdamW's bias correction, the same passes over the parameters.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """MindSpore's threads, before MindSpore runs a kernel (it takes them once per process)."""
    from rosetta.backends import runtime_for

    runtime_for("mindspore", threads=args.threads or None)
    return {}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written MindSpore model of ``name``, checked equal."""
    from benchmarks.handwritten import mindspore_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    lowered = make("mindspore", w, canonical_weights(w), dtype="float32",
                   threads=args.threads or None)  # fmt: skip
    hand = hw.MODELS[name]()
    hw.copy_weights(lowered.net, hand)
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))  # the same tensors

    hand.set_train(False)  # the same function first (eval: no dropout), else timing means nothing
    features = hw.make_features_step(hand)
    assert_same(lowered.to_numpy(lowered.predict(batch)), features(batch[0]).asnumpy())
    man = lowered.manifest()
    facts = {"compile": man["compile"], "threads": man["threads"]}
    # the other side of the jit choice (PyNative), the same weights, timed in the same rounds
    eager = make("mindspore", w, canonical_weights(w), dtype="float32",
                 threads=args.threads or None, options={"jit": "off"})  # fmt: skip
    assert_same(lowered.to_numpy(lowered.predict(batch)), eager.to_numpy(eager.predict(batch)))
    sync = lambda v: float(lowered.to_numpy(v).ravel()[0])  # noqa: E731
    if w.task == "train":
        hand.set_train(True)
        step = hw.make_train_step(hand, hw.optimizer(name, hand, w.optimizer))
        return Pair(lambda: lowered.train_step(batch), lambda: step(batch[0], batch[1]),
                    train=True, batch=len(x), sync=sync, facts=facts,
                    alternatives={"pynative": lambda: eager.train_step(batch)})  # fmt: skip
    return Pair(lambda: lowered.predict(batch), lambda: features(batch[0]),
                train=False, batch=len(x), sync=sync, facts=facts,
                alternatives={"pynative": lambda: eager.predict(batch)})  # fmt: skip


def main(argv: list[str]) -> int:
    return run("mindspore", prepare, argv, setup=setup)
