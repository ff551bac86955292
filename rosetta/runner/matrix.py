"""The matrix: every (workload, backend) cell in its own process, each leaving exactly one record.

Each cell is a child process (``rosetta.runner.papercell``: a papermill execution of the backend's
notebook; or ``rosetta.runner.cell`` without a notebook) in its own session, so that a timeout
kills the cell's whole process tree, and with ``PR_SET_PDEATHSIG`` so that a killed ``rosetta
bench`` takes its cell along. A cell that crashes, hangs past its timeout, is killed by the OS,
or whose backend is not installed still gets a record (``failed``, ``timeout``, ``killed``,
``skipped``) with a one-line reason; Ctrl-C records the running cell as ``interrupted``. Resuming
runs only what is missing (and ``interrupted`` cells); ``retry_failed`` also reruns failed,
timed-out and killed cells, whose old records move to ``attempts/``.
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
from dataclasses import dataclass, replace
from pathlib import Path

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.papercell import failure_record
from rosetta.runner.rundir import RunDir
from rosetta.runtime import child_env

EXECUTORS = {
    "papermill": "rosetta.runner.papercell",  # the notebook, in its own kernel
    "python": "rosetta.runner.cell",  # the same steps without a notebook
}


@dataclass(frozen=True)
class Plan:
    """What one ``rosetta bench`` runs: the cells and how each is run."""

    backends: tuple[str, ...]
    workloads: tuple[str, ...]
    template: CellConfig  # profile, dtype, device, seed, threads...; backend/workload filled in
    timeout_s: float = 1800.0
    retry_failed: bool = False
    memory_limit_mb: int | None = None  # address-space limit of each cell's processes
    executor: str = "papermill"
    data_sources: dict | None = None  # workload -> official | user-provided | synthetic | ...
    ray: object | None = None  # a ray_executor.RayOptions: the cells run as tasks on a Ray cluster


class Display:
    """What the matrix tells the user; ``rosetta.runner.progress`` has the rich one."""

    def start(self, label: str) -> None:  # a cell begins
        pass

    def tick(self, label: str, elapsed_s: float) -> None:  # about twice a second while it runs
        pass

    def done(self, label: str, status: str, detail: str) -> None:  # a cell ended (or was kept)
        print(f"  {label}: {status}" + (f" ({detail})" if detail else ""), flush=True)


def cell_command(config: CellConfig, executor: str = "papermill") -> list[str]:
    """The command that runs one cell in a fresh Python process."""
    return [sys.executable, "-m", EXECUTORS[executor], "--config", config.to_json()]


def run_matrix(plan: Plan, run: RunDir, display: Display | None = None) -> dict[str, dict]:
    """Run every cell of ``plan`` not yet recorded in ``run``; returns ``{cell: index entry}``."""
    display = display or Display()
    if plan.ray is not None:  # the one dispatch point to another executor
        from rosetta.runner.ray_executor import run_matrix_ray

        return run_matrix_ray(plan, run, display, plan.ray)
    env = child_env(plan.template.threads)
    index: dict[str, dict] = {}
    cells = [(w, b) for w in plan.workloads for b in plan.backends]
    for w, b in cells:
        index[f"{b}__{w}"] = {"status": "not run", "error": ""}
    try:
        for workload, backend in cells:
            key = f"{backend}__{workload}"
            config = replace(
                plan.template,
                backend=backend,
                workload=workload,
                data_source=(plan.data_sources or {}).get(workload, ""),
                run_id=run.run_id,
                out=str(records.record_path(run.path.parent, run.run_id, backend, workload)),
            )
            index[key] = _one_cell(plan, run, config, env, display)
            run.write_index(index)
    except KeyboardInterrupt:
        for entry in index.values():
            if entry["status"] == "not run":
                entry["status"] = "interrupted"
                entry["error"] = "not started: the run was interrupted (Ctrl-C)"
        run.write_index(index)
        raise
    run.write_index(index)
    return index


def _one_cell(plan: Plan, run: RunDir, config: CellConfig, env: dict, display: Display) -> dict:
    label = f"{config.backend} x {config.workload}"
    path = Path(config.out)
    st = backends.status(config.backend)
    if path.exists():
        kept = _existing(plan, run, path, st.usable)
        if kept is not None:
            display.done(label, kept["status"], "already recorded, kept")
            return kept
    if not st.usable:
        records.write_record(path, failure_record(config, "skipped", st.reason))
        display.done(label, "skipped", st.reason)
        return {"status": "skipped", "error": st.reason}
    display.start(label)
    status, error = _execute(plan, config, env, display, label)
    if not path.exists():  # the child left no record: write the one that says why
        records.write_record(path, failure_record(config, status, error))
    rec = records.read_record(path)
    status, error = rec["status"], rec.get("error", "")
    detail = error
    if status == "ok":
        c = rec["clocks"]
        eq = "equivalent" if rec["equivalence"]["equivalent"] else "NOT EQUIVALENT"
        detail = f"{eq}, step {c['steady']['median']:.3f} s, {rec.get('wall_s', 0):.0f} s wall"
    display.done(label, status, detail)
    return {"status": status, "error": error, "flags": rec.get("flags", [])}


def _existing(plan: Plan, run: RunDir, path: Path, usable: bool) -> dict | None:
    """The index entry of a kept record, or ``None`` after setting it aside to run again."""
    try:
        rec = records.read_record(path)
    except RosettaError as exc:
        run.set_aside(path, "corrupt")
        print(f"  note: {exc}; moved to attempts/, running the cell again", file=sys.stderr)
        return None
    status = rec["status"]
    rerun = status == "interrupted" or (status in records.RETRYABLE and plan.retry_failed)
    rerun = rerun or (status == "skipped" and usable)  # installed since: measure it now
    if rerun:
        run.set_aside(path, status)
        return None
    return {"status": status, "error": rec.get("error", ""), "flags": rec.get("flags", [])}


def _execute(
    plan: Plan, config: CellConfig, env: dict, display: Display, label: str
) -> tuple[str, str]:
    """Run the cell's process; returns (status, reason) for the case it left no record."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(
            cell_command(config, plan.executor),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            preexec_fn=_child_setup(plan.memory_limit_mb),
        )
        t0 = time.monotonic()
        try:
            while True:
                try:
                    proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - t0
                    display.tick(label, elapsed)
                    if elapsed > plan.timeout_s:
                        kill_tree(proc)
                        return "timeout", (
                            f"cell exceeded its {plan.timeout_s:g} s timeout and was killed "
                            f"(raise --timeout); the partial notebook is kept"
                        )
        except KeyboardInterrupt:
            kill_tree(proc)
            if not Path(config.out).exists():
                why = "interrupted by the user (Ctrl-C)"
                rec = failure_record(config, "interrupted", why)
                records.write_record(Path(config.out), rec)
            raise
        err.seek(0)
        tail = _last_line(err.read())
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        return "killed", f"the cell's process was killed by {sig} (crash or out of memory)"
    return "failed", tail or f"the cell's process exited with status {proc.returncode}"


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
