"""``rosetta report [RUN_ID ...]``: the HTML report of one run, or the comparison of several.

Writes ``report/<name>/index.html`` (name: the run folder's name, or ``A_vs_B`` for a
comparison; never the ``run_id`` written inside a run, which a copied run shares) and
prints its path; ``--export csv|parquet`` also writes the tidy frame beside it. Everything that
could not be read (a missing run id, a truncated record, an unknown schema version) is printed
as one line on stderr and listed in the page, and the rest of the report is still written. The
report's libraries (pandas, matplotlib, Jinja2) are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rosetta.runner.rundir import default_report_dir, default_results_dir

RESULTS_DIR = default_results_dir()  # ./results of the working directory, or $ROSETTA_RESULTS_DIR
REPORT_DIR = default_report_dir()  # ./report, or $ROSETTA_REPORT_DIR
LARGE = 1000  # records from which the report says what it is doing (on stderr)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta report``."""
    p = sub.add_parser(
        "report",
        help="write the HTML report of runs (default: the newest) to report/<name>/index.html",
    )
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN_ID",
        help="run ids in --results-dir (or paths to run folders); two or more are compared "
        "against the first",
    )
    p.add_argument(
        "--results-dir", type=Path, default=None, help="default ./results or $ROSETTA_RESULTS_DIR"
    )
    p.add_argument(
        "--out-dir", type=Path, default=None, help="parent of <name>/ (default ./report)"
    )
    p.add_argument("--name", default=None, help="report folder name (default: from the run ids)")
    p.add_argument(
        "--export",
        choices=("csv", "parquet"),
        default=None,
        help="also write the tidy frame (one row per cell and measure) as rosetta.<format>",
    )
    p.set_defaults(func=run)


def report_name(run_ids: list[str]) -> str:
    """Folder name of a report: the run id, or ``A_vs_B`` (unsafe characters replaced)."""
    name = "_vs_".join(Path(r).name for r in run_ids)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:120].lstrip(".")  # never '.', '..' or hidden
    return name or "report"


def _checked_name(name: str) -> str:
    """``--name`` is one folder inside ``--out-dir``: a plain name, never a path."""
    from rosetta.errors import RosettaError

    if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}", name):
        raise RosettaError(
            f"report name {name!r} is not a plain folder name (letters, digits, '.', '_', '-'; "
            f"no '/' or leading '.'); pick another --name"
        )
    return name


def run(args: argparse.Namespace) -> int:
    """Find the runs, print what could not be read, write the report, print its path."""
    from rosetta.report import export, load_tables
    from rosetta.report.html import write_html
    from rosetta.report.load import find_runs
    from rosetta.safetext import plain

    results_dir = args.results_dir or default_results_dir()
    run_dirs, missing = find_runs(results_dir, list(args.runs))
    for line in missing:
        print(f"rosetta report: {plain(line)}", file=sys.stderr)

    def progress(line: str) -> None:  # large runs only: every thousand records or so
        print(f"rosetta report: {line}", file=sys.stderr, flush=True)

    tables = load_tables(run_dirs, progress)
    for line in tables.runs.problems:
        print(f"rosetta report: {plain(line)}", file=sys.stderr)
    records = sum(len(r.records) for r in tables.runs.runs)
    if records >= LARGE:  # the same count the tabulating lines gave, and the rows it made
        progress(f"writing the page of {records:,} records ({len(tables.cells):,} rows)")
    ids = [r.run_id for r in tables.runs.runs]  # the run folders' names (rosetta.report.load)
    out_dir = (args.out_dir or default_report_dir()) / _checked_name(args.name or report_name(ids))
    if missing:  # show the missing run ids in the page too
        from dataclasses import replace

        tables = replace(
            tables, runs=replace(tables.runs, problems=(*missing, *tables.runs.problems))
        )
    print(write_html(tables, out_dir))
    if args.export:
        print(export(tables, out_dir / f"rosetta.{args.export}", args.export))
    return 0
