#!/usr/bin/env python
"""Screenshot of a Rosetta report in headless Chromium (PNG), for the README: never edited by hand.

    python scripts/report_screenshot.py                      # newest run in results/
    python scripts/report_screenshot.py RUN_ID [RUN_ID ...]  # those runs (several: compared)
    python scripts/report_screenshot.py --fixture            # the tests' fixture runs
    options: --out PNG  --full-page  --section ID  --width 1366 --height 900  --results-dir DIR
    e.g. --section scaling --height 1800: the top of the report's scaling section
    (docs/report-scaling.png)

Writes the report (``report/<name>/index.html``) first, then opens it in Debian's chromium
(``scripts/install_chromium.sh``) with the network recorder on, saves the PNG (default
``report/<name>/screenshot.png``) and prints its path; it refuses if the page requested anything
from the network.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rosetta.cli.report import REPORT_DIR, RESULTS_DIR, report_name  # noqa: E402
from rosetta.errors import RosettaError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="report_screenshot.py", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", metavar="RUN_ID")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--fixture", action="store_true", help="the test fixture runs (no bench run)")
    p.add_argument("--out", type=Path, default=None, help="PNG path")
    p.add_argument("--full-page", action="store_true", help="the whole page, not one screen")
    p.add_argument("--section", default=None, help="only the element with this id (e.g. scaling)")
    p.add_argument("--width", type=int, default=1366)
    p.add_argument("--height", type=int, default=900)
    args = p.parse_args(argv)

    from rosetta.report import write_report
    from rosetta.report.load import find_runs
    from tests.browser import find_chromium, screenshot

    if find_chromium() is None:
        print("report_screenshot: no chromium (bash scripts/install_chromium.sh)", file=sys.stderr)
        return 2
    try:
        if args.fixture:
            sys.path.insert(0, str(REPO / "tests"))
            from report_fixtures import write_fixture_runs

            run_dirs = list(write_fixture_runs(Path(tempfile.mkdtemp()) / "results"))
            name = "fixture"
        else:
            run_dirs, missing = find_runs(args.results_dir, args.runs)
            for line in missing:
                print(f"report_screenshot: {line}", file=sys.stderr)
            name = report_name([d.name for d in run_dirs])
        index = write_report(run_dirs, REPORT_DIR / name)
        png = args.out or index.parent / "screenshot.png"
        visit = screenshot(
            index, png, full_page=args.full_page, size=(args.width, args.height),
            section=args.section,
        )  # fmt: skip
    except RosettaError as exc:
        print(f"report_screenshot: {exc}", file=sys.stderr)
        return 2
    fetched = visit.external_requests(index.resolve().as_uri())
    if fetched:
        print(f"report_screenshot: the page requested {fetched}", file=sys.stderr)
        return 1
    print(index)
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
