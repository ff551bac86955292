"""Lowering overhead of the JAX backend: the spec-lowered model against hand-written Flax.

``python -m benchmarks lowering_jax [--workloads cnn,gru,resnet50,transformer] [--rounds 5]
[--choices]``

For each workload, the lowered model (``rosetta.backends.jax``, float32, its default fast path)
and the hand-written Flax model (``benchmarks/handwritten/jax_models.py``) run the same step (a
training step for cnn and gru, a feature batch for resnet50) on the same batch size, threads and
device, interleaved after compilation (``benchmarks.common.interleaved``). Reported: the ratio of
median step times (lowered / hand-written; target <= 1.05) with its bootstrap 95% interval, each
side's compile time, the achieved GFLOP/s and its fraction of the CPU's fp32 GEMM peak
(``--peak-gflops``, 200 here). The lowered model's compile counter must not move during the
timed rounds (a steady state that recompiles fails the run).

``--choices`` also times the fast-path decisions against their alternatives, lowered against
lowered: NCHW vs NHWC and XLA's kernel-gradient convolution vs per-tap GEMMs (cnn), and the GRU
scan unrolled 10x vs not (gru). ``--threads N`` goes into the runtime (``runtime_for``), which
pins the process to N cores before JAX starts its CPU client.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable

import numpy as np

from benchmarks.common import Ratio, interleaved, ratio, report

BATCH = {"cnn": 64, "gru": 64, "resnet50": 32, "transformer": 64}  # the specs' `full` profiles


def _inputs(workload, batch: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    if workload.input.dtype == "int32":
        x = rng.integers(1, 30000, size=(batch, *workload.input.shape)).astype(np.int32)
    else:
        x = rng.random((batch, *workload.input.shape), dtype=np.float32)
    y = rng.integers(0, workload.output_shape[0], size=batch) if workload.task == "train" else None
    return x, y


def _lowered_step(model, x, y) -> Callable[[], object]:
    order = np.arange(len(x))
    batch = next(iter(model.loader(x, y, order, len(x))))
    if model.workload.task == "train":
        return lambda: model.train_step(batch)
    return lambda: model.predict(batch)


def _handwritten_step(name: str, model, x, y) -> tuple[Callable[[], object], float]:
    """The hand-written step (AOT-compiled, timed) and its compile seconds."""
    import jax

    from benchmarks.handwritten.jax_models import make

    xb = jax.device_put(model.native_input(x))
    batch = (xb,) if y is None else (xb, jax.device_put(y.astype(np.int32)))
    prog = make(name, batch)
    t0 = time.perf_counter()
    compiled = prog.step.lower(*prog.state, *batch).compile()
    compile_s = time.perf_counter() - t0
    state = list(prog.state)
    if not prog.train:
        return (lambda: compiled(*state, *batch)), compile_s

    def step():
        *new_state, loss = compiled(*state, *batch)
        state[:] = new_state
        return loss

    return step, compile_s


def _compare(name: str, steps: dict[str, Callable], rounds: int, models: list) -> dict:
    import jax

    for fn in steps.values():  # the first call compiles (lowered side), outside every clock
        jax.block_until_ready(fn())
    counts = [m.compile_count for m in models]
    times = interleaved(steps, rounds=rounds, warmup=1, sync=jax.block_until_ready)
    after = [m.compile_count for m in models]
    if after != counts:
        raise RuntimeError(
            f"{name}: the lowered model recompiled in steady state ({counts}->{after})"
        )
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks lowering_jax")
    p.add_argument("--workloads", default="cnn,gru,resnet50,transformer")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per comparison")
    p.add_argument("--image-size", type=int, default=224, help="resnet50 input size")
    p.add_argument("--peak-gflops", type=float, default=200.0, help="fp32 GEMM peak here")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    p.add_argument("--choices", action="store_true", help="also time the fast-path choices")
    args = p.parse_args(argv)

    from rosetta.backends import make, runtime_for
    from rosetta.spec import canonical_weights, get_workload

    rt = runtime_for("jax", threads=args.threads)  # threads first: before any JAX client starts
    build = functools.partial(make, "jax", threads=args.threads)

    load_before = os.getloadavg()
    rows: list[Ratio] = []
    notes: dict = {"compile_s": {}, "gflops": {}, "fraction_of_peak": {}}
    for name in args.workloads.split(","):
        w = get_workload(name)
        if name == "resnet50" and args.image_size != 224:
            w = w.at_image_size(args.image_size)
        params = canonical_weights(w)
        x, y = _inputs(w, BATCH[name])
        lowered = build(w, params)
        hand, hand_compile = _handwritten_step(name, lowered, x, y)
        times = _compare(
            name, {"lowered": _lowered_step(lowered, x, y), "handwritten": hand}, args.rounds,
            [lowered],
        )  # fmt: skip
        r = ratio(f"{name} lowered/handwritten", times["lowered"], times["handwritten"])
        rows.append(r)
        flops = w.flops_per_sample() * len(x) * (3 if w.task == "train" else 1)
        gflops = flops / r.median_a / 1e9
        notes["compile_s"][name] = {
            "lowered": dict(lowered.compile_log),
            "handwritten": round(hand_compile, 3),
        }
        notes["gflops"][name] = round(gflops, 2)
        notes["fraction_of_peak"][name] = round(gflops / args.peak_gflops, 4)
        if args.choices:
            rows.extend(_choices(build, name, w, params, x, y, args.rounds, notes))
    notes["manifest"] = lowered.manifest()
    notes["load_avg_before"] = list(load_before)
    notes["runtime"] = rt.as_dict()
    report("lowering_jax", rows, notes)
    for name in notes["gflops"]:
        print(
            f"{name}: {notes['gflops'][name]} GFLOP/s = {notes['fraction_of_peak'][name]:.1%} of "
            f"{args.peak_gflops:g}; compile {notes['compile_s'][name]}"
        )
    print(f"load average before {load_before}, after {os.getloadavg()}")
    return 0


def _choices(build, name, w, params, x, y, rounds, notes) -> list[Ratio]:
    """Each fast-path choice against its alternative, both lowered, interleaved."""
    variants = {
        "cnn": {
            "NCHW/NHWC": ({"layout": "NCHW"}, {}),
            "xla-dW/gemm-dW": ({"conv_weight_grad": "xla"}, {}),
        },
        "gru": {"unroll10/unroll1": ({"gru_unroll": 10}, {"gru_unroll": 1})},
    }.get(name, {})
    rows = []
    for label, (alt, default) in variants.items():
        a, b = build(w, params, **alt), build(w, params, **default)
        times = _compare(
            label,
            {"alt": _lowered_step(a, x, y), "default": _lowered_step(b, x, y)},
            rounds,
            [a, b],
        )
        rows.append(ratio(f"{name} {label}", times["alt"], times["default"]))
        notes["compile_s"][f"{name} {label}"] = [dict(a.compile_log), dict(b.compile_log)]
    return rows
