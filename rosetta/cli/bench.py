"""``rosetta bench``: run the matrix of backends x workloads for a profile, then summarise it.

Every option is validated before anything runs (one line each, exit status 2); the run folder is
locked, its configuration pinned, each cell runs in its own process (a papermill execution of
its backend's notebook), the progress shows live, and the run ends with the summary table, a CSV
and the HTML report. The exit status is 0 only when every selected cell is ``ok`` (cells skipped
because their framework is not installed aside), so CI can tell a broken run from a good one.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.matrix import EXECUTORS, Plan, run_matrix
from rosetta.runner.rundir import (
    RunDir,
    check_results_dir,
    check_run_id,
    default_results_dir,
    new_run_id,
)
from rosetta.runtime import PRECISIONS, Runtime
from rosetta.spec import get_workload, workload_names
from rosetta.spec.loader import PROFILES


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number, got {text!r}")
    return v


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {v}")
        return v

    return parse


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta bench``."""
    p = sub.add_parser(
        "bench",
        help="run backends x workloads, one process (papermill notebook) per cell",
        description="Run the benchmark matrix; exit status 0 only if every selected cell is ok.",
    )
    p.add_argument(
        "--backends", default="all", help="comma list of backends (default: every registered one)"
    )
    p.add_argument("--workloads", default="all", help="comma list of workloads (default: all)")
    p.add_argument(
        "--profile",
        default="smoke",
        help="ci (CI, ~3 min) | smoke (default, ~10 min on 2 cores) | full (the original settings)",
    )
    p.add_argument(
        "--run-id",
        default=None,
        help="name of a new run (default: time stamp + random suffix); an existing id resumes it",
    )
    p.add_argument("--resume", default=None, metavar="RUN_ID", help="resume an existing run")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="when resuming, also rerun failed, timed-out and killed cells (old records kept)",
    )
    p.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="where run folders go (default: $ROSETTA_RESULTS_DIR, else ./results)",
    )
    p.add_argument(
        "--report-dir",
        type=Path,
        default=None,
        help="where the HTML report goes (default: ./report)",
    )
    p.add_argument(
        "--data-dir", default=None, help="data folder (default $ROSETTA_DATA_DIR or <repo>/data)"
    )
    p.add_argument("--dtype", default="float32", help="float32 (default) | float64")
    p.add_argument(
        "--precision",
        default="fp32",
        help=f"numeric policy: {' | '.join(PRECISIONS)} (default fp32)",
    )
    p.add_argument(
        "--tf32",
        action="store_true",
        help="allow TF32 for fp32 matmul/conv on CUDA (default off in every framework; "
        "refused on the CPU)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="cpu | cuda | auto (auto: CUDA where the backend sees a GPU; default cpu)",
    )
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="weights, order, dropout")
    p.add_argument(
        "--threads",
        type=_int_at_least(1),
        default=None,
        help="CPU threads per cell, set in every framework and read back into the record "
        "(default: all usable cores)",
    )
    p.add_argument(
        "--sample-every",
        type=_int_at_least(1),
        default=None,
        help="steady state: time every n-th training step with a sync "
        "(default 1 on cpu, 4 on cuda; the other steps flow unsynced)",
    )
    p.add_argument(
        "--timeout",
        type=_positive_float,
        default=1800.0,
        help="seconds per cell before it is killed (default 1800)",
    )
    p.add_argument(
        "--memory-limit-mb",
        type=_int_at_least(64),
        default=None,
        help="cap each cell's address space (a cell past it fails instead of the machine)",
    )
    p.add_argument(
        "--executor",
        default="papermill",
        choices=(*EXECUTORS, "ray"),
        help="papermill (default: the backend's notebook, saved beside the record), python, "
        "or ray (each cell a task on a Ray cluster, run there by --ray-cell-executor)",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="--executor ray: the cluster (default: $RAY_ADDRESS, else a local Ray instance)",
    )
    p.add_argument(
        "--cells-per-node",
        type=_int_at_least(1),
        default=1,
        help="--executor ray: cells sharing a node at once (default 1: fair timing; more is "
        "flagged in the records as noisy)",
    )
    p.add_argument(
        "--ray-cell-executor",
        default="papermill",
        choices=tuple(EXECUTORS),
        help="--executor ray: how each node runs its cell (default papermill)",
    )
    p.add_argument("--no-report", action="store_true", help="skip the HTML report at the end")
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
    """Validate everything, lock the run, run the cells, summarise, report; exit 0 iff all ok."""
    backend_list = _select(args.backends, backends.names(), "backend")
    workload_list = _select(args.workloads, workload_names(), "workload")
    if args.profile not in PROFILES:
        raise RosettaError(f"unknown profile {args.profile!r}; valid: {', '.join(PROFILES)}")
    Runtime.request("bench", **_runtime_args(args))  # unknown values: one line, before any work
    ray_options = _ray_options(args)
    if args.resume and args.run_id and args.resume != args.run_id:
        raise RosettaError("give either --run-id or --resume, not two different ids")
    results_dir = check_results_dir(args.results_dir or default_results_dir())
    run_id = check_run_id(args.resume or args.run_id or new_run_id())
    resuming = bool(args.resume) or (results_dir / run_id).is_dir()
    if args.resume and not (results_dir / run_id).is_dir():
        raise RosettaError(f"no run {run_id!r} in {results_dir} to resume")
    data_sources = _ensure_data(workload_list, args.data_dir)
    template = CellConfig(
        backend="",
        workload="",
        profile=args.profile,
        data_dir=None if args.data_dir is None else str(Path(args.data_dir).absolute()),
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
        threads=args.threads,
        precision=args.precision,
        tf32=args.tf32,
        sample_every=args.sample_every,  # None: each cell decides from its resolved device
    )
    pinned = {k: v for k, v in template.as_dict().items() if k not in ("backend", "workload")}
    pinned.update(backends=backend_list, workloads=workload_list)
    plan = Plan(
        tuple(backend_list),
        tuple(workload_list),
        template,
        timeout_s=args.timeout,
        retry_failed=args.retry_failed,
        memory_limit_mb=args.memory_limit_mb,
        executor=args.ray_cell_executor if args.executor == "ray" else args.executor,
        data_sources=data_sources,
        ray=ray_options,
    )
    from rosetta.runner.progress import make_display

    with RunDir(results_dir, run_id, pinned, create=not resuming) as run_dir:
        if "peak_gflops" not in run_dir.config:
            from rosetta.runner.manifest import environment
            from rosetta.runner.probe import gemm_peak_gflops

            run_dir.add_to_run_file(peak_gflops=gemm_peak_gflops(), environment=environment())
        verb = "resuming" if resuming else "run"
        print(
            f"{verb} {run_id}: profile {args.profile}, {args.dtype} on {args.device}, "
            f"records in {run_dir.path}",
            flush=True,
        )
        labels = [f"{b} x {w}" for w in workload_list for b in backend_list]
        display = make_display(labels)
        try:
            index = run_matrix(plan, run_dir, display)
        except KeyboardInterrupt:
            raise RosettaError(
                f"interrupted; the records written so far are kept in {run_dir.path}; "
                f"resume with --resume {run_id}"
            ) from None
        finally:
            getattr(display, "close", lambda: None)()
    errors: list[str] = []
    recs = records.read_records(results_dir / run_id, errors)
    for line in errors:
        print(f"warning: {line}")
    print(summary(recs))
    csv_path = write_csv(recs, results_dir / run_id / "summary.csv")
    print(f"summary CSV: {csv_path}")
    if not args.no_report:
        _report(results_dir / run_id, args.report_dir)
    bad = {k: v for k, v in index.items() if v["status"] not in ("ok", "skipped")}
    if bad:
        print(
            f"{len(bad)} of {len(index)} cells did not succeed: "
            + ", ".join(f"{k} {v['status']}" for k, v in bad.items())
        )
        return 1
    return 0


def _ray_options(args: argparse.Namespace):
    """The Ray options of ``--executor ray`` (``None`` for a local run); Ray-only flags given
    without it are one line."""
    if args.executor != "ray":
        if args.ray_address or args.cells_per_node != 1:
            raise RosettaError("--ray-address and --cells-per-node need --executor ray")
        return None
    from rosetta.runner.ray_executor import RayOptions, available

    ok, why = available()
    if not ok:
        raise RosettaError(f"--executor ray: Ray is {why}")
    return RayOptions(address=args.ray_address, cells_per_node=args.cells_per_node)


def _runtime_args(args: argparse.Namespace) -> dict:
    return {
        "device": args.device,
        "threads": args.threads,
        "dtype": args.dtype,
        "precision": args.precision,
        "tf32": args.tf32,
        "seed": args.seed,
    }


def _report(run_dir: Path, report_dir: Path | None) -> None:
    try:
        from rosetta.report import write_report
    except ImportError:
        print("HTML report: not available in this installation (pip install 'rosetta[report]')")
        return
    out = (report_dir or Path.cwd() / "report") / run_dir.name
    path = write_report([run_dir], out)
    print(f"HTML report: {path}")


def _ensure_data(workload_list: list[str], data_dir: str | None) -> dict[str, str]:
    """Verify each data set (synthesising it only in the default data dir), print its source;
    returns ``{workload: data source}`` so that every record can say which data ran."""
    from rosetta.datasets import prepare_data

    names = {w: get_workload(w).dataset.name for w in workload_list}
    sources = prepare_data(list(names.values()), data_dir)
    return {w: sources[d] for w, d in names.items()}


SUMMARY_COLUMNS = ["workload", "backend", "status", "equivalent", "cold_start_s", "step_median_s",
                   "step_ci95_low_s", "step_ci95_high_s", "end_to_end_s", "test_accuracy",
                   "time_per_1000_images_s", "data_source", "wall_s", "flags", "error"]  # fmt: skip


def _row(r: dict) -> dict:
    """One record as the summary's columns (CSV and text share them)."""
    row = {
        "workload": r["workload"],
        "backend": r["backend"],
        "status": r["status"],
        "equivalent": "",
        "cold_start_s": "",
        "step_median_s": "",
        "step_ci95_low_s": "",
        "step_ci95_high_s": "",
        "end_to_end_s": "",
        "test_accuracy": "",
        "time_per_1000_images_s": "",
        "data_source": r.get("manifest", {}).get("data_source", ""),
        "wall_s": r.get("wall_s", ""),
        "flags": "; ".join(r.get("flags", [])),
        "error": r.get("error", ""),
    }
    if r["status"] == "ok":
        c, m, st = r["clocks"], r["metrics"], r["clocks"]["steady"]
        row.update(
            equivalent=r["equivalence"]["equivalent"],
            cold_start_s=c["cold_start_s"],
            step_median_s=st["median"],
            step_ci95_low_s=st["ci95_low"],
            step_ci95_high_s=st["ci95_high"],
            end_to_end_s=c["end_to_end_s"],
            test_accuracy=m.get("test_accuracy", ""),
            time_per_1000_images_s=m.get("time_per_1000_images_s", ""),
        )
    return row


def _ordered(recs: list[dict]) -> list[dict]:
    order = {name: i for i, name in enumerate(backends.names())}  # the reference first
    return sorted(recs, key=lambda r: (r["workload"], order.get(r["backend"], len(order))))


def write_csv(recs: list[dict], path: Path) -> Path:
    """The summary as CSV, one row per cell."""
    rows = [_row(r) for r in _ordered(recs)]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def summary(recs: list[dict]) -> str:
    """A plain-text table of a run's records (the HTML report reads the same records)."""
    head = (
        f"{'workload':<9} {'backend':<11} {'status':<8} {'equiv':<5} {'cold s':>7} "
        f"{'step s (median [95% CI])':>27} {'e2e s':>8} {'result':>14} {'data':<13} {'wall s':>6}"
    )
    lines = [head, "-" * len(head)]
    notes = []
    for r in _ordered(recs):
        row = _row(r)
        wall = f"{row['wall_s']:>6.0f}" if isinstance(row["wall_s"], float) else f"{'':>6}"
        if r["status"] != "ok":
            source = f" [data: {row['data_source']}]" if row["data_source"] else ""
            lines.append(
                f"{r['workload']:<9} {r['backend']:<11} {r['status']:<8} -- {r.get('error', '')}"
                + source
            )
            continue
        step = (
            f"{row['step_median_s']:.4f} [{row['step_ci95_low_s']:.4f}, "
            f"{row['step_ci95_high_s']:.4f}]"
        )
        if row["test_accuracy"] != "":
            result = f"acc {row['test_accuracy']:.3f}"
        else:
            result = f"{row['time_per_1000_images_s']:.1f} s/1k img"
        eq = "yes" if row["equivalent"] else "NO"
        flag = " *" if row["flags"] else ""
        lines.append(
            f"{r['workload']:<9} {r['backend']:<11} {r['status']:<8} {eq:<5} "
            f"{row['cold_start_s']:>7.2f} {step:>27} {row['end_to_end_s']:>8.2f} {result:>14} "
            f"{row['data_source']:<13} {wall}{flag}"
        )
        notes.extend(f"  * {r['backend']} x {r['workload']}: {f}" for f in r.get("flags", []))
    return "\n".join(lines + notes)
