"""``rosetta bench``: run the matrix of backends x workloads for a profile, then summarise it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rosetta import backends
from rosetta.backends.base import DEVICE_CHOICES
from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.matrix import run_matrix
from rosetta.spec import get_workload, workload_names
from rosetta.spec.loader import PROFILES

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta bench``."""
    p = sub.add_parser("bench", help="run backends x workloads, one process per cell")
    p.add_argument(
        "--backends", default="all", help="comma list (default: every registered backend)"
    )
    p.add_argument("--workloads", default="all", help="comma list (default: every workload)")
    p.add_argument("--profile", default="ci", help="ci | smoke | full (default ci)")
    p.add_argument("--run-id", default=None, help="reuse an id to resume an interrupted run")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument(
        "--data-dir", default=None, help="data folder (default $ROSETTA_DATA_DIR or data/)"
    )
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument(
        "--device",
        default="cpu",
        help="cpu | cuda | auto (auto: CUDA where the backend sees a GPU; default cpu)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="CPU threads per cell (default all)")
    p.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per cell before it is killed"
    )
    p.set_defaults(func=run)


def _select(arg: str, valid: list[str], what: str) -> list[str]:
    if arg == "all":
        return valid
    chosen = [s.strip() for s in arg.split(",") if s.strip()]
    bad = [c for c in chosen if c not in valid]
    if bad or not chosen:
        raise RosettaError(f"unknown {what} {bad[0] if bad else arg!r}; valid: {', '.join(valid)}")
    return chosen


def run(args: argparse.Namespace) -> int:
    """Validate the selection, make sure data exists, run the cells, print the summary."""
    backend_list = _select(args.backends, backends.names(), "backend")
    workload_list = _select(args.workloads, workload_names(), "workload")
    if args.profile not in PROFILES:
        raise RosettaError(f"unknown profile {args.profile!r}; valid: {', '.join(PROFILES)}")
    if args.device not in DEVICE_CHOICES:
        raise RosettaError(f"unknown device {args.device!r}; valid: {', '.join(DEVICE_CHOICES)}")
    _ensure_data(workload_list, args.data_dir)
    run_id = args.run_id or time.strftime("%Y%m%d-%H%M%S")
    print(f"run {run_id}: profile {args.profile}, records in {args.results_dir / run_id}")
    try:
        run_matrix(
            backend_list,
            workload_list,
            args.profile,
            run_id=run_id,
            results_dir=args.results_dir,
            data_dir=args.data_dir,
            dtype=args.dtype,
            device=args.device,
            seed=args.seed,
            threads=args.threads,
            timeout_s=args.timeout,
        )
    except KeyboardInterrupt:
        raise RosettaError(
            f"interrupted; the records written so far are kept in {args.results_dir / run_id}; "
            f"resume with --run-id {run_id}"
        ) from None
    print(summary(records.read_records(args.results_dir / run_id)))
    return 0


def _ensure_data(workload_list: list[str], data_dir: str | None) -> None:
    """Verify each data set (synthesising it only in the default data dir); print its source."""
    from rosetta.datasets import prepare_data

    prepare_data([get_workload(w).dataset.name for w in workload_list], data_dir)


def summary(recs: list[dict]) -> str:
    """A plain-text table of a run's records (the HTML report reads the same records)."""
    head = (
        f"{'workload':<9} {'backend':<11} {'status':<8} {'equiv':<5} {'cold s':>7} "
        f"{'step s (median [95% CI])':>27} {'e2e s':>8} {'result':>22}"
    )
    lines = [head, "-" * len(head)]
    order = {name: i for i, name in enumerate(backends.names())}  # the reference first
    for r in sorted(recs, key=lambda r: (r["workload"], order.get(r["backend"], len(order)))):
        if r["status"] != "ok":
            lines.append(
                f"{r['workload']:<9} {r['backend']:<11} {r['status']:<8} -- {r.get('error', '')}"
            )
            continue
        c, m = r["clocks"], r["metrics"]
        st = c["steady"]
        step = f"{st['median']:.4f} [{st['ci95_low']:.4f}, {st['ci95_high']:.4f}]"
        if "test_accuracy" in m:
            result = f"acc {m['test_accuracy']:.3f} ({r['manifest']['data_source']})"
        else:
            result = f"{m['time_per_1000_images_s']:.1f} s/1000 img"
        eq = "yes" if r["equivalence"]["equivalent"] else "NO"
        lines.append(
            f"{r['workload']:<9} {r['backend']:<11} {r['status']:<8} {eq:<5} "
            f"{c['cold_start_s']:>7.2f} {step:>27} {c['end_to_end_s']:>8.2f} {result:>22}"
        )
    return "\n".join(lines)
