"""``rosetta list``: workloads (with counts from the spec) and backends (installed or why not).

A broken spec in the models folder does not hide the others: every good workload is listed,
each broken one is reported as one line (on stderr), and the exit status is then 1.
``--spec FILE`` checks and describes one spec file of your own (see ``rosetta/models/README.md``).
"""

from __future__ import annotations

import argparse
import sys

from rosetta import backends
from rosetta.backends.absent import ABSENT
from rosetta.errors import RosettaError
from rosetta.runner.guards import check_model_memory
from rosetta.safetext import plain
from rosetta.spec import get_workload, load_workload, models_dir, workload_names
from rosetta.spec.workload import Workload


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta list [--details] [--spec FILE]``."""
    p = sub.add_parser("list", help="list workloads and backends (installed or why not)")
    p.add_argument(
        "--details", action="store_true", help="parameter counts, FLOPs, profiles, layers"
    )
    p.add_argument(
        "--spec",
        metavar="FILE",
        default=None,
        help="check and describe one spec file of your own instead of the models folder "
        "(to benchmark your specs, put them in a folder and set $ROSETTA_MODELS to it)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the workload and backend tables; 1 if a spec in the models folder is broken."""
    if args.spec:
        w = load_workload(args.spec)  # a SpecError is the CLI's one-line error
        check_model_memory(w, "float32")
        print(f"Spec {args.spec}: valid")
        _print_workload(w.name, w, details=True)
        return 0
    print(f"Workloads ({models_dir()}/*.yaml):")
    broken = 0
    for name in workload_names():
        try:
            w = get_workload(name)
            check_model_memory(w, "float32")
        except RosettaError as exc:
            broken += 1
            print(f"  {name:<10} BROKEN    (see stderr)")
            print(f"rosetta: broken spec: {plain(str(exc))}", file=sys.stderr)
            continue
        _print_workload(name, w, details=args.details)
    print("Backends:")
    for name in backends.names():
        st = backends.status(name)
        ver = ", ".join(f"{d} {v}" for d, v in st.versions)
        state = "ready" if st.usable else "unavailable"
        print(f"  {name:<11} {state:<12} {ver}" + (f"  -- {st.reason}" if st.reason else ""))
    print("Frameworks of the older comparisons that cannot run here:")
    for row in ABSENT:
        print(f"  {row.name:<11} {'absent':<12} {row.framework}  -- {row.reason}")
    from rosetta.runner.ray_executor import available

    ok, what = available()  # imports ray only if it is installed, starts nothing
    print("Executors (rosetta bench --executor):")
    print("  papermill   ready        (default)\n  python      ready")
    print(
        f"  {'ray':<11} {'ready' if ok else 'unavailable':<12} "
        + (f"ray {what}" if ok else f"-- {what}")
    )
    return 1 if broken else 0


def _print_workload(name: str, w: Workload, *, details: bool) -> None:
    print(f"  {name:<10} {w.task:<9} {w.dataset.name:<14} {w.description}")
    if not details:
        return
    print(f"      input {list(w.input.shape)} {w.input.dtype} -> output {list(w.output_shape)}")
    print(
        f"      parameters {w.num_params:,} (+ {w.num_buffers:,} buffer values), "
        f"forward {w.flops_per_sample() / 1e9:.4f} GFLOPs/sample"
    )
    for prof in w.profiles.values():
        print(f"      profile {prof.name:<6} {_describe(prof, w.task)}")
    if w.optimizer is not None:
        print(f"      optimizer {w.optimizer}")


def _describe(prof, task: str) -> str:
    if task == "train":
        return (
            f"batch {prof.batch_size}, {prof.epochs} epoch(s), {prof.train_samples:,} train / "
            f"{prof.test_samples:,} test samples ({prof.steps_per_epoch} steps/epoch)"
        )
    size = f", images {prof.image_size}x{prof.image_size}" if prof.image_size else ""
    return (
        f"batch {prof.batch_size}, {prof.batches} timed batches after {prof.warmup_batches} "
        f"warm-up{size}"
    )
