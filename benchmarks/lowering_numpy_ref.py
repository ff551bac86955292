"""Lowering overhead of the NumPy reference: the lowered model's step against NumPy written by
hand.

``python -m benchmarks lowering_numpy_ref [--workloads cnn,gru,resnet50,transformer]
[--rounds N] [--threads N] [--image-size S] [--hand-first] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.numpy_ref`` from the canonical weights,
float32: the spec graph interpreted through its layer table, channels-first images) and the
hand-written one (``benchmarks/handwritten/numpy_models.py``: cs231n-style layer functions,
NHWC images, one ``tensordot`` per convolution, the lowered weights loaded by name) first show
the same evaluation forward (float32, 1e-4 relative); then ``benchmarks._lowering`` times the
steps interleaved (the cnn, gru and transformer train steps with their optimisers, the resnet50
features step) and writes lowered / hand-written with its interval, the load and the fraction
of the measured ceiling. Both sides run on the same BLAS with the same threads (threadpoolctl);
each gets its batch in its own form (the lowered loader's arrays; the hand-written NCHW images
or ids, transposed to NHWC inside its step).
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """NumPy's BLAS threads (both sides' matrix products), before anything runs."""
    from rosetta.backends import runtime_for
    from rosetta.backends.numpy_ref.runtime import blas_pools

    rt = runtime_for("numpy_ref", threads=args.threads or None)
    pools = [{k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
             for p in blas_pools()]  # fmt: skip
    return {"threads": rt.threads, "numpy": np.__version__, "blas": pools}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written NumPy model of ``name``, checked equal."""
    from benchmarks.handwritten import numpy_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    lowered = make("numpy_ref", w, canonical_weights(w), dtype="float32",
                   threads=args.threads or None)  # fmt: skip
    hand = hw.MODELS[name]("float32")
    hw.copy_weights(lowered, hand)
    train = w.task == "train"
    batch = next(iter(lowered.loader(x, y if train else None, np.arange(len(x)), len(x))))
    # the same function first (evaluation: no dropout), else the timing means nothing
    assert_same(hw.features_step(hand, x), lowered.to_numpy(lowered.predict(batch)))
    facts = {
        "layout": {
            "lowered": lowered.manifest().get("layout"),
            "handwritten": _HAND_LAYOUT[name],
        },
        "dtype": "float32 on both sides",
    }
    if train:
        lowered_step = lambda: lowered.train_step(batch)  # noqa: E731
        hand_step = lambda: hw.train_step(hand, x, y, w.optimizer)  # noqa: E731
    else:
        lowered_step = lambda: lowered.predict(batch)  # noqa: E731
        hand_step = lambda: hw.features_step(hand, x)  # noqa: E731
    return Pair(lowered_step, hand_step, train=train, batch=len(x), sync=np.asarray, facts=facts)


#: the hand-written models' layouts, for the record
_HAND_LAYOUT = {
    "cnn": "NHWC inside (NCHW batch transposed per step): tensordot of the padded window view "
    "(N, Ho, Wo, C, 3, 3) with (C, 3, 3, O) kernels",
    "resnet50": "NHWC inside: tensordot per KxK convolution, a matrix product per 1x1; "
    "BatchNorm folded into a per-channel scale and shift at load",
    "gru": "batch-major (N, T): the input projection one GEMM over all steps, a loop over time",
    "transformer": "batch-major (N, T, E), heads (N, h, T, d) as views",
}


def main(argv: list[str]) -> int:
    return run("numpy_ref", prepare, argv, setup=setup)
