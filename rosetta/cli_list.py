"""``rosetta list``: workloads (with counts from the spec) and backends (installed or why not)."""

from __future__ import annotations

import argparse

from rosetta import backends
from rosetta.spec import get_workload, workload_names


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta list [--details]``."""
    p = sub.add_parser("list", help="list workloads and backends (installed or why not)")
    p.add_argument(
        "--details", action="store_true", help="parameter counts, FLOPs, profiles, layers"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the workload and backend tables."""
    print("Workloads (rosetta/models/*.yaml):")
    for name in workload_names():
        w = get_workload(name)
        line = f"  {name:<10} {w.task:<9} {w.dataset.name:<14} {w.description}"
        print(line)
        if args.details:
            print(
                f"      input {list(w.input.shape)} {w.input.dtype}"
                f" -> output {list(w.output_shape)}"
            )
            print(
                f"      parameters {w.num_params:,} (+ {w.num_buffers:,} buffer values), "
                f"forward {w.flops_per_sample() / 1e9:.4f} GFLOPs/sample"
            )
            for prof in w.profiles.values():
                print(f"      profile {prof.name:<6} {_describe(prof, w.task)}")
            if w.optimizer is not None:
                print(f"      optimizer {w.optimizer}")
    print("Backends:")
    for name in backends.names():
        st = backends.status(name)
        ver = ", ".join(f"{d} {v}" for d, v in st.versions)
        state = "ready" if st.usable else "unavailable"
        print(f"  {name:<11} {state:<12} {ver}" + (f"  -- {st.reason}" if st.reason else ""))
    return 0


def _describe(prof, task: str) -> str:
    if task == "train":
        return (
            f"batch {prof.batch_size}, {prof.epochs} epoch(s), {prof.train_samples:,} train / "
            f"{prof.test_samples:,} test samples ({prof.steps_per_epoch} steps/epoch)"
        )
    return (
        f"batch {prof.batch_size}, {prof.batches} timed batches after {prof.warmup_batches} warm-up"
    )
