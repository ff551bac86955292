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
record). Bad input is one line: an unknown scenario, a ``--p99-ms`` or ``--max-batch`` that is
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
    sets = [get_workload(w).dataset.name for w in workloads]  # an unknown name: one line
    from rosetta.datasets import prepare_data
    from rosetta.datasets.paths import resolve_data_dir

    if args.data_dir is not None and not args.data_dir.strip():
        raise RosettaError("--data-dir: an empty path; name a folder")
    prepare_data(sets, args.data_dir)  # verified; synthesised only in the default folder
    data_dir = str(resolve_data_dir(args.data_dir))
    root = Path(args.results_dir or os.environ.get("ROSETTA_RESULTS_DIR") or "results")
    folder = root / f"serving-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=False)
    records = []
    for w in workloads:
        for b in names:
            for s in scenarios:
                cache = str(folder / f"reference__{w}.npz")
                req = Request(b, w, s, args.profile, max_batch, wait, p99, None, data_dir, cache)
                records.append(_run_cell(req, folder, timeout))
                print(_row(records[-1]), flush=True)
    bad = [r for r in records if r.get("status") == "failed"]
    from rosetta.report.loadgen_page import write

    print(f"records: {folder}\nserving page: {write(folder)}")
    return 1 if bad else 0


def _run_cell(req, folder: Path, timeout: float) -> dict:
    stem = f"{req.backend}__{req.workload}__{req.scenario}"
    request, record = folder / f"{stem}.request.json", folder / f"{stem}.json"
    request.write_text(json.dumps(req.as_record()))
    cmd = [sys.executable, "-m", "rosetta.serving.cell", str(request), str(record)]
    try:
        subprocess.run(cmd, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pass
    if not record.is_file():
        why = f"the cell's process ended without a record (timeout {timeout:g} s?)"
        out = {"kind": "serving", "request": req.as_record(), "status": "failed", "error": why}
        record.write_text(json.dumps(out))
        return out
    return json.loads(record.read_text())


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1e3:.3g} ms"


def _row(r: dict) -> str:
    """One line of the scenario table."""
    q = r["request"]
    head = f"  {q['backend']:<12} {q['workload']:<12} {q['scenario']:<13}"
    if r.get("status") != "ok":
        return f"{head} {r.get('status')}: {r.get('reason') or r.get('error')}"
    acc = r["accuracy"]
    check = "equivalent" if acc["equivalent"] else f"NOT equivalent ({acc.get('violation')})"
    if q["scenario"] == "server":
        s = r["server"]
        best = s["max_valid_qps"]
        figure = (f"max VALID {best:.4g} QPS at p99 <= {_ms(r['p99_bound_s'])} "
                  f"({len(s['trials'])} trials)" if best else "no VALID trial")  # fmt: skip
    else:
        perf = r["performance"]
        pct = perf["percentiles_s"]
        if q["scenario"] == "offline":
            figure = f"{perf.get('samples_per_second') or 0:.4g} samples/s"
        else:
            figure = f"p90 {_ms(pct.get('90.00'))}, p99 {_ms(pct.get('99.00'))}"
        figure += f", LoadGen {perf['result']}"
        if perf["reasons"]:
            figure += f" ({'; '.join(perf['reasons'])})"
    return f"{head} {figure}; accuracy {check}"
