"""Is the machine quiet enough to time? Read once before the first cell (issue 22 item 5).

*Busy* means either the 1-minute load average is at least ``BUSY_LOAD`` x the usable cores
(0.5 x 2 = 1.0 on the 2-core machine: one core's worth of other work), or another process used
more than ``BUSY_PROCESS_PERCENT`` of one core over a short sample. A busy machine is a warning
(one line, recorded in ``run.json``), never a refusal: ``--wait-quiet SECONDS`` waits up to that
long for it to calm down, then proceeds with the warning recorded.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from rosetta.runtime import usable_cores

BUSY_LOAD = 0.5  # 1-minute load average per usable core at or above which the machine is busy
BUSY_PROCESS_PERCENT = 20.0  # % of one core another process may use before it counts as busy
POLL_S = 5.0  # seconds between readings while waiting


@dataclass(frozen=True)
class MachineLoad:
    """One reading: the load average, the cores, and the busiest other process."""

    load1: float  # 1-minute load average
    cores: int  # usable cores of this process
    top_name: str = ""  # the busiest other process ("" when none was seen)
    top_pid: int = 0
    top_percent: float = 0.0  # its CPU use over the sample, % of one core


def read_load(sample_s: float = 0.5) -> MachineLoad:
    """Read the load average and each other process's CPU use over ``sample_s`` seconds."""
    import psutil

    own = {os.getpid()} | {p.pid for p in psutil.Process().children(recursive=True)}
    procs = []
    for p in psutil.process_iter(["name"]):
        if p.pid in own:
            continue
        try:
            p.cpu_percent(None)  # primes the counter
            procs.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    time.sleep(sample_s)
    top = ("", 0, 0.0)
    for p in procs:
        try:
            pct = p.cpu_percent(None)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if pct > top[2]:
            top = (p.info.get("name") or "?", p.pid, pct)
    return MachineLoad(os.getloadavg()[0], usable_cores(), *top)


def busy_reason(load: MachineLoad) -> str:
    """Why the machine is busy (one line), or ``""`` when it is quiet."""
    why = []
    if load.load1 >= BUSY_LOAD * load.cores:
        why.append(
            f"1-minute load {load.load1:.2f} >= {BUSY_LOAD:g} x {load.cores} cores "
            f"({BUSY_LOAD * load.cores:g})"
        )
    if load.top_percent > BUSY_PROCESS_PERCENT:
        why.append(f"another process uses {load.top_percent:.0f}% CPU > {BUSY_PROCESS_PERCENT:g}%")
    if not why:
        return ""
    top = "none seen"
    if load.top_name:
        top = f"{load.top_name} (pid {load.top_pid}, {load.top_percent:.0f}% CPU)"
    return f"machine busy: {'; '.join(why)}; top process {top}; timings may be skewed"


def check_quiet(wait_s: float = 0.0, reader=None, sleep=time.sleep, clock=time.monotonic) -> dict:
    """Read the machine (waiting up to ``wait_s`` seconds for it to become quiet) and return
    what ``run.json`` records: ``{quiet, warning, waited_s, load1, cores, top_...}``."""
    reader = reader or read_load
    t0 = clock()
    load = reader()
    why = busy_reason(load)
    while why and clock() - t0 < wait_s:
        sleep(min(POLL_S, max(0.0, wait_s - (clock() - t0))))
        load = reader()
        why = busy_reason(load)
    return {"quiet": not why, "warning": why, "waited_s": round(clock() - t0, 3), **asdict(load)}
