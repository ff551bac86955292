"""Lowering overhead of the TensorFlow/Keras backend: the lowered model's step against the same
model written by hand in Keras (``handwritten/tensorflow_models.py``), same weights, same threads,
interleaved after warm-up (``common.interleaved``); the median ratio with its 95% interval.

- cnn: train step at batch 64 (lowered ``train_step`` vs ``train_on_batch``);
- gru: train step at batch 64 x 150;
- resnet50: features at batch 32 x 224^2 (lowered ``predict`` vs ``predict_on_batch``), with the
  fraction of the machine's fp32 GEMM peak (``--peak-gflops``, 200 here) it reaches.

Options measure the fast-path choices too: ``--xla`` times each workload's lowered step with
``jit_compile`` on and off (cold: the first step, tracing and compilation included; steady: the
interleaved ratio), ``--layout`` the CNN in NHWC against NCHW. Each run writes
``benchmarks/out/lowering_tensorflow.json``. The runtime (threads, ``--threads``, default all
usable cores) is configured once, before Keras is imported, and every model is built under it.
Usage: ``python -m benchmarks lowering_tensorflow [--rounds 8] [--workloads cnn,gru,resnet50]
[--xla] [--threads N]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import interleaved, ratio, report
from rosetta import backends
from rosetta.backends import runtime_for
from rosetta.spec import canonical_weights, get_workload

BATCH = {"cnn": 64, "gru": 64, "resnet50": 32}


def _data(w, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    if w.input.dtype == "int32":
        x = rng.integers(3, 30000, size=(n, w.input.shape[0])).astype(np.int32)
        x[: n // 2, :50] = 0  # some pre-padding
    else:
        x = rng.random((n, *w.input.shape), dtype=np.float32)
    y = rng.integers(0, w.output_shape[0], size=n) if w.task == "train" else None
    return x, y


def _copy_weights(lowered, hand) -> None:
    """Give the hand-written model the lowered one's (native) weights: by layer name for the
    functional ResNet (``layer1_0_proj_bn`` is ``layer1.0.proj_bn``), by position otherwise."""
    mine = [ly for ly in hand.layers if ly.weights]
    if hand.name == "handwritten_resnet50":
        for layer in mine:
            parts = layer.name.split("_", 2)
            name = ".".join(parts) if layer.name.startswith("layer") else layer.name
            layer.set_weights(lowered.net.get_layer(name).get_weights())
        return
    theirs = [ly for ly in lowered.net.layers if ly.weights]
    for a, b in zip(mine, theirs, strict=True):
        a.set_weights(b.get_weights())


def _pair(name: str, tfb, rt, hand_module, args):
    """``(lowered, hand, steps, flops)`` for one workload: the two callables to interleave."""
    import tensorflow as tf

    w = get_workload(name)
    if name == "resnet50" and args.resnet_size != 224:
        w = w.at_image_size(args.resnet_size)
    bs = BATCH[name]
    x, y = _data(w, bs)
    lowered = tfb.build(w, canonical_weights(w, 0), rt)
    batch = next(iter(lowered.loader(x, y, np.arange(bs), bs)))
    jit = lowered.fast.jit_compile
    if name == "resnet50":
        hand = hand_module.resnet50(args.resnet_size, jit_compile=jit)
    else:
        hand = getattr(hand_module, name)(jit_compile=jit)
    _copy_weights(lowered, hand)
    xh = batch[0]  # the same native tensor (NHWC / token ids)
    got = hand.predict_on_batch(xh)
    want = lowered.to_numpy(lowered.predict(batch))
    same = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    if w.task == "train":
        yh = tf.constant(batch[1])
        steps = {
            "lowered": lambda: lowered.to_numpy(lowered.train_step(batch)),
            "handwritten": lambda: hand.train_on_batch(xh, yh),
        }
    else:
        steps = {
            "lowered": lambda: lowered.to_numpy(lowered.predict(batch)),
            "handwritten": lambda: hand.predict_on_batch(xh),
        }
    flops = w.flops_per_sample() * bs
    return lowered, steps, flops, same


def _cold_and_steady(label: str, builds: dict, args) -> tuple[list, dict]:
    """Cold first step and interleaved steady ratio of several lowered variants of one step."""
    cold, steps = {}, {}
    for key, (model, batch, train) in builds.items():
        fn = (
            (lambda m=model, b=batch: m.to_numpy(m.train_step(b)))
            if train
            else (lambda m=model, b=batch: m.to_numpy(m.predict(b)))
        )
        t0 = time.perf_counter()
        fn()
        cold[key] = time.perf_counter() - t0
        steps[key] = fn
    times = interleaved(steps, rounds=args.rounds, warmup=1)
    a, b = list(times)
    return [ratio(f"{label} {a}/{b}", times[a], times[b])], cold


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks lowering_tensorflow")
    p.add_argument("--rounds", type=int, default=8, help="timed rounds per side (default 8)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--resnet-size", type=int, default=224)
    p.add_argument("--peak-gflops", type=float, default=200.0, help="fp32 GEMM peak, GFLOP/s")
    p.add_argument("--xla", action="store_true", help="also time jit_compile on vs off")
    p.add_argument("--layout", action="store_true", help="also time the CNN in NHWC vs NCHW")
    p.add_argument("--skip-overhead", action="store_true", help="only the --xla/--layout parts")
    p.add_argument("--threads", type=int, default=None, help="threads (default: all usable)")
    args = p.parse_args(argv)

    tfb = backends.load("tensorflow")
    rt = runtime_for(tfb, threads=args.threads)  # selects Keras' TensorFlow backend, sizes pools
    from benchmarks.handwritten import tensorflow_models as hand_module

    rows, notes = [], {"threads": rt.threads, "workloads": {}}
    for name in [n for n in args.workloads.split(",") if n]:
        note: dict = {}
        if not args.skip_overhead:
            lowered, steps, flops, same = _pair(name, tfb, rt, hand_module, args)
            note["fast_path"] = {k: lowered.manifest()[k] for k in ("layout", "compile")}
            note["handwritten_vs_lowered_max_rel_diff"] = same
            times = interleaved(steps, rounds=args.rounds, warmup=args.warmup)
            r = ratio(f"{name} lowered/handwritten", times["lowered"], times["handwritten"])
            rows.append(r)
            if name == "resnet50":
                gflops = flops / r.median_a / 1e9
                note["achieved_gflops"] = gflops
                note["fraction_of_peak"] = gflops / args.peak_gflops
                print(f"resnet50: {gflops:.1f} GFLOP/s = {gflops / args.peak_gflops:.1%} of peak")
        if args.xla:
            w = get_workload(name)
            if name == "resnet50" and args.resnet_size != 224:
                w = w.at_image_size(args.resnet_size)
            x, y = _data(w, BATCH[name])
            builds = {}
            for jit in (True, False):
                m = tfb.build(w, canonical_weights(w, 0), rt, jit_compile=jit)
                b = next(iter(m.loader(x, y, np.arange(len(x)), len(x))))
                builds["xla" if jit else "noxla"] = (m, b, w.task == "train")
            r_rows, cold = _cold_and_steady(name, builds, args)
            rows += r_rows
            note["xla_cold_first_step_s"] = cold
            print(f"{name}: cold first step {cold}")
        if args.layout and name == "cnn":
            w = get_workload("cnn")
            x, y = _data(w, 64)
            builds = {}
            for layout in ("NHWC", "NCHW"):
                m = tfb.build(w, canonical_weights(w, 0), rt, layout=layout)
                builds[layout] = (m, next(iter(m.loader(x, y, np.arange(64), 64))), True)
            try:
                r_rows, cold = _cold_and_steady("cnn layout", builds, args)
                rows += r_rows
                note["layout_cold_first_step_s"] = cold
            except Exception as exc:  # NCHW may not run on a CPU at all: that is the answer
                note["layout_nchw_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(f"cnn NCHW on CPU: {note['layout_nchw_error']}")
        notes["workloads"][name] = note
    report("lowering_tensorflow", rows, notes)
    return 0
