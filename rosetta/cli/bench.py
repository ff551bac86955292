"""``rosetta bench``: run the matrix of backends x workloads for a profile, then summarise it.

Every option is validated before anything runs (one line each, exit status 2); the run folder is
locked, its configuration pinned, each cell runs in its own process (a papermill execution of
its backend's notebook), the progress shows live, and the run ends with the summary table, a CSV
and the HTML report. The exit status is 0 only when every selected cell is ``ok`` and equivalent
(cells skipped because their framework is not installed aside), 1 when a cell did not succeed and
3 when one is not equivalent, so CI can tell a broken run from a good one.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.report.safe import plain
from rosetta.report.summary import summary, write_csv
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.guards import (
    MAX_ADDRESS_SPACE,
    MAX_THREADS,
    check_memory_limit,
    check_model_memory,
    check_report_dir,
    check_threads,
    nonempty_path,
)
from rosetta.runner.matrix import EXECUTORS, Plan, cell_label, round_cells, run_matrix
from rosetta.runner.profiles import bench_profile, check_batch_size
from rosetta.runner.rundir import (
    RunDir,
    check_results_dir,
    check_run_id,
    default_report_dir,
    default_results_dir,
    new_run_id,
)
from rosetta.runner.signals import describe, interrupt_on_signals
from rosetta.runtime import PRECISIONS, Runtime, check_precision
from rosetta.spec import get_workload, models_dir, workload_names


def _nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return v


__all__ = ["add_parser", "run", "summary", "write_csv"]  # summary/CSV live in rosetta.report


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number, got {text!r}")
    return v


def _int_at_least(low: int, high: int | None = None):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {v}")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"must be an integer <= {high}, got {text[:30]}")
        return v

    return parse


def _thread_list(text: str) -> tuple[int | None, ...]:
    """``--threads``: a comma list of counts >= 1, ``all`` meaning every usable core."""
    out: list[int | None] = []
    for item in (t.strip() for t in text.split(",")):
        out.append(None if item == "all" else _int_at_least(1, MAX_THREADS)(item))
    return tuple(dict.fromkeys(out))


def _batch_list(text: str) -> tuple[int, ...]:
    """``--batch-sizes``: a comma list of positive integers (one line naming a bad one)."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        try:
            v = int(item)
        except ValueError:
            raise RosettaError(
                f"--batch-sizes {item!r}: not an integer; give positive integers, e.g. 1,16,64"
            ) from None
        if v < 1:
            raise RosettaError(f"--batch-sizes {v}: a batch needs at least 1 sample; e.g. 1,16,64")
        out.append(v)
    return tuple(dict.fromkeys(out))


def _precision_list(text: str) -> tuple[str, ...]:
    """``--precisions``: a comma list of known policy names (one line naming a bad one)."""
    names = [t.strip() for t in text.split(",") if t.strip()] or [text]
    return tuple(dict.fromkeys(check_precision(n) for n in names))


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
        help="ci (CI, ~3 min) | smoke (default, 2 rounds, ~8 min on 2 cores) | full (the "
        "original settings) | sweep (ci counts over batch 16,64 x threads 1,all x fp32,bf16)",
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
        type=nonempty_path,
        default=None,
        help="where run folders go (default: $ROSETTA_RESULTS_DIR, else ./results)",
    )
    p.add_argument(
        "--report-dir",
        type=nonempty_path,
        default=None,
        help="where the HTML report goes (default: $ROSETTA_REPORT_DIR, else ./report)",
    )
    p.add_argument(
        "--data-dir", default=None, help="data folder (default $ROSETTA_DATA_DIR or <repo>/data)"
    )
    p.add_argument("--dtype", default="float32", help="float32 (default) | float64")
    p.add_argument(
        "--precisions",
        "--precision",
        default=None,
        help=f"comma list of numeric policies: {' | '.join(PRECISIONS)} (default: the "
        "profile's, fp32); one a backend or device cannot run is recorded as skipped",
    )
    p.add_argument(
        "--batch-sizes",
        default=None,
        help="comma list of batch sizes, e.g. 1,16,64 (default: the profile's); sample counts "
        "stay the profile's; training off the spec batch keeps the spec's optimiser settings",
    )
    p.add_argument(
        "--repeat",
        type=_int_at_least(1),
        default=None,
        help="rounds: every cell this many times, each in a fresh process, in an order shuffled "
        "per round from --seed (default: the profile's: ci 1, smoke 2, full 1, sweep 1)",
    )
    p.add_argument(
        "--wait-quiet",
        type=_nonnegative_float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for a busy machine to become quiet before the first cell "
        "(default 0: warn and go on)",
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
    p.add_argument(
        "--seed", type=_int_at_least(0, 2**32 - 1), default=0, help="weights, order, dropout"
    )
    p.add_argument(
        "--threads",
        type=_thread_list,
        default=None,
        help="comma list of CPU threads per cell ('all': every usable core), set in every "
        "framework and read back into the record (default: the profile's, all usable cores)",
    )
    p.add_argument(
        "--oversubscribe",
        action="store_true",
        help="allow --threads above the usable cores (recorded in run.json)",
    )
    p.add_argument(
        "--gate-every-point",
        action="store_true",
        help="gate every cell; by default a function is gated once per run and its other batch "
        "sizes, thread counts and rounds reuse that verdict (their records name it)",
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
        type=_int_at_least(64, MAX_ADDRESS_SPACE // 2**20),
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
    p.add_argument(
        "--ray-timeout",
        type=_positive_float,
        default=30.0,
        metavar="SECONDS",
        help="--executor ray: give up reaching the cluster after this long (default 30)",
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


def _loadable(names: list[str]) -> list[str]:
    """The workloads of ``--workloads all`` whose specs load; a broken spec is one warning line
    and does not stop the others (as in ``rosetta list``)."""
    from rosetta.errors import SpecError

    good = []
    for name in names:
        try:
            get_workload(name)
            good.append(name)
        except SpecError as exc:
            print(f"rosetta: warning: broken spec skipped: {plain(str(exc))}", file=sys.stderr)
    if not good:
        raise RosettaError(f"no loadable workload spec in {models_dir()}; see the lines above")
    return good


def run(args: argparse.Namespace) -> int:
    """Validate everything, lock the run, run the cells, summarise, report; exit 0 iff all ok.
    SIGTERM and SIGHUP are handled like Ctrl-C throughout."""
    with interrupt_on_signals():
        try:
            return _run(args)
        except KeyboardInterrupt as exc:
            raise RosettaError(
                f"interrupted ({describe(exc)}); the records written so far are kept "
                "(rosetta bench --resume <run-id> completes a run)"
            ) from None


def _run(args: argparse.Namespace) -> int:
    backend_list = _select(args.backends, backends.names(), "backend")
    workload_list = _select(args.workloads, workload_names(), "workload")
    if args.workloads == "all":
        workload_list = _loadable(workload_list)
    prof = bench_profile(args.profile)
    axes = _axes(args, prof, workload_list)  # bad values: one line each, before any work
    for t in axes["threads"]:
        check_threads(t, args.oversubscribe)
    check_memory_limit(args.memory_limit_mb)
    for w in workload_list:
        check_model_memory(get_workload(w), args.dtype)
    report_dir = (
        None if args.no_report else check_report_dir(args.report_dir or default_report_dir())
    )
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
        profile=prof.spec_profile,
        data_dir=None if args.data_dir is None else str(Path(args.data_dir).absolute()),
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
        tf32=args.tf32,
        sample_every=args.sample_every,  # None: each cell decides from its resolved device
    )
    per_cell = ("backend", "workload", "batch_size", "precision", "round", "gate_from")
    pinned = {k: v for k, v in template.as_dict().items() if k not in per_cell}
    pinned.update(backends=backend_list, workloads=workload_list, bench_profile=args.profile,
                  executor=args.executor)  # fmt: skip
    pinned.update({k: list(v) if isinstance(v, tuple) else v for k, v in axes.items()})
    if args.oversubscribe:
        pinned.update(oversubscribe=True)
    if args.gate_every_point:
        pinned.update(gate_every_point=True)
    plan = Plan(
        tuple(backend_list),
        tuple(workload_list),
        template,
        timeout_s=args.timeout,
        retry_failed=args.retry_failed,
        memory_limit_mb=args.memory_limit_mb,
        executor=args.ray_cell_executor if args.executor == "ray" else args.executor,
        data_sources=data_sources,
        gate_once=not args.gate_every_point,
        **axes,
        ray=ray_options,
    )
    from rosetta.runner.progress import make_display

    with RunDir(results_dir, run_id, pinned, create=not resuming) as run_dir:
        if "peak_gflops" not in run_dir.config:
            from rosetta.runner.manifest import environment
            from rosetta.runner.peak import GEMM_PROBES, machine_peaks
            from rosetta.runner.probe import gemm_peak_gflops

            # the peaks this run's backends are measured against: the CPU's theoretical peak
            # and each of their frameworks' own GEMM (fp32, bf16) and a conv probe (issue 18)
            frameworks = {"numpy_ref": "numpy", "chainer": "numpy"}
            probes = {frameworks.get(b, b) for b in backend_list} & set(GEMM_PROBES)
            run_dir.add_to_run_file(
                peak_gflops=gemm_peak_gflops(),
                peaks=machine_peaks(frameworks=tuple(sorted(probes))),
                environment=environment(),
            )
        verb = "resuming" if resuming else "run"
        print(
            f"{verb} {run_id}: profile {args.profile}, {args.dtype} on {args.device}, "
            f"{_axes_text(axes)}, records in {run_dir.path}",
            flush=True,
        )
        labels = [cell_label(c) for r in range(plan.repeat) for c in round_cells(plan, r)]
        display = make_display(labels)
        try:
            index = run_matrix(
                plan, run_dir, display, before_first=lambda: _quiet_check(run_dir, args.wait_quiet)
            )
        except KeyboardInterrupt as exc:
            raise RosettaError(
                f"interrupted ({describe(exc)}); the records written so far are kept in "
                f"{run_dir.path}; resume with --resume {run_id}"
            ) from None
        except RosettaError as exc:  # a disk that refused a record or the index
            raise RosettaError(
                f"{exc}; the records written so far are kept; resume with --resume {run_id}"
            ) from None
        finally:
            getattr(display, "close", lambda: None)()
    errors: list[str] = []
    recs = records.read_records(results_dir / run_id, errors)
    for line in errors:
        print(f"warning: {line}")
    print(summary(recs))
    for line in records.data_changes(recs):
        print(f"warning: {line}")
    csv_path = write_csv(recs, results_dir / run_id / "summary.csv")
    print(f"summary CSV: {csv_path}")
    if report_dir is not None:
        _report(results_dir / run_id, report_dir)
    bad = {k: v for k, v in index.items() if v["status"] not in ("ok", "skipped")}
    if bad:
        print(
            f"{len(bad)} of {len(index)} cells did not succeed: "
            + ", ".join(f"{k} {v['status']}" for k, v in bad.items())
        )
        return 1
    unequal = [k for k, v in index.items() if v["status"] == "ok" and v.get("equivalent") is False]
    if unequal:
        print(f"{len(unequal)} of {len(index)} cells are NOT EQUIVALENT: {', '.join(unequal)}")
        return 3
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
    return RayOptions(address=args.ray_address, cells_per_node=args.cells_per_node,
                      timeout_s=args.ray_timeout)  # fmt: skip


def _axes(args: argparse.Namespace, prof, workload_list: list[str]) -> dict:
    """The run's axes (the options, else the profile's), each value checked: a batch the
    profile's data cannot fill, an unknown precision or a bad runtime request is one line."""
    batch_sizes = _batch_list(args.batch_sizes) if args.batch_sizes else prof.batch_sizes
    precisions = _precision_list(args.precisions) if args.precisions else prof.precisions
    threads = args.threads or prof.threads
    for w in workload_list:
        spec = get_workload(w)
        for b in batch_sizes:
            if b is not None:
                check_batch_size(spec, spec.profile(prof.spec_profile), b)
    for t in threads:
        for prec in precisions:
            Runtime.request("bench", device=args.device, threads=t, dtype=args.dtype,
                            precision=prec, tf32=args.tf32, seed=args.seed)  # fmt: skip
    return {
        "batch_sizes": tuple(batch_sizes),
        "precisions": tuple(precisions),
        "threads": tuple(threads),
        "repeat": args.repeat or prof.repeat,
        # the profile's grid holds while it chooses every axis; an axis given runs the product
        "skip_points": (
            prof.skip_points if not (args.batch_sizes or args.precisions or args.threads) else ()
        ),
    }


def _axes_text(axes: dict) -> str:
    """``batch 16,64 x fp32,bf16 x threads 1,all x 2 rounds`` (the profile's batch: ``spec``)."""

    def show(values, none):
        return ",".join(none if v is None else str(v) for v in values)

    def point(p: dict) -> str:  # {"precision": "bf16", "threads": 1} -> "bf16 threads 1"
        names = {"batch_size": "batch ", "precision": "", "threads": "threads "}
        return " ".join(f"{names[k]}{'all' if v is None else v}" for k, v in p.items())

    skip = [point(p) for p in axes.get("skip_points", ())]
    skips = f" (without {', '.join(skip)})" if skip else ""
    return (
        f"batch {show(axes['batch_sizes'], 'spec')} x {show(axes['precisions'], '')} x "
        f"threads {show(axes['threads'], 'all')}{skips} x {axes['repeat']} "
        f"round{'s' if axes['repeat'] > 1 else ''}"
    )


def _quiet_check(run_dir: RunDir, wait_s: float) -> None:
    """Read the machine before the first cell that runs; warn in one line and record the
    reading in run.json (``quiet_checks``: one per bench invocation that ran a cell)."""
    from rosetta.runner import quiet

    if wait_s > 0:
        print(f"checking the machine is quiet (waiting up to {wait_s:g} s)...", flush=True)
    result = quiet.check_quiet(wait_s)
    if result["warning"]:
        print(f"warning: {result['warning']}", flush=True)
    run_dir.add_to_run_file(quiet_checks=[*run_dir.config.get("quiet_checks", []), result])


def _report(run_dir: Path, report_dir: Path) -> None:
    try:
        from rosetta.report import write_report
    except ImportError:
        print("HTML report: not available in this installation (pip install 'rosetta[report]')")
        return
    out = report_dir / run_dir.name
    path = write_report([run_dir], out)
    print(noise_line(run_dir))
    print(f"HTML report: {path}")


def noise_line(run_dir: Path) -> str:
    """One line: the cells whose steady-state noise could change a verdict (the report's rule,
    ``rosetta.report.stats.noise_matters``), or that none could."""
    from rosetta.report import load_tables
    from rosetta.report.sections import noisy_groups

    try:
        noisy = sorted(noisy_groups(load_tables([run_dir])), key=str)
    except Exception as exc:  # a closing remark must not fail a run whose records are written
        return f"noise: not assessed ({type(exc).__name__}: {exc})"
    if not noisy:
        return "noise: no cell's step spread could change a verdict"
    names = [f"{w} {b} ({point}{f' on {m}' if m else ''})" for _, w, b, point, m in noisy]
    return f"noise that could change a verdict ({len(names)}): {', '.join(names)}"


def _ensure_data(workload_list: list[str], data_dir: str | None) -> dict[str, str]:
    """Verify each data set (synthesising it only in the default data dir), print its source;
    returns ``{workload: data source}`` so that every record can say which data ran."""
    from rosetta.datasets import prepare_data

    names = {w: get_workload(w).dataset.name for w in workload_list}
    sources = prepare_data(list(names.values()), data_dir)
    return {w: sources[d] for w, d in names.items()}
