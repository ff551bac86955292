"""Executors: how one cell travels to a fresh process and its record comes back.

The matrix (:mod:`rosetta.runner.matrix`) owns the run: which cells run and in which order, what
is kept or skipped, which gate verdict a cell may reuse, which cell measures batch-1 latency, the
index and the records. An executor only *transports* cells, through this small protocol:

- ``slots``: how many cells it runs at once (``None``: as many as it is given);
- ``with executor:`` connects (a Ray cluster) and disconnects; a local one has nothing to do;
- ``submit(config)``: start one cell (its record goes to ``config.out``);
- ``wait(timeout_s)``: the cells that ended since, each a :class:`Finished` with its record;
- ``interrupt(why)``: stop every cell in flight; returns the ones that had started (their
  records say ``interrupted`` by ``why``, or what they reached before) and the configs of those
  that never started (the matrix records them with the rest of the unstarted cells).

:class:`LocalExecutor` runs each cell as ``python -m MODULE --config JSON`` (``MODULE`` one of
:data:`EXECUTORS`) in its own session, so that a timeout kills the cell's whole process tree, and
with ``PR_SET_PDEATHSIG`` so that a killed ``rosetta bench`` takes its cell along; a cell that
crashes, hangs past its timeout or is killed by the OS gets a record saying so. The Ray executor
(:mod:`rosetta.runner.ray_executor`) runs the same :class:`CellProcess` on a node.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.papercell import failure_record

EXECUTORS = {
    "papermill": "rosetta.runner.papercell",  # the notebook, in its own kernel
    "python": "rosetta.runner.cell",  # the same steps without a notebook
}


@dataclass(frozen=True)
class Finished:
    """A cell that ended: its config, its record (a dict, written or not yet) and where it ran
    (``""`` locally, ``"node-name"`` on a cluster)."""

    config: CellConfig
    record: dict
    where: str = ""


class Executor(Protocol):
    """What the matrix asks of an executor (see the module docstring)."""

    slots: int | None

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc) -> None: ...

    def submit(self, config: CellConfig) -> None: ...

    def wait(self, timeout_s: float) -> list[Finished]: ...

    def interrupt(self, why: str) -> tuple[list[Finished], list[CellConfig]]: ...


@dataclass(frozen=True)
class CellProcess:
    """How one cell's process is started: the cell module, its timeout, its memory cap."""

    executor: str = "papermill"  # a key of EXECUTORS
    timeout_s: float = 1800.0
    memory_limit_mb: int | None = None

    @property
    def notebook_note(self) -> str:
        """What a stopped cell leaves besides its record (papermill saves the notebook)."""
        return "; the partial notebook is kept" if self.executor == "papermill" else ""

    def command(self, config: CellConfig) -> list[str]:
        """The command that runs one cell in a fresh Python process."""
        return cell_command(config, self.executor)


def cell_command(config: CellConfig, executor: str = "papermill") -> list[str]:
    """The command that runs one cell in a fresh Python process. A timing round always runs
    without a notebook (``rosetta.runner.cell``): a kernel's start would cost it more than its
    steps, and its notebook would show a handful of step times that its record already holds."""
    module = EXECUTORS["python" if config.kind == "timing" else executor]
    return [sys.executable, "-m", module, "--config", config.to_json()]


class Running:
    """One cell's process while it runs: started, polled, killed; its record at the end."""

    def __init__(self, how: CellProcess, config: CellConfig, env: dict):
        self.how, self.config = how, config
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in result()
        self.proc = subprocess.Popen(
            how.command(config),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.err,
            start_new_session=True,
            preexec_fn=_child_setup(how.memory_limit_mb),
        )
        self.t0 = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def poll(self, timeout_s: float) -> dict | None:
        """Wait up to ``timeout_s`` for the process; its record once it ended (or was killed
        past the cell's timeout), else ``None``."""
        try:
            self.proc.wait(timeout=max(timeout_s, 0.001))
        except subprocess.TimeoutExpired:
            if self.elapsed <= self.how.timeout_s:
                return None
            kill_tree(self.proc)
            why = (f"cell exceeded its {self.how.timeout_s:g} s timeout and was killed (raise "
                   f"--timeout){self._note}")  # fmt: skip
            return self._record("timeout", why)
        if self.proc.returncode < 0:
            sig = signal.Signals(-self.proc.returncode).name
            return self._record(
                "killed", f"the cell's process was killed by {sig} (crash or out of memory)"
            )
        self.err.seek(0)
        tail = _last_line(self.err.read())
        return self._record(
            "failed", tail or f"the cell's process exited with status {self.proc.returncode}"
        )

    def stop(self, why: str) -> dict:
        """Kill the cell (an interruption); its record, ``interrupted`` unless it wrote one."""
        kill_tree(self.proc)
        return self._record("interrupted", f"interrupted by {why}{self._note}")

    @property
    def _note(self) -> str:
        """The notebook note, for a cell that runs in one (never a timing round)."""
        return "" if self.config.kind == "timing" else self.how.notebook_note

    def _record(self, status: str, error: str) -> dict:
        """The record the cell wrote, else the one that says why it wrote none."""
        self.err.close()
        path = Path(self.config.out)
        if path.exists():
            try:
                return records.read_record(path)
            except RosettaError as exc:  # the matrix sets a broken record aside on resume
                return failure_record(self.config, "failed", str(exc))
        return failure_record(self.config, status, error)


def run_one(how: CellProcess, config: CellConfig, env: dict, tick=None) -> dict:
    """Run one cell's process to its end (Ctrl-C or a Ray cancel stops it, with a record);
    returns its record. ``tick(elapsed_s)`` is called about twice a second."""
    cell = Running(how, config, env)
    try:
        while True:
            rec = cell.poll(0.5)
            if rec is not None:
                return rec
            if tick:
                tick(cell.elapsed)
    except KeyboardInterrupt:
        cell.stop("an interruption")
        raise


class LocalExecutor:
    """Cells one at a time, each in a fresh local process (``python -m rosetta.runner.cell`` or
    the papermill kernel of ``rosetta.runner.papercell``)."""

    slots = 1

    def __init__(self, how: CellProcess, display=None):
        self.how, self.display = how, display  # display: start(config), tick(config, seconds)
        self.running: Running | None = None

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc) -> None:
        if self.running is not None:  # an error in the matrix: no orphan cell
            kill_tree(self.running.proc)
            self.running = None

    def submit(self, config: CellConfig) -> None:
        from rosetta.runtime import child_env

        if self.running is not None:
            raise RuntimeError("the local executor runs one cell at a time")
        if self.display:
            self.display.start(config)
        self.running = Running(self.how, config, child_env(config.threads))

    def wait(self, timeout_s: float) -> list[Finished]:
        cell = self.running
        if cell is None:
            return []
        rec = cell.poll(timeout_s)
        if rec is None:
            if self.display:
                self.display.tick(cell.config, cell.elapsed)
            return []
        self.running = None
        return [Finished(cell.config, rec)]

    def interrupt(self, why: str) -> tuple[list[Finished], list[CellConfig]]:
        cell, self.running = self.running, None
        return ([Finished(cell.config, cell.stop(why))] if cell else []), []


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a cell's process and everything it started (kernels included)."""
    try:
        import psutil

        children = psutil.Process(proc.pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - psutil missing or the process already gone
        children = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in children:
        try:
            child.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass
    proc.wait()


def _child_setup(memory_limit_mb: int | None):
    """A ``preexec_fn``: die with the parent (Linux), and cap the address space if asked."""

    def setup() -> None:
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6", use_errno=True)
                libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            except OSError:
                pass
        if memory_limit_mb:
            limit = int(memory_limit_mb) * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return setup


def _last_line(text: str) -> str:
    noise = ("Kernel is running over TCP", "WARNING | ")
    lines = [
        line.strip()
        for line in text.strip().splitlines()
        if line.strip() and not any(n in line for n in noise)
    ]
    return lines[-1].removeprefix("rosetta: error: ") if lines else ""
