"""Lowering overhead of the Chainer backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_chainer [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--hand-first] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.chainer`` from the canonical weights:
define-by-run, ``type_check`` off) and the idiomatic hand-written Chainer model
(``benchmarks/handwritten/chainer_models.py``: ``type_check`` off too, as Chainer's performance
tips advise; the same canonical weights through ``load_canonical``, the same BLAS
threads) first show that they compute the same outputs (test mode, float32: 1e-4 relative);
then ``benchmarks._lowering`` times their steps interleaved (the cnn, gru and transformer train
steps: forward, backward, optimiser update; the resnet50 features step) and writes lowered /
hand-written with its interval, the load and the fraction of the measured ceiling.

The same rounds time the lowered model built with ``type_check=True`` (row
``type_check_on/lowered``): the cost of Chainer's per-call type checks that the lowered step
turns off. Dropout runs in every training step (the lowered one draws its masks from its own
seeded generator, the hand-written one from Chainer's global draw): the same work per step.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """NumPy's BLAS threads (Chainer's CPU compute), both sides', read back from the library."""
    from rosetta.backends import runtime_for
    from rosetta.backends.chainer import runtime as rt

    used = runtime_for("chainer", threads=args.threads or None).threads
    return {"threads": used, "blas": rt.blas_manifest()}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered (type checks off, and on as the alternative) and the hand-written Chainer
    model of ``name``, checked equal."""
    from benchmarks.handwritten import chainer_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    params = canonical_weights(w)
    lowered = make("chainer", w, params, threads=args.threads or None)
    checked = make("chainer", w, params, threads=args.threads or None, type_check=True)
    hand, opt = hw.make(name)
    hand.load_canonical(params)
    native = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))

    # the same function first (test mode: no dropout, BatchNorm on its running statistics)
    want = lowered.to_numpy(lowered.predict(native))
    assert_same(hw.predict(hand, x), want)
    assert_same(checked.to_numpy(checked.predict(native)), want)
    facts = {
        "layout": lowered.manifest()["layout"],
        "type_check": {"lowered": "off", "handwritten": "on" if hw.TYPE_CHECK else "off"},
        "handwritten": "chainer.Chain on canonical arrays; "
        + ("optimizer.update(lossfun, x, t)" if w.task == "train" else "test mode, no backprop"),
    }
    if w.task == "train":
        t = y.astype(np.int32)
        return Pair(
            lambda: lowered.train_step(native),
            lambda: hw.train_step(hand, opt, x, t),
            train=True,
            batch=len(x),
            facts=facts,
            alternatives={"type_check_on": lambda: checked.train_step(native)},
        )
    return Pair(
        lambda: lowered.predict(native),
        lambda: hw.predict(hand, x),
        train=False,
        batch=len(x),
        facts=facts,
        alternatives={"type_check_on": lambda: checked.predict(native)},
    )


def main(argv: list[str]) -> int:
    return run("chainer", prepare, argv, setup=setup)
