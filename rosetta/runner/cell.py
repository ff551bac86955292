"""One cell: (backend, workload, profile) measured end to end in the current process.

The clocks follow METHODOLOGY.md: *cold start* = backend import + build + first step;
*steady state* = every later step, each timed alone with a device sync before the clock is
read; *end to end* = the whole training run including the data loader (or, for feature
extraction, the timed batches), plus test accuracy. The equivalence gate runs before any step
and outside every clock. Run as ``python -m rosetta.runner.cell ...`` it writes one JSON record.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

from rosetta import backends
from rosetta.datasets import iterate_batches
from rosetta.errors import RosettaError
from rosetta.runner import clock, manifest, records
from rosetta.runner.data import feature_batch, load_cell_data
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.workload import Profile, Workload

GATE_BATCH = 4  # samples in the equivalence gate's fixed batch (2 for the 224x224 features)


def run_cell(
    backend: str,
    workload: str,
    profile: str,
    *,
    data_dir: str | Path | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
) -> dict:
    """Measure one cell and return its record (a JSON-ready dict, status ``ok``)."""
    w = get_workload(workload)
    prof = w.profile(profile)
    data = load_cell_data(w, prof, data_dir)
    params = canonical_weights(w, seed)

    t0 = clock.now_ns()
    mod = backends.load(backend)
    model = mod.build(w, params, dtype=dtype, device=device, seed=seed)
    model.sync()
    build_s = (clock.now_ns() - t0) / 1e9

    if w.task == "train":
        gate = run_gate(model, w, params, data.x_test[:GATE_BATCH], data.y_test[:GATE_BATCH], dtype)
        model.set_params(params)  # the gate must leave nothing behind
        result = _train(model, w, prof, data, seed)
    else:
        gate = run_gate(model, w, params, feature_batch(w, 0, 2), None, dtype)
        result = _features(model, w, prof)
    result["clocks"]["cold_start_s"] = build_s + result["clocks"].pop("first_step_s")
    result["clocks"]["import_build_s"] = build_s

    env = manifest.environment()
    env.update(
        backend_versions=mod.versions(),
        layout=getattr(mod, "LAYOUT", {}),
        precision=dtype,
        device=device,
        data_source=data.source,
        data_checksum=data.checksum,
        seed=seed,
        profile=profile,
    )
    return records.make_record(
        backend=backend,
        workload=workload,
        profile=profile,
        status="ok",
        equivalence=gate.as_dict(),
        manifest=env,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **result,
    )


def _train(model, w: Workload, prof: Profile, data, seed: int) -> dict:
    steps: list[float] = []
    losses: list[float] = []
    start = clock.now_ns()
    for epoch in range(prof.epochs):
        batches = iterate_batches(
            data.x_train, data.y_train, prof.batch_size, shuffle=True, seed=seed, epoch=epoch
        )
        for xb, yb in batches:
            loss, secs = clock.timed(lambda xb=xb, yb=yb: model.train_step(xb, yb), model.sync)
            steps.append(secs)
            losses.append(float(loss))
    train_s = (clock.now_ns() - start) / 1e9
    correct = total = 0
    for xb, yb in iterate_batches(data.x_test, data.y_test, prof.batch_size):
        correct += int(np.sum(np.argmax(model.predict(xb), axis=1) == yb))
        total += len(yb)
    steady = steps[1:] or steps
    stats = clock.summarize(steady)
    return {
        "clocks": {
            "first_step_s": steps[0],
            "steady": stats.as_dict(),
            "steady_raw_s": steady,
            "end_to_end_s": train_s,
            "throughput_samples_per_s": prof.batch_size / stats.median,
        },
        "metrics": {
            "test_accuracy": correct / total if total else float("nan"),
            "test_samples": total,
            "steps": len(steps),
            "loss_first": losses[0],
            "loss_last": losses[-1],
        },
    }


def _features(model, w: Workload, prof: Profile) -> dict:
    bs = prof.batch_size
    first_s = 0.0
    for i in range(prof.warmup_batches):  # the first warm batch is the cold start's first step
        x = feature_batch(w, i, bs)
        _, secs = clock.timed(lambda x=x: model.predict(x), model.sync)
        first_s = first_s or secs
    steps: list[float] = []
    start = clock.now_ns()
    for i in range(prof.warmup_batches, prof.warmup_batches + prof.batches):
        x = feature_batch(w, i, bs)  # generated outside the step's clock, inside end to end
        feats, secs = clock.timed(lambda x=x: model.predict(x), model.sync)
        steps.append(secs)
    total_s = (clock.now_ns() - start) / 1e9
    stats = clock.summarize(steps)
    return {
        "clocks": {
            "first_step_s": first_s,
            "steady": stats.as_dict(),
            "steady_raw_s": steps,
            "end_to_end_s": total_s,
            "throughput_samples_per_s": bs / stats.median,
        },
        "metrics": {
            "time_per_1000_images_s": total_s / (prof.batches * bs) * 1000,
            "images": prof.batches * bs,
            "feature_dim": int(np.asarray(feats).shape[1]),
        },
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m rosetta.runner.cell``: run one cell and write its record to ``--out``."""
    p = argparse.ArgumentParser(prog="python -m rosetta.runner.cell")
    p.add_argument("--backend", required=True)
    p.add_argument("--workload", required=True)
    p.add_argument("--profile", default="ci")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-id", required=True)
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    started = time.time()
    try:
        record = run_cell(
            args.backend,
            args.workload,
            args.profile,
            data_dir=args.data_dir,
            dtype=args.dtype,
            seed=args.seed,
        )
    except RosettaError as exc:
        print(f"rosetta: error: {exc}", file=sys.stderr)
        return 2
    record["run_id"] = args.run_id
    record["wall_s"] = time.time() - started
    records.write_record(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
