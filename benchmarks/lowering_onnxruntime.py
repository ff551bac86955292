"""Lowering overhead of the ONNX Runtime backend: the lowered model vs ``onnxruntime_perf_test``'s
session on the same file.

``python -m benchmarks lowering_onnxruntime [--workloads cnn,gru,resnet50,transformer]
[--rounds N] [--threads N] [--image-size S] [--no-ceiling] [--hand-first]``

For each workload the lowered model (``rosetta.backends.onnxruntime`` from the canonical weights:
the export in a session with the backend's fast-path options) and the hand-written baseline (the
lowered model's own export written to a ``.onnx`` file and opened with the options
``onnxruntime_perf_test`` uses when given nothing but the model,
``benchmarks/handwritten/engine_sessions.py``; ``--threads N`` is its ``-x N``) first show that
they compute the same outputs (float32: 1e-4 relative); then ``benchmarks._lowering`` times one
forward pass of each at the workload's batch, interleaved: the lowered model through its
``predict`` (what the runner times), the baseline through ``sess.run(None, {name: x})``. The
record holds both sides' settings as read back from their sessions.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """ONNX Runtime's version (each session sizes its own pools: nothing to set up front)."""
    import onnxruntime as ort

    return {"onnxruntime": ort.__version__}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered model of ``name`` and perf_test's session on its export, checked equal."""
    from benchmarks.handwritten import engine_sessions as es
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, _ = workload_batch(name, args.image_size)
    lowered = make("onnxruntime", w, canonical_weights(w), dtype="float32",
                   threads=args.threads or None)  # fmt: skip
    batch = next(iter(lowered.loader(x, None, np.arange(len(x)), len(x))))  # the runner's batch
    with tempfile.TemporaryDirectory() as tmp:  # the session holds the graph once it is made
        tool = es.perf_test_session(es.write_export(lowered.graph, tmp), args.threads)
    xb = batch[0]
    assert_same(tool.run(xb), lowered.predict(batch))  # the same function, else no timing
    facts = {
        "lowered_settings": lowered.engine_settings(),
        "handwritten": tool.label,
        "handwritten_command": tool.command,
        "handwritten_settings": tool.settings,
        "input": f"{xb.dtype} {tuple(xb.shape)}, the same array on both sides",
    }
    return Pair(lambda: lowered.predict(batch), lambda: tool.run(xb), train=False,
                batch=len(xb), facts=facts)  # fmt: skip


def main(argv: list[str]) -> int:
    return run("onnxruntime", prepare, argv, setup=setup)
