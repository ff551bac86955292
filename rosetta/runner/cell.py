"""One cell: (backend, workload, profile) measured end to end in the current process.

The clocks follow METHODOLOGY.md:

- *cold start* = backend import + build + the first step (compilation, autotune land here);
- *end to end* = the whole training run as a user's loop runs it: native batches from the
  backend's own loader, the loss left on the device and read back once per epoch; for feature
  extraction, the timed batches;
- *steady state* = the per-step distribution, sampled in the same run: every ``sample_every``-th
  step after the first is bracketed by a device sync and timed alone. With ``sample_every = 1``
  every step is synced; on a CPU backend that costs nothing (its steps are synchronous), while on
  an asynchronous device it makes the end-to-end figure include one sync per step, so GPU runs
  use a larger ``sample_every`` and let the other steps flow.

The equivalence gate (forward, loss, gradients, 3 optimiser steps) runs before any step and
outside every clock. Run as ``python -m rosetta.runner.cell --config JSON`` it writes one record.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

from rosetta import backends
from rosetta.backends.base import resolve_device
from rosetta.datasets import epoch_order
from rosetta.errors import RosettaError
from rosetta.runner import clock, manifest, records
from rosetta.runner.config import CellConfig
from rosetta.runner.data import feature_images, load_cell_data
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.workload import Profile, Workload

GATE_BATCH = 4  # samples in the equivalence gate's fixed batch (2 for the features)


def run_cell(config: CellConfig) -> dict:
    """Measure one cell and return its record (a JSON-ready dict, status ``ok``)."""
    spec = get_workload(config.workload)
    prof = spec.profile(config.profile)
    w = prof.workload_for(spec)  # features: the profile's input size, same parameters
    data = load_cell_data(w, prof, config.data_dir)
    params = canonical_weights(w, config.seed)

    t0 = clock.now_ns()
    mod = backends.load(config.backend)
    import_s = (clock.now_ns() - t0) / 1e9
    device = resolve_device(mod, config.device)
    model = mod.build(w, params, dtype=config.dtype, device=device, seed=config.seed)
    model.sync()
    build_s = (clock.now_ns() - t0) / 1e9

    if w.task == "train":
        xg, yg = data.x_test[:GATE_BATCH], data.y_test[:GATE_BATCH]
        gate = run_gate(model, w, params, xg, yg, config.dtype)
        model.set_params(params)  # the gate leaves nothing behind (weights, optimiser state)
        result = _train(model, prof, data, config)
    else:
        gate = run_gate(model, w, params, feature_images(w, 0, 2), None, config.dtype)
        result = _features(model, w, prof)
    clocks = result["clocks"]
    clocks["import_s"] = import_s
    clocks["import_build_s"] = build_s
    clocks["cold_start_s"] = build_s + clocks.pop("first_step_s")

    env = manifest.environment(device)
    env.update(
        backend_versions=mod.versions(),
        fast_path=model.manifest(),
        precision=config.dtype,
        device=device,
        data_source=data.source,
        data_checksum=data.checksum,
        seed=config.seed,
        profile=config.profile,
        input_shape=list(w.input.shape),
    )
    peak_device = getattr(model, "peak_device_memory_bytes", lambda: None)()
    return records.make_record(
        backend=config.backend,
        workload=config.workload,
        profile=config.profile,
        status="ok",
        config=config.as_dict(),
        equivalence=gate.as_dict(),
        manifest=env,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        peak_device_memory_mb=None if peak_device is None else peak_device / 2**20,
        **result,
    )


def _train(model, prof: Profile, data, config: CellConfig) -> dict:
    steps: list[float] = []
    losses: list[float] = []
    first_s = None
    step = 0
    start = clock.now_ns()
    for epoch in range(prof.epochs):
        order = epoch_order(len(data.y_train), shuffle=True, seed=config.seed, epoch=epoch)
        pending = []  # this epoch's losses, still native: read back once, at the epoch's end
        for batch in model.loader(data.x_train, data.y_train, order, prof.batch_size):
            if first_s is None or step % config.sample_every == 0:
                model.sync()
                loss, secs = clock.timed(lambda b=batch: model.train_step(b), model.sync)
                if first_s is None:
                    first_s = secs  # the cold start's first step
                else:
                    steps.append(secs)
            else:
                loss = model.train_step(batch)
            pending.append(loss)
            step += 1
        model.sync(pending[-1] if pending else None)
        losses.extend(float(model.to_numpy(v)) for v in pending)
    train_s = (clock.now_ns() - start) / 1e9
    correct = total = 0
    n_test = len(data.y_test)
    order = np.arange(n_test)
    for b, batch in enumerate(model.loader(data.x_test, data.y_test, order, prof.batch_size)):
        pred = model.to_numpy(model.predict(batch)).argmax(axis=1)
        yb = data.y_test[b * prof.batch_size : (b + 1) * prof.batch_size]
        correct += int(np.sum(pred == yb))
        total += len(yb)
    steady = steps or [first_s]
    stats = clock.summarize(steady)
    return {
        "clocks": {
            "first_step_s": first_s,
            "steady": stats.as_dict(),
            "steady_raw_s": steady,
            "sample_every": config.sample_every,
            "end_to_end_s": train_s,
            "throughput_samples_per_s": prof.batch_size / stats.median,
        },
        "metrics": {
            "test_accuracy": correct / total if total else None,
            "test_samples": total,
            "steps": step,
            "loss_first": losses[0],
            "loss_last": losses[-1],
            "losses": losses,
        },
    }


def _features(model, w: Workload, prof: Profile) -> dict:
    bs = prof.batch_size
    n_warm = prof.warmup_batches
    x = feature_images(w, 0, (n_warm + prof.batches) * bs)  # made before any clock
    batches = iter(model.loader(x, None, np.arange(len(x)), bs))
    first_s = None
    for _ in range(n_warm):  # the first warm batch is the cold start's first step
        out, secs = clock.timed(lambda: model.predict(next(batches)), model.sync)
        first_s = secs if first_s is None else first_s
    steps: list[float] = []
    out = None
    start = clock.now_ns()
    for _ in range(prof.batches):
        model.sync()
        out, secs = clock.timed(lambda: model.predict(next(batches)), model.sync)
        steps.append(secs)
    model.sync(out)
    total_s = (clock.now_ns() - start) / 1e9
    stats = clock.summarize(steps)
    return {
        "clocks": {
            "first_step_s": first_s if first_s is not None else steps[0],
            "steady": stats.as_dict(),
            "steady_raw_s": steps,
            "sample_every": 1,
            "end_to_end_s": total_s,
            "throughput_samples_per_s": bs / stats.median,
        },
        "metrics": {
            "time_per_1000_images_s": total_s / (prof.batches * bs) * 1000,
            "images": prof.batches * bs,
            "image_size": int(w.input.shape[1]),
            "feature_dim": int(model.to_numpy(out).shape[1]),
        },
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m rosetta.runner.cell --config JSON``: run one cell, write its record."""
    p = argparse.ArgumentParser(prog="python -m rosetta.runner.cell")
    p.add_argument("--config", required=True, help="a CellConfig as JSON")
    args = p.parse_args(argv)
    started = time.time()
    try:
        config = CellConfig.from_json(args.config)
        record = run_cell(config)
    except RosettaError as exc:
        print(f"rosetta: error: {exc}", file=sys.stderr)
        return 2
    record["run_id"] = config.run_id
    record["wall_s"] = time.time() - started
    records.write_record(Path(config.out), record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
