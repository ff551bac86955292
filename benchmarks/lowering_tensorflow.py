"""Lowering overhead of the TensorFlow/Keras backend: the lowered model's step vs the hand-written
one.

``python -m benchmarks lowering_tensorflow [--workloads cnn,gru,resnet50,transformer]
[--rounds N] [--threads N] [--image-size S] [--xla] [--layout] [--hand-first] [--no-ceiling]``

For each workload the lowered model (``rosetta.backends.tensorflow`` from the canonical weights,
its default fast path) and the model written by hand in Keras
(``benchmarks/handwritten/tensorflow_models.py``: ``compile`` with the lowered model's
``jit_compile`` choice, ``train_on_batch`` / ``predict_on_batch``, the lowered weights loaded)
first show that they compute the same outputs (inference mode, float32: 1e-4 relative); then
``benchmarks._lowering`` times their steps interleaved (the cnn, gru and transformer train
steps, the resnet50 features step) and writes lowered / hand-written with its interval, the
load and the fraction of the measured ceiling. Each step's cold first call (tracing and
compilation included) is recorded, and a lowered train step traced again while timed voids the
run.

Options time the fast-path choices too, lowered against lowered in the same rounds (rows
``<label>/lowered``): ``--xla`` the lowered step with ``jit_compile`` flipped (``xla_on`` or
``xla_off``; the steady ratio, and both cold first steps), ``--layout`` the cnn in NCHW against
the CPU's NHWC (where TensorFlow's CPU kernels refuse NCHW, the record says so instead).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--xla", action="store_true", help="also time jit_compile flipped")
    p.add_argument("--layout", action="store_true", help="also time the cnn in NCHW")


def setup(args: argparse.Namespace) -> dict:
    """TensorFlow's threads, before TensorFlow starts (its runtime selects Keras' backend)."""
    from rosetta.backends import runtime_for

    rt = runtime_for("tensorflow", threads=args.threads or None)
    import keras
    import tensorflow as tf

    return {
        "threads": rt.threads,
        "versions": f"tensorflow {tf.__version__}, keras {keras.__version__}",
    }


def _step(model, batch) -> Callable[[], object]:
    """The lowered model's timed step on ``batch``: train step, or features."""
    if model.workload.task == "train":
        return lambda: model.train_step(batch)
    return lambda: model.predict(batch)


def _first(fn: Callable[[], object]) -> tuple[np.ndarray, float]:
    """``fn()``'s value as an array and the seconds the call took: on a first call, tracing and
    compilation included (outside every clock the frame reads)."""
    t0 = time.perf_counter()
    out = np.asarray(fn())
    return out, time.perf_counter() - t0


def _alternative(model, x, y, want: np.ndarray) -> tuple[Callable[[], object], float]:
    """Another lowered form's step, once its outputs are shown equal to ``want`` (the lowered
    model's), and the seconds of its cold first step."""
    batch = next(iter(model.loader(x, y, np.arange(len(x)), len(x))))
    got, cold = _first(lambda: model.predict(batch))
    assert_same(got, want)
    step = _step(model, batch)
    return step, (_first(step)[1] if model.workload.task == "train" else cold)


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written Keras model of ``name``, checked equal (and the
    ``--xla``/``--layout`` alternatives of the lowered step)."""
    import tensorflow as tf

    from benchmarks.handwritten import tensorflow_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    params = canonical_weights(w)
    build = lambda **o: make("tensorflow", w, params, threads=args.threads or None, **o)  # noqa: E731
    lowered = build()
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))
    jit = lowered.fast.jit_compile
    hand = hw.make(name, args.image_size, jit_compile=jit)
    hw.copy_weights(lowered.net, hand)
    xh = batch[0]  # the same native tensor (NHWC images, int32 token ids)

    # the same function first (inference mode: no dropout, BatchNorm on its moving statistics)
    want, lowered_s = _first(lambda: lowered.predict(batch))
    got, hand_s = _first(lambda: hand.predict_on_batch(xh))
    assert_same(got, want)
    m = lowered.manifest()
    call = "train_on_batch" if w.task == "train" else "predict_on_batch"
    facts = {k: m[k] for k in ("layout", "compile", "compile_reason", "intra_op_threads")}
    facts["handwritten"] = f"keras Model.compile(jit_compile={jit}), {call}"
    lowered_step = _step(lowered, batch)
    if w.task == "train":
        yh = tf.constant(batch[1])
        hand_step = lambda: hand.train_on_batch(xh, yh)  # noqa: E731
        lowered_s, hand_s = _first(lowered_step)[1], _first(hand_step)[1]
    else:  # the features step is the predict step just checked
        hand_step = lambda: hand.predict_on_batch(xh)  # noqa: E731
    cold = {"lowered": lowered_s, "handwritten": hand_s}

    alternatives: dict[str, Callable[[], object]] = {}
    if args.xla:  # the XLA choice's other side
        label = "xla_off" if jit else "xla_on"
        alternatives[label], cold[label] = _alternative(build(jit_compile=not jit), x, y, want)
    if args.layout and name == "cnn":  # the layout choice's other side
        try:  # NCHW may not run on a CPU at all: that is the answer
            alternatives["NCHW"], cold["NCHW"] = _alternative(build(layout="NCHW"), x, y, want)
        except AssertionError:
            raise
        except Exception as exc:
            facts["layout_nchw_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            print(f"cnn NCHW on the CPU: {facts['layout_nchw_error']}", flush=True)
    facts["cold_first_step_s"] = cold
    traces = lowered.tracing_count() if w.task == "train" else None  # 1 once warm

    def after() -> dict:
        if traces is not None and lowered.tracing_count() != traces:
            raise RuntimeError(f"{name}: the lowered train step retraced while timed")
        return {"tracing_count": traces}

    sync = lambda v: np.asarray(v)  # noqa: E731  (CPU eager: computed once it is a value)
    return Pair(
        lowered_step,
        hand_step,
        train=w.task == "train",
        batch=len(x),
        sync=sync,
        facts=facts,
        alternatives=alternatives,
        after=after,
    )


def main(argv: list[str]) -> int:
    return run("tensorflow", prepare, argv, setup=setup, options=options)
