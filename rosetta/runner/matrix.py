"""The matrix: every (workload, backend) cell in its own process, each leaving exactly one record.

Each cell is a child process (``rosetta.runner.papercell``: a papermill execution of the backend's
notebook; or ``rosetta.runner.cell`` without a notebook) in its own session, so that a timeout
kills the cell's whole process tree, and with ``PR_SET_PDEATHSIG`` so that a killed ``rosetta
bench`` takes its cell along. A cell that crashes, hangs past its timeout, is killed by the OS,
or whose backend is not installed still gets a record (``failed``, ``timeout``, ``killed``,
``skipped``) with a one-line reason; Ctrl-C, SIGTERM and SIGHUP record the running cell and every
cell not yet started as ``interrupted`` and write the index. Resuming
runs only what is missing (and ``interrupted`` cells); ``retry_failed`` also reruns failed,
timed-out and killed cells, whose old records move to ``attempts/``.

The gate runs once per function and run: a cell whose ``CellConfig.gate_identity`` already
passed in this run (another batch size, thread count or round of the same backend, workload,
dtype and precision) reuses that verdict, and its record names the cell it came from
(``equivalence.reused_from``); ``Plan.gate_once=False`` (``--gate-every-point``) gates every cell.
Batch-1 latency is measured likewise once per function and thread count (``latency_cells``).
The Ray executor gates and measures latency in every cell (its cells run at once, on several
machines).
"""

from __future__ import annotations

import ctypes
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.data import DATA_CACHE
from rosetta.runner.papercell import failure_record
from rosetta.runner.plan import Plan
from rosetta.runner.rundir import RunDir
from rosetta.runner.signals import describe, ignore_signals, interrupt_on_signals
from rosetta.runtime import child_env

EXECUTORS = {
    "papermill": "rosetta.runner.papercell",  # the notebook, in its own kernel
    "python": "rosetta.runner.cell",  # the same steps without a notebook
}


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


def round_cells(plan: Plan, round_: int = 0) -> list[CellConfig]:
    """The cells of one round in declared order: workload, backend, then the axes (batch size,
    precision, threads), less the points that match one of ``plan.skip_points`` (each a dict of
    axis values: ``{"precision": "bf16", "threads": 1}``); ``out`` and ``run_id`` are filled in
    by :func:`run_matrix`."""
    cells = [
        replace(
            plan.template,
            backend=b,
            workload=w,
            batch_size=bs,
            precision=prec,
            threads=t,
            round=round_,
            data_source=(plan.data_sources or {}).get(w, ""),
        )
        for w in plan.workloads
        for b in plan.backends
        for bs in plan.batch_sizes
        for prec in plan.precisions
        for t in plan.threads
    ]
    return [c for c in cells if not any(skipped(c, point) for point in plan.skip_points)]


def skipped(config: CellConfig, point: dict) -> bool:
    """Whether ``config`` is the point ``point`` names (every axis value it gives matches)."""
    fields = {"batch_size": config.batch_size, "precision": config.precision,
              "threads": config.threads}  # fmt: skip
    return all(fields[k] == v for k, v in point.items())


def round_orders(plan: Plan) -> list[list[str]]:
    """The cell keys of every round in the order they run. One round keeps the declared order;
    with ``repeat > 1`` each round is shuffled by its own generator, seeded from the run's seed
    and the round number, so that drift of the machine over the run hits every backend alike
    and the order is reproducible from ``run.json``."""
    orders = []
    for r in range(plan.repeat):
        keys = [records.cell_key(c) for c in round_cells(plan, r)]
        if plan.repeat > 1:
            random.Random(f"rosetta-rounds:{plan.template.seed}:{r}").shuffle(keys)
        orders.append(keys)
    return orders


def cell_label(config: CellConfig) -> str:
    """How the display names a cell: ``backend x workload`` and its point when off default."""
    key = records.cell_key(config)
    base = f"{config.backend} x {config.workload}"
    suffix = key.split("__", 2)[2] if key.count("__") >= 2 else ""
    return f"{base} [{suffix}]" if suffix else base


def run_matrix(
    plan: Plan, run: RunDir, display: Display | None = None, before_first=None
) -> dict[str, dict]:
    """Run every cell of ``plan`` not yet recorded in ``run``, round by round, each round in the
    order recorded in ``run.json`` (``round_orders``); returns ``{cell key: index entry}``.
    ``before_first()`` is called once, just before the first cell that really runs (the quiet
    machine check), and not at all when every cell is already recorded."""
    display = display or Display()
    if plan.ray is not None:  # the one dispatch point to another executor
        from rosetta.runner.ray_executor import run_matrix_ray

        return run_matrix_ray(plan, run, display, plan.ray)
    pending = [before_first] if before_first else []
    orders = run.config.get("round_orders")
    if not orders:
        orders = round_orders(plan)
        run.add_to_run_file(round_orders=orders)
    by_key = {records.cell_key(c): c for r in range(plan.repeat) for c in round_cells(plan, r)}
    index: dict[str, dict] = {k: {"status": "not run", "error": ""} for o in orders for k in o}
    gated: dict[tuple, str] = {}  # gate identity -> the record that passed its gate
    timed_latency = latency_cells(orders, by_key)
    try:
        with interrupt_on_signals():
            for key in (k for order in orders for k in order):
                config = replace(_cell_config(run, by_key[key]), latency=key in timed_latency)
                if plan.gate_once:
                    config = replace(config, gate_from=gated.get(config.gate_identity(), ""))
                env = child_env(config.threads)
                index[key] = _one_cell(plan, run, config, env, display, pending)
                run.write_index(index)
                ident = config.gate_identity()
                if plan.gate_once and index[key]["status"] == "ok" and ident not in gated:
                    if _passed_gate(config.out):  # the first passing gate of this function
                        gated[ident] = config.out
    except KeyboardInterrupt as exc:
        with ignore_signals():  # a second signal must not cut the records short
            _record_not_started(run, index, by_key, describe(exc))
            run.write_index(index)
        raise
    finally:
        shutil.rmtree(run.path / DATA_CACHE, ignore_errors=True)  # decoded data: run-long
    run.write_index(index)
    return index


def _cell_config(run: RunDir, config: CellConfig) -> CellConfig:
    """A cell of the plan with its run and record path filled in."""
    return replace(
        config,
        run_id=run.run_id,
        out=str(records.record_path_for(run.path.parent, run.run_id, config)),
    )


def latency_cells(orders: list[list[str]], by_key: dict[str, CellConfig]) -> set[str]:
    """The cells that measure batch-1 latency: in round 0, the first to run of each function
    (``CellConfig.gate_identity``) and thread count. Latency at batch 1 does not depend on the
    timed batch size, so the other batch sizes of that function and thread count skip the loop
    (in a compiling backend it costs a compile of its own as well)."""
    seen, chosen = set(), set()
    for key in (k for order in orders for k in order):
        c = by_key[key]
        point = (c.gate_identity(), c.threads)
        if c.round == 0 and point not in seen:
            seen.add(point)
            chosen.add(key)
    return chosen


def _passed_gate(path: str) -> bool:
    """Whether the record at ``path`` passed the gate (later cells of its function reuse it)."""
    try:
        rec = records.read_record(Path(path))
    except RosettaError:
        return False
    return bool(rec.get("equivalence", {}).get("equivalent"))


def _record_not_started(
    run: RunDir, index: dict[str, dict], by_key: dict[str, CellConfig], why: str
) -> None:
    """After an interruption every cell that never started gets an ``interrupted`` record (a
    resume runs it), so that no cell of the run exists only in ``index.json``."""
    for key, entry in index.items():
        if entry["status"] != "not run" or key not in by_key:
            continue
        config = _cell_config(run, by_key[key])
        if Path(config.out).exists():  # the cell that was running: its record says why
            try:
                rec = records.read_record(Path(config.out))
                entry.update(status=rec["status"], error=rec.get("error", ""))
                continue
            except RosettaError:
                pass
        error = f"not started: the run was interrupted ({why}); --resume {run.run_id} runs it"
        entry.update(status="interrupted", error=error)
        if not Path(config.out).exists():
            records.write_record(Path(config.out), failure_record(config, "interrupted", error))


def _one_cell(
    plan: Plan, run: RunDir, config: CellConfig, env: dict, display: Display, pending=()
) -> dict:
    label = cell_label(config)
    path = Path(config.out)
    st = backends.status(config.backend)
    why_not = st.reason if not st.usable else config.precision_unsupported()
    if path.exists():
        kept = _existing(plan, run, path, not why_not)
        if kept is not None:
            display.done(label, kept["status"], "already recorded, kept")
            return kept
    if why_not:
        records.write_record(path, failure_record(config, "skipped", why_not))
        display.done(label, "skipped", why_not)
        return {"status": "skipped", "error": why_not}
    while pending:  # the hooks due before the first cell that runs
        pending.pop()()
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
        if rec["equivalence"].get("reused_from"):
            eq += f" (gate of {rec['equivalence']['reused_from']})"
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
        except KeyboardInterrupt as exc:
            kill_tree(proc)
            if not Path(config.out).exists():
                why = f"interrupted by {describe(exc)}; the partial notebook is kept"
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
