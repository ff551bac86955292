"""The measurements behind the torch backend's fast-path choices (``backends/torch/model.py``).

``python -m benchmarks fastpath_torch [--only layout,compile,loader] [--rounds-scale F]``

- ``layout``: ``channels_last`` (NHWC) against NCHW on this CPU, the cnn train step at batch 64
  and the resnet50 features step at 32 x 224^2; ratio NHWC / NCHW (< 1: channels_last faster);
- ``compile``: ``torch.compile`` against eager per workload: the cold start (build + first step,
  which is where inductor compiles) once each, then the steady step interleaved; ratio
  compiled / eager. A forward-only workload (resnet50's features) compiles as the runner's
  default does, with inductor's freezing (weights folded as graph constants, with the batch
  norms); training compiles without it;
- ``loader``: one epoch of ``DataLoader`` batches (cnn, 2048 samples, batch 64) with one worker
  process against none; ratio 1 worker / 0 workers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from benchmarks import _torch_common as tc
from benchmarks.common import Ratio, interleaved, ratio, report
from rosetta.backends.torch import loader as native
from rosetta.spec import canonical_weights


def _step(model, batch):
    if model.workload.task == "train":
        return lambda: model.train_step(batch)
    return lambda: model.predict(batch)


def _batch(model, x, y):
    return next(iter(model.loader(x, y, np.arange(len(x)), len(x))))


def layout(name: str, rounds: int, device: str, threads: int | None) -> tuple[Ratio, dict]:
    """channels_last / NCHW for one image workload's timed step."""
    w, x, y = tc.workload_batch(name)
    params = canonical_weights(w)
    models = {fmt: tc.build(w, params, device, threads, layout=fmt) for fmt in ("NHWC", "NCHW")}
    steps = {fmt: _step(m, _batch(m, x, y)) for fmt, m in models.items()}
    times = interleaved(steps, rounds=rounds, warmup=2, sync=tc.sync_for(device))
    return ratio(f"{name} channels_last/NCHW", times["NHWC"], times["NCHW"]), {
        "load": tc.load_avg()
    }


def compile_(name: str, rounds: int, device: str, threads: int | None) -> tuple[Ratio, dict]:
    """torch.compile / eager: cold start once each, steady step interleaved."""
    w, x, y = tc.workload_batch(name)
    params = canonical_weights(w)
    models, cold = {}, {}
    for mode in ("eager", "compile"):
        t0 = time.perf_counter()
        m = tc.build(w, params, device, threads, compile=mode == "compile")
        step = _step(m, _batch(m, x, y))
        tc.sync_for(device)(step())
        cold[mode] = time.perf_counter() - t0
        models[mode] = step
        print(f"  {name} {mode}: cold start {cold[mode]:.1f} s", flush=True)
    times = interleaved(models, rounds=rounds, warmup=2, sync=tc.sync_for(device))
    row = ratio(f"{name} compile/eager", times["compile"], times["eager"])
    return row, {"cold_start_s": cold, "load": tc.load_avg()}


def loader(rounds: int, device: str) -> tuple[Ratio, dict]:
    """One epoch of batches with 1 DataLoader worker / with none."""
    w, _, _ = tc.workload_batch("cnn")
    rng = np.random.default_rng(0)
    x = rng.random((2048, *w.input.shape), dtype=np.float32)
    y = rng.integers(0, 10, size=2048)
    order = rng.permutation(2048)
    place = native.Placement(torch.device(device), torch.float32, torch.contiguous_format)

    def epoch(workers):
        return lambda: sum(len(b[0]) for b in native.native_loader(x, y, order, 64, place, workers))

    times = interleaved({"1": epoch(1), "0": epoch(0)}, rounds=rounds, warmup=1)
    return ratio("cnn loader epoch 1 worker/0", times["1"], times["0"]), {"load": tc.load_avg()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks fastpath_torch")
    p.add_argument("--only", default="layout,compile,loader")
    p.add_argument("--workloads", default="cnn,gru,resnet50", help="for compile")
    p.add_argument("--rounds-scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)  # the loader job builds no model; the others do
    only = args.only.split(",")

    def r(n: int) -> int:
        return max(3, round(n * args.rounds_scale))

    rows, notes = [], {"device": args.device, "torch": torch.__version__}
    notes["inductor_freezing"] = "forward-only workloads (TorchModel.freezing)"
    jobs = []
    if "layout" in only:
        jobs += [("layout cnn", lambda: layout("cnn", r(15), args.device, args.threads))]
        jobs += [("layout resnet50", lambda: layout("resnet50", r(5), args.device, args.threads))]
    if "compile" in only:
        rounds = {"cnn": 15, "gru": 20, "resnet50": 5}
        for name in args.workloads.split(","):
            jobs += [
                (
                    f"compile {name}",
                    lambda n=name: compile_(n, r(rounds[n]), args.device, args.threads),
                )
            ]
    if "loader" in only:
        jobs += [("loader", lambda: loader(r(10), args.device))]
    for key, job in jobs:
        row, note = job()
        print(row.line(), flush=True)
        rows.append(row)
        notes[key] = note
    report("fastpath_torch", rows, notes)
    return 0
