"""``rosetta serve``: MLPerf LoadGen's serving scenarios over backends x workloads.

``rosetta serve --workloads cnn --backends torch,onnxruntime --scenarios single_stream,server``
runs each backend x workload x scenario as a serving cell in its own process
(``rosetta.serving.cell``), writes one JSON record per cell into ``RESULTS/serving-<id>/`` and
prints the scenario table: SingleStream p90/p99, MultiStream p99, Offline samples/s, Server's
highest VALID target QPS at the p99 bound, LoadGen's verdict, and the accuracy check of LoadGen's
accuracy log against the float64 reference. The same table, with the Server trials'
latency-against-load chart, is written as ``serving.html`` beside the records
(``rosetta.report.loadgen_page``). It is its own command beside ``rosetta bench`` (a
serving cell measures another thing than a timed step: the same records folder, its own kind of
record); ``--run RUN_ID`` adds the cells to a bench run instead (its ``serving/`` folder), whose
HTML report then shows them beside the training tables (a cell already recorded there is kept,
not rerun). Bad input is one line: an unknown scenario, a ``--p99-ms`` or ``--max-batch`` that is
not positive; a bound below a backend's single-stream p99 fails that cell with the p99 named.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rosetta.errors import RosettaError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta serve``."""
    p = sub.add_parser(
        "serve",
        help="MLPerf LoadGen serving scenarios (SingleStream, MultiStream, Server, Offline)",
        description="Run MLPerf LoadGen's serving scenarios for backends x workloads, each "
        "scenario in its own process, outputs checked against the float64 reference.",
    )
    p.add_argument("--workloads", required=True, help="comma list of workloads")
    p.add_argument("--backends", default="", help="comma list (default: every registered one)")
    p.add_argument("--scenarios", default="single_stream,offline,server",
                   help="comma list of single_stream, multi_stream, server, offline")  # fmt: skip
    p.add_argument("--profile", default="ci", help="ci (seconds) | smoke (~1 min) | full (MLPerf)")
    p.add_argument(
        "--p99-ms",
        default=None,
        help="Server's p99 bound (default: 4x (a backend's single-stream p99 + max wait))",
    )
    p.add_argument("--max-batch", default="8", help="the dynamic batcher's max batch (default 8)")
    p.add_argument("--max-wait-ms", default="2", help="its max wait for a batch (default 2 ms)")
    p.add_argument("--results-dir", default=None, help="default: $ROSETTA_RESULTS_DIR or ./results")
    p.add_argument("--run", default=None,
                   help="a bench run's id: add the records to its serving/ folder and its report "
                   "(default: a new serving-<time> folder)")  # fmt: skip
    p.add_argument("--data-dir", default=None, help="data folder (default $ROSETTA_DATA_DIR)")
    p.add_argument("--timeout", default="1800", help="seconds per cell (default 1800)")
    p.set_defaults(func=run)


def _positive(option: str, text: str | None, kind=float):
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise RosettaError(f"{option}: expected a number, got {str(text)[:30]!r}") from None
    if not value > 0:
        raise RosettaError(f"{option}: must be above 0, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from rosetta import backends
    from rosetta.serving.cell import Request
    from rosetta.serving.scenarios import parse_scenarios
    from rosetta.spec import get_workload

    scenarios = parse_scenarios(args.scenarios)
    p99 = _positive("--p99-ms", args.p99_ms)
    max_batch = _positive("--max-batch", args.max_batch, int)
    wait = _positive("--max-wait-ms", args.max_wait_ms)
    timeout = _positive("--timeout", args.timeout)
    names = [b for b in args.backends.split(",") if b] or backends.names()
    for b in names:
        if b not in backends.names():
            raise RosettaError(f"--backends: unknown backend {b[:40]!r}; see `rosetta list`")
    workloads = [w for w in args.workloads.split(",") if w]
    root = Path(args.results_dir or os.environ.get("ROSETTA_RESULTS_DIR") or "results")
    run_dir = None if args.run is None else _bench_run(root, args.run)
    sets = [get_workload(w).dataset.name for w in workloads]  # an unknown name: one line
    from rosetta.datasets import prepare_data
    from rosetta.datasets.paths import resolve_data_dir

    if args.data_dir is not None and not args.data_dir.strip():
        raise RosettaError("--data-dir: an empty path; name a folder")
    prepare_data(sets, args.data_dir)  # verified; synthesised only in the default folder
    data_dir = str(resolve_data_dir(args.data_dir))
    folder = _folder(root, run_dir)
    records = []
    for w in workloads:
        for b in names:
            for s in scenarios:
                cache = str(folder / f"reference__{w}.npz")
                req = Request(b, w, s, args.profile, max_batch, wait, p99, None, data_dir, cache)
                records.append(_run_cell(req, folder, timeout))
                print(row_text(records[-1]), flush=True)
    bad = [r for r in records if r.get("status") == "failed"]
    from rosetta.report.loadgen_page import write

    print(f"records: {folder}\nserving page: {write(folder)}")
    if args.run is not None:
        print(f"the run's report shows them: rosetta report {args.run}")
    return 1 if bad else 0


def _bench_run(root: Path, run: str) -> Path:
    """The bench run ``--run`` names (one line if there is none)."""
    from rosetta.runner.rundir import check_run_id

    run_dir = root / check_run_id(run)
    if not (run_dir / "run.json").is_file():
        raise RosettaError(f"--run: no bench run {run[:60]!r} in {root} (no run.json); "
                           "name one from `ls results` or leave --run out")  # fmt: skip
    return run_dir


def _folder(root: Path, run_dir: Path | None) -> Path:
    """Where the records go: a new ``serving-<time>`` folder, or the bench run's ``serving/``."""
    if run_dir is None:
        folder = root / f"serving-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=False)
        return folder
    from rosetta.report.loadgen_page import SERVING_DIR

    folder = run_dir / SERVING_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise RosettaError(f"--run: {folder} is not a folder; move it aside")
    folder.mkdir(exist_ok=True)
    return folder


def _run_cell(req, folder: Path, timeout: float) -> dict:
    stem = f"{req.backend}__{req.workload}__{req.scenario}"
    request, record = folder / f"{stem}.request.json", folder / f"{stem}.json"
    kept = _recorded(record)
    if kept is not None:  # nothing recorded is lost: a second `serve --run` keeps the first
        return kept
    request.write_text(json.dumps(req.as_record()))
    cmd = [sys.executable, "-m", "rosetta.serving.cell", str(request), str(record)]
    try:
        why = f"exit status {subprocess.run(cmd, timeout=timeout, check=False).returncode}"
    except subprocess.TimeoutExpired:
        why = f"killed at the --timeout of {timeout:g} s"
    if not record.is_file():
        why = f"the cell's process ended without a record ({why})"
        out = {"kind": "serving", "request": req.as_record(), "status": "failed", "error": why}
        record.write_text(json.dumps(out))
        return out
    return json.loads(record.read_text())


def _recorded(path: Path) -> dict | None:
    """The serving record already at ``path`` (a rerun into a bench run keeps it), else None."""
    if not path.is_file() or path.is_symlink():
        return None
    try:
        r = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(r, dict) and r.get("kind") == "serving" and r.get("status") in ("ok", "skipped")
    return r if ok else None  # a failed cell runs again


def row_text(r: dict) -> str:
    """One printed line of the scenario table (the serving page's figure and accuracy)."""
    from rosetta.report.loadgen_page import accuracy, figure

    q = r["request"]
    head = f"  {q['backend']:<12} {q['workload']:<12} {q['scenario']:<13}"
    fig, verdict = figure(r)
    if r.get("status") != "ok":
        return f"{head} {verdict}"
    return f"{head} {fig}, LoadGen {verdict}; accuracy {accuracy(r)}"
