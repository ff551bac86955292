"""Progress of a ``rosetta bench`` run: a live rich table in a terminal, one line per cell in CI.

The live view shows the whole matrix (every cell's status), the cell running now and its elapsed
time. Anywhere else (a pipe, a CI log, ``CI=true``) the display prints one line per finished cell.
"""

from __future__ import annotations

import os
import sys
import time

from rosetta.runner.matrix import Display

SYMBOLS = {"ok": "ok", "skipped": "skipped", "failed": "FAILED", "timeout": "TIMEOUT",
           "killed": "KILLED", "interrupted": "interrupted"}  # fmt: skip


def interactive() -> bool:
    """A live display only on a real terminal outside CI."""
    return sys.stdout.isatty() and not os.environ.get("CI")


class LineDisplay(Display):
    """One line per cell, with its wall time and, given the run's ``total`` cells, how many are
    done and an estimate of the time left (the mean of the cells that ran in this invocation
    times the cells left; cells kept from an earlier invocation count as done, not as time):
    for logs and CI."""

    def __init__(self, total: int = 0) -> None:
        self.t0: dict[str, float] = {}
        self.total, self.finished, self.ran, self.spent = total, 0, 0, 0.0

    def start(self, label: str) -> None:
        self.t0[label] = time.monotonic()

    def done(self, label: str, status: str, detail: str) -> None:
        took = time.monotonic() - self.t0.pop(label, time.monotonic())
        wall = f" [{took:.0f} s]" if took >= 0.5 else ""
        text = f"  {label:<22} {SYMBOLS.get(status, status):<11}{wall}"
        self.finished += 1
        if took >= 0.5:
            self.ran, self.spent = self.ran + 1, self.spent + took
        print(text + (f" {detail}" if detail else "") + self.eta(), flush=True)

    def eta(self) -> str:
        """`` (3/24, ~4 min left)``; '' without a total."""
        if not self.total:
            return ""
        left = max(self.total - self.finished, 0)
        if not left or not self.ran:
            return f" ({self.finished}/{self.total})"
        s = left * self.spent / self.ran
        return f" ({self.finished}/{self.total}, ~{s / 60:.0f} min left)" if s >= 90 else (
            f" ({self.finished}/{self.total}, ~{s:.0f} s left)")  # fmt: skip


class LiveDisplay(Display):
    """A rich live table of the matrix: status per cell, the running cell's elapsed time."""

    def __init__(self, labels: list[str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.rows = {label: ("waiting", "") for label in labels}
        self.current: str | None = None
        self.started = time.monotonic()
        self.live = Live(self._table(0.0), console=Console(), refresh_per_second=4, transient=False)
        self.live.start()

    def _table(self, elapsed: float):
        from rich.table import Table

        table = Table(title=f"rosetta bench ({time.monotonic() - self.started:.0f} s)")
        for col in ("cell", "status", "detail"):
            table.add_column(col)
        for label, (status, detail) in self.rows.items():
            if label == self.current:
                status, detail = "running", f"{elapsed:.0f} s elapsed"
            style = {"ok": "green", "running": "yellow"}.get(status, "red" if status in (
                "failed", "timeout", "killed") else "")  # fmt: skip
            table.add_row(label, f"[{style}]{status}[/]" if style else status, detail)
        return table

    def start(self, label: str) -> None:
        self.current = label
        self.live.update(self._table(0.0))

    def tick(self, label: str, elapsed_s: float) -> None:
        self.live.update(self._table(elapsed_s))

    def done(self, label: str, status: str, detail: str) -> None:
        self.current = None if self.current == label else self.current
        self.rows[label] = (SYMBOLS.get(status, status), detail)
        self.live.update(self._table(0.0))

    def close(self) -> None:
        self.live.stop()


def make_display(labels: list[str]) -> Display:
    """The live table on a terminal, lines elsewhere (or when rich is missing)."""
    if interactive():
        try:
            return LiveDisplay(labels)
        except ImportError:
            pass
    return LineDisplay(len(labels))
