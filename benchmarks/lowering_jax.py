"""Lowering overhead of the JAX backend: the spec-lowered model against hand-written Flax.

``python -m benchmarks lowering_jax [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--choices] [--hand-first] [--no-ceiling]``

For each workload, the lowered model (``rosetta.backends.jax`` from the canonical weights,
float32, its default fast path) and the hand-written Flax model
(``benchmarks/handwritten/jax_models.py``, holding the lowered model's weights read back through
``get_params``) first show that they compute the same function: the inference forward (dropout
off) on the timed batch, then, for the training workloads, the losses of the first two training
steps on that batch with every dropout off (float32, 1e-4 relative each): the first is the
training program's forward and loss at the shared weights, the second follows one gradient and
optimiser update on each side. The lowered side runs those two steps in its timed executable
(dropout is a runtime argument there); Flax's dropout is switched at trace time, so the
hand-written side runs a second executable of the same step with dropout off. The lowered model
then gets its weights back (``set_params``: its optimiser restarts), so both timed steps start
from the same state. Then ``benchmarks._lowering`` times the steps (a training step for cnn, gru
and the transformer, a feature batch for resnet50) interleaved after compilation, on the same
batch, threads and device, and writes lowered / hand-written with its interval (target <= 1.05),
each side's compile time (the hand-written step AOT-compiled), the load and the fraction of the
measured ceiling. The lowered models' compile counters must not move during the timed rounds (a
steady state that recompiles fails the run).

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
#: training steps whose losses are compared, dropout off, before timing
CHECKED_STEPS = 2


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


def _handwritten(name: str, lowered, x, y):
    """The hand-written program holding ``lowered``'s weights, its native batch, its timed step
    (AOT-compiled) and that step's compile seconds."""
    import jax

    from benchmarks.handwritten.jax_models import make

    xb = jax.device_put(lowered.native_input(x))
    batch = (xb,) if y is None else (xb, jax.device_put(y.astype(np.int32)))
    prog = make(name, batch, lowered.get_params())
    t0 = time.perf_counter()
    compiled = prog.step.lower(*prog.state, *batch).compile()
    compile_s = time.perf_counter() - t0
    state = list(prog.state)
    if not prog.train:
        return prog, batch, (lambda: compiled(*state, *batch)), compile_s

    def step():
        *new_state, loss = compiled(*state, *batch)
        state[:] = new_state
        return loss

    return prog, batch, step, compile_s


def _first_losses(lowered, lowered_batch, prog, batch, params) -> dict:
    """The losses of the first :data:`CHECKED_STEPS` training steps of each side on the same
    batch, dropout off, asserted equal (float32, 1e-4 relative); the lowered model then holds
    ``params`` again (its optimiser restarted)."""
    lowered.set_dropout(False)
    try:
        want = [float(lowered.to_numpy(lowered.train_step(lowered_batch)))
                for _ in range(CHECKED_STEPS)]  # fmt: skip
    finally:
        lowered.set_dropout(True)
        lowered.set_params(params)
    state, got = prog.state, []
    for _ in range(CHECKED_STEPS):  # not donated: prog.state stays the timed step's start
        *state, loss = prog.step_without_dropout(*state, *batch)
        got.append(float(loss))
    assert_same(np.array(got), np.array(want))
    return {"lowered": want, "handwritten": got}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written JAX step of ``name`` (and ``--choices``' alternatives),
    shown to compute the same function first."""
    import jax

    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    params = canonical_weights(w)
    build = lambda **o: make("jax", w, params, threads=args.threads or None, **o)  # noqa: E731
    lowered = build()
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))
    prog, hand_batch, hand, hand_compile = _handwritten(name, lowered, x, y)
    # the same function first, in inference form (dropout off), else the timing means nothing
    assert_same(lowered.to_numpy(lowered.predict(batch)), prog.forward(hand_batch[0]))
    facts: dict = {"checked": "eval forward, float32 1e-4 relative"}
    if prog.train:
        facts["first_losses_dropout_off"] = _first_losses(lowered, batch, prog, hand_batch, params)
        facts["checked"] += f"; the first {CHECKED_STEPS} train steps' losses, dropout off"
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
            raise RuntimeError(
                f"{name}: a lowered model recompiled in steady state ({counts}->{now})"
            )
        return {"compile_s": {"lowered": dict(lowered.compile_log), "handwritten": hand_compile},
                "manifest": lowered.manifest()}  # fmt: skip

    return Pair(steps[0], hand, train=w.task == "train", batch=len(x), sync=jax.block_until_ready,
                facts=facts, alternatives=alternatives, after=after)  # fmt: skip


def main(argv: list[str]) -> int:
    return run("jax", prepare, argv, setup=setup, options=options)
