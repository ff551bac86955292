"""Lowering overhead of the JAX backend: the spec-lowered model against hand-written Flax.

``python -m benchmarks lowering_jax [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--choices] [--hand-first] [--no-ceiling]``

For each workload, the lowered model (``rosetta.backends.jax``, float32, its default fast path)
and the hand-written Flax model (``benchmarks/handwritten/jax_models.py``) run the same step (a
training step for cnn, gru and the transformer, a feature batch for resnet50) on the same batch,
threads and device; ``benchmarks._lowering`` times them interleaved after compilation and writes
lowered / hand-written with its interval (target <= 1.05), each side's compile time, the load and
the fraction of the measured ceiling. The lowered model's compile counter must not move during
the timed rounds (a steady state that recompiles fails the run).

``--choices`` also times the fast-path decisions against their alternatives, lowered against
lowered, in the same rounds: NCHW vs NHWC and XLA's kernel-gradient convolution vs per-tap GEMMs
(cnn), and the GRU scan unrolled 10x vs not (gru). ``--threads N`` goes into the runtime
(``runtime_for``), which pins the process to N cores before JAX starts its CPU client.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch

#: per workload, the fast-path choices ``--choices`` times: label -> the alternative's options
CHOICES = {
    "cnn": {"NCHW": {"layout": "NCHW"}, "xla-dW": {"conv_weight_grad": "xla"}},
    "gru": {"unroll10": {"gru_unroll": 10}},
}


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--choices", action="store_true", help="also time the fast-path choices")


def setup(args: argparse.Namespace) -> dict:
    """The runtime first: it pins the threads before any JAX client starts."""
    from rosetta.backends import runtime_for

    return {"runtime": runtime_for("jax", threads=args.threads or None).as_dict()}


def _step(model, batch) -> Callable[[], object]:
    if model.workload.task == "train":
        return lambda: model.train_step(batch)
    return lambda: model.predict(batch)


def _handwritten(name: str, model, x, y) -> tuple[Callable[[], object], Callable, float]:
    """The hand-written step (AOT-compiled), its forward function and its compile seconds."""
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
        return (lambda: compiled(*state, *batch)), compiled, compile_s

    def step():
        *new_state, loss = compiled(*state, *batch)
        state[:] = new_state
        return loss

    return step, prog.forward, compile_s


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written JAX step of ``name`` (and ``--choices``' alternatives)."""
    import jax

    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    params = canonical_weights(w)
    build = lambda **o: make("jax", w, params, threads=args.threads or None, **o)  # noqa: E731
    lowered = build()
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))
    hand, forward, hand_compile = _handwritten(name, lowered, x, y)
    if forward is not None:  # the same function first, in inference form
        assert_same(lowered.to_numpy(lowered.predict(batch)), forward(lowered.native_input(x)))
    others = {k: build(**o) for k, o in CHOICES.get(name, {}).items()} if args.choices else {}
    models = [lowered, *others.values()]
    alternatives = {k: _step(m, next(iter(m.loader(x, y, np.arange(len(x)), len(x)))))
                    for k, m in others.items()}  # fmt: skip
    steps = [_step(lowered, batch), hand, *alternatives.values()]
    for fn in steps:  # the first call compiles (lowered side), outside every clock
        jax.block_until_ready(fn())
    counts = [m.compile_count for m in models]

    def after() -> dict:
        now = [m.compile_count for m in models]
        if now != counts:
            raise RuntimeError(f"{name}: a lowered model recompiled in steady state ({counts}->{now})")
        return {"compile_s": {"lowered": dict(lowered.compile_log), "handwritten": hand_compile},
                "manifest": lowered.manifest()}  # fmt: skip

    return Pair(steps[0], hand, train=w.task == "train", batch=len(x),
                sync=jax.block_until_ready, alternatives=alternatives, after=after)  # fmt: skip


def main(argv: list[str]) -> int:
    return run("jax", prepare, argv, setup=setup, options=options)
