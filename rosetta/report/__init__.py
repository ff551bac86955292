"""The report: Rosetta's records as a pandas frame and as one self-contained HTML page.

Public API (pandas, matplotlib and Jinja2 are the ``report`` extra; they are imported only when
one of these functions runs, so ``rosetta list`` and the runner never load them):

- :func:`write_report` ``(run_dirs, out_dir) -> Path``: read the runs, write
  ``out_dir/index.html``, return its path. This is what ``rosetta bench`` calls at the end of a
  run and what ``rosetta report`` runs. Records it cannot read (truncated, unknown schema
  version, a missing run folder) are listed in the page and in ``problems``; it raises
  :class:`rosetta.errors.RosettaError` only when not one record can be read.
- :func:`load_tables` ``(run_dirs) -> Tables``: the frames (``cells``: one row per record, i.e.
  per cell and round; ``groups``: one row per (run, workload, backend, point) over its rounds;
  ``tidy``: one row per record and measure with its 95% interval; raw step times and losses
  per cell, as frames on demand: ``steps``, ``losses``) and the runs as read; ``progress``
  receives a line now and then on large runs.
- :func:`export` ``(tables, path, fmt) -> Path``: the tidy frame as ``csv`` or ``parquet``.

Modules: ``load`` (records from disk, defensively), ``order`` (the one order of workloads and
backends, titles from the spec), ``frame`` (pandas), ``groups`` (rounds of one point as one
group), ``stats`` (NumPy: cross-round intervals, paired ratios, "no clear difference", noise),
``compare`` (ratios to the fastest, run against run), ``charts`` (matplotlib -> inline SVG),
``fmt`` (number formats), ``headline`` (the headline tables), ``sections`` (the other tables),
``scaling`` (batch, threads, precision, latency), ``serving`` (batch-1 latency and throughput
of every backend that ran a forward pass, with its engine's version and settings), ``ceilings``
(each cell against the run's measured ceilings and its roofline bound, no pandas),
``references`` (the shipped fractions of ceiling other machines reached), ``roofline`` (the
roofline charts and table), ``summary``
(the bench's text table and CSV, no pandas), ``html`` (Jinja2 -> index.html). The browser check
of the page (headless Chromium over the DevTools protocol) lives with the tests and scripts that
use it: ``tests/browser.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rosetta.errors import RosettaError

if TYPE_CHECKING:  # pragma: no cover
    from rosetta.report.frame import Tables

__all__ = ["EXPORT_FORMATS", "export", "load_tables", "write_report"]

EXPORT_FORMATS = ("csv", "parquet")


def require_libraries() -> None:
    """Raise a one-line ``RosettaError`` if pandas, matplotlib or Jinja2 is missing."""
    import importlib.util

    missing = [m for m in ("pandas", "matplotlib", "jinja2") if importlib.util.find_spec(m) is None]
    if missing:
        raise RosettaError(f"the report needs {', '.join(missing)}: pip install 'rosetta[report]'")


def load_tables(run_dirs: list[Path], progress=None) -> Tables:
    """Read the run folders into the report's frames (see :class:`rosetta.report.frame.Tables`).

    ``progress(line)``, if given, receives a line now and then on large runs (records read,
    records tabulated)."""
    require_libraries()
    from rosetta.report.frame import build_tables
    from rosetta.report.load import load_runs

    def read(run_dir, done: int, total: int) -> None:
        progress(f"read {done:,} of {total:,} records of {Path(run_dir).name}")

    def tabulated(done: int, total: int) -> None:
        progress(f"tabulated {done:,} of {total:,} records")

    on = progress is not None
    runs = load_runs([Path(d) for d in run_dirs], read if on else None)
    return build_tables(runs, tabulated if on else None)


def write_report(run_dirs: list[Path], out_dir: Path) -> Path:
    """Write the HTML report of ``run_dirs`` to ``out_dir/index.html``; return that path.

    One run gives the single-run report; two or more add the comparison of every later run
    against the first (each cell's step-time ratio with its interval, changes outside the noise
    flagged). Beside it, ``rosetta.html``: the Rosetta page (each spec op in every framework)."""
    from rosetta.report.html import write_html
    from rosetta.report.rosetta_page import write_rosetta_page

    index = write_html(load_tables(run_dirs), Path(out_dir))
    write_rosetta_page(Path(out_dir))  # the page the report's "Rosetta" link opens
    return index


def export(tables: Tables, path: Path, fmt: str) -> Path:
    """Write the tidy frame (one row per cell and measure) as ``csv`` or ``parquet``."""
    if fmt not in EXPORT_FORMATS:
        raise RosettaError(f"unknown export format {fmt!r}; valid: {', '.join(EXPORT_FORMATS)}")
    from rosetta.userfile import check_target

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_target(path, f"--export {fmt}", force=True)  # a FIFO would block, a link be followed
    if fmt == "csv":
        from rosetta.safetext import csv_cell

        tables.tidy.apply(lambda col: col.map(csv_cell)).to_csv(path, index=False)
        return path
    try:
        tables.tidy.to_parquet(path, index=False)
    except ImportError:
        raise RosettaError(
            "parquet export needs pyarrow or fastparquet, neither is installed: "
            "pip install pyarrow, or use --export csv"
        ) from None
    return path
