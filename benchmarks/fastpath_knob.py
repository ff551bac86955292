"""The measurement behind a backend's own fast-path setting: one backend, one of its options
(``rosetta.backends.options``: its package's ``OPTIONS``), two (or more) of its values, per
workload.

``python -m benchmarks fastpath_knob --backend B --knob K --values A,B [--workloads ...]
[--rounds-scale F] [--threads N]``, e.g.:

- ``--backend paddle --knob static --values on,off`` (``paddle.jit.to_static`` against the
  dynamic graph: ``rosetta.backends.paddle.model.static_in_effect``);
- ``--backend keras_jax --knob step --values keras,custom`` (and ``keras_torch``: Keras'
  own ``train_on_batch`` against the backend's step; one engine per process, so one backend per
  invocation);
- ``--backend pytensor --knob linker --values cvm,numba``; ``--backend torch --knob compile``.

For each workload: the cold start (build + first step, where a compiled path compiles) once per
value, then the steady step interleaved (training workloads: the timed ``train_step``; ResNet-50:
``predict`` on 32 images at 224^2); each value's ratio to the first value named (< 1: the other
value is faster than the first). Run it alone on a quiet machine; a default changes only where
the interval of the ratio lies clear of 1 and the cold start it adds is worth it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks import _torch_common as tc  # its batches and load readings are framework-free
from benchmarks.common import Ratio, interleaved, ratio, report
from rosetta.backends import make
from rosetta.spec import canonical_weights

#: interleaved pairs per workload at --rounds-scale 1
ROUNDS = {"cnn": 15, "gru": 20, "resnet50": 5, "transformer": 8}


def _step(model, batch):
    """One step, waited for (``Model.sync``: JAX and Keras on JAX return before computing)."""
    if model.workload.task == "train":
        return lambda: model.sync(model.train_step(batch))
    return lambda: model.sync(model.predict(batch))


def compare(
    backend: str, knob: str, values: list[str], name: str, rounds: int, threads: int | None
) -> tuple[list[Ratio], dict]:
    """Each value of ``knob`` against the first: cold start once each, steady step interleaved."""
    w, x, y = tc.workload_batch(name)
    params = canonical_weights(w)
    steps, cold = {}, {}
    for value in values:
        t0 = time.perf_counter()
        m = make(backend, w, params, threads=threads or None, options={knob: value})
        batch = next(iter(m.loader(x, y, np.arange(len(x)), len(x))))
        step = _step(m, batch)
        step()
        cold[value] = time.perf_counter() - t0
        steps[value] = step
        print(f"  {backend} {name} {knob}={value}: cold start {cold[value]:.1f} s", flush=True)
    times = interleaved(steps, rounds=rounds, warmup=2)
    first = values[0]
    rows = [
        ratio(f"{backend} {name} {knob} {v}/{first}", times[v], times[first]) for v in values[1:]
    ]
    return rows, {"cold_start_s": cold, "load": tc.load_avg()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks fastpath_knob")
    p.add_argument("--backend", required=True)
    p.add_argument(
        "--knob",
        required=True,
        help="an option the backend declares (its package's OPTIONS: compile, static, step, "
        "linker)",
    )
    p.add_argument("--values", required=True, help="comma list, at least two")
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--rounds-scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    values = args.values.split(",")
    if len(values) < 2:
        p.error("--values needs at least two values of the knob")
    rows, notes = [], {}
    for name in args.workloads.split(","):
        n = max(3, round(ROUNDS[name] * args.rounds_scale))
        got, note = compare(args.backend, args.knob, values, name, n, args.threads)
        for row in got:
            print(row.line(), flush=True)
        rows += got
        notes[f"{args.knob} {name}"] = note
    report(f"fastpath_knob_{args.backend}_{args.knob}", rows, notes)
    return 0
