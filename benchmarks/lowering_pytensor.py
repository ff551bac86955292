"""Lowering overhead of the PyTensor backend: the lowered model's step vs the hand-written one.

``python -m benchmarks lowering_pytensor [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--no-ceiling] [--hand-first]``

For each workload the lowered model (``rosetta.backends.pytensor``, float32, its default linker:
the C VM where g++ exists) and the hand-written PyTensor model
(``benchmarks/handwritten/pytensor_models.py``, the lowered weights loaded by position) are
compiled with the *same* linker and FAST_RUN rewrites (the hand-written one asks for PyTensor's
named mode ``CVM``, or ``NUMBA`` where the lowered model runs Numba; PyTensor 3's own default
on a pip install is Numba, whose compile takes minutes per graph), so what differs is the graph
alone. Each side gets its batch in its own layout (the lowered NHWC images or (N, T) ids through
its loader, the hand-written NCHW images, both made before the clock). They first show that they
compute the same outputs (eval, float32: 1e-4 relative); then ``benchmarks._lowering`` times the
steps interleaved (the cnn, gru and transformer train steps, the resnet50 features step) and
writes lowered / hand-written with its interval, the load and the fraction of the ceiling. The
record's facts hold, per side, the mode, the compile seconds, the compiled graph's apply nodes,
the ops that run Python's ``perform`` instead of C, and any float64 value in the float32 graph.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """The BLAS threads (PyTensor's matrix products: NumPy's OpenBLAS), before anything runs."""
    from rosetta.backends import runtime_for

    return {"runtime": runtime_for("pytensor", threads=args.threads or None).as_dict()}


def graph_facts(fn) -> dict:
    """What a compiled function runs: its apply nodes, the ops whose thunk is Python's
    ``perform`` (by op, read off the VM's thunks) and the nodes that output float64."""
    nodes = fn.maker.fgraph.toposort()
    thunks = getattr(getattr(fn, "vm", None), "thunks", None) or []
    python = Counter(type(n.op).__name__ for n, t in zip(nodes, thunks, strict=False)
                     if not hasattr(t, "cthunk"))  # fmt: skip
    f64 = Counter(type(n.op).__name__ for n in nodes
                  if any(getattr(o.type, "dtype", "") == "float64" for o in n.outputs))  # fmt: skip
    return {"nodes": len(nodes), "python_perform": dict(python), "float64_nodes": dict(f64)}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered and the hand-written PyTensor model of ``name``, checked equal."""
    from benchmarks.handwritten import pytensor_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    lowered = make("pytensor", w, canonical_weights(w), dtype="float32",
                   threads=args.threads or None)  # fmt: skip
    hand = hw.MODELS[name](w.input.shape, dtype="float32")
    hw.copy_weights(lowered, hand)
    mode = "NUMBA" if lowered.linker.name == "numba" else "CVM"  # the lowered model's linker
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))
    hx = np.ascontiguousarray(x, dtype=np.float32 if x.dtype.kind == "f" else x.dtype)  # NCHW

    t0 = time.perf_counter()
    forward = hw.compile_features(hand, mode)
    hand_compile = {"features": time.perf_counter() - t0}
    # the same function first (eval: no dropout), else the timing means nothing
    assert_same(lowered.to_numpy(lowered.predict(batch)), hw.features_step(forward, hx))
    manifest = lowered.manifest()
    facts = {
        "mode": {
            "lowered": manifest["compile"],
            "handwritten": f"pytensor.function(mode={mode!r}): linker {mode.lower()}, FAST_RUN",
        },
        "pytensor_default_mode": "Numba (config.linker auto) on this install; not used: both "
        "sides run the lowered model's linker",
        "layout": {"lowered": manifest["layout"], "handwritten": _HAND_LAYOUT[name]},
        "threads": manifest["threads"],
    }
    if w.task == "train":
        t0 = time.perf_counter()
        step = hw.compile_train(name, hand, w.optimizer, mode)
        hand_compile["train"] = time.perf_counter() - t0
        lowered_step = lambda: lowered.train_step(batch)  # noqa: E731
        hand_step = lambda: hw.train_step(step, hx, y)  # noqa: E731
        timed = ("train", step)
    else:
        lowered_step = lambda: lowered.predict(batch)  # noqa: E731
        hand_step = lambda: hw.features_step(forward, hx)  # noqa: E731
        timed = ("predict", forward)
    lowered_step(), hand_step()  # compiles the lowered step, outside every clock
    # the lowered model's compiled program, read as the model's own ops_run() reads it
    facts["graph"] = {"lowered": graph_facts(lowered._fns[timed[0]]),
                      "handwritten": graph_facts(timed[1])}  # fmt: skip
    count = lowered.compile_count

    def after() -> dict:
        if lowered.compile_count != count:
            raise RuntimeError(f"{name}: the lowered model compiled again in steady state")
        return {"compile_s": {"lowered": dict(lowered.compile_log), "handwritten": hand_compile}}

    return Pair(lowered_step, hand_step, train=w.task == "train", batch=len(x),
                sync=np.asarray, facts=facts, after=after)  # fmt: skip


#: the hand-written models' layouts, for the record
_HAND_LAYOUT = {
    "cnn": "NCHW (OIHW kernels): im2col as CorrMM, (O, C*K*K) @ (C*K*K, N*Ho*Wo)",
    "resnet50": "NCHW (OIHW kernels): im2col as CorrMM, (O, C*K*K) @ (C*K*K, N*Ho*Wo)",
    "gru": "NT ids -> TNC (the ids transposed once; scan over time)",
    "transformer": "NT ids -> NTE (batch-major), heads (N, h, T, d)",
}


def main(argv: list[str]) -> int:
    return run("pytensor", prepare, argv, setup=setup)
