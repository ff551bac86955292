"""Binding a process's threads to ``n`` cores: how a backend whose framework has no thread count
that bounds its work (XLA:CPU, MindSpore's CPU runtime) runs a cell on ``n`` cores.

Every thread of the process is bound to the first ``n`` of the cores it started with
(``os.sched_setaffinity`` per task in ``/proc/self/task``; a thread inherits its creator's mask,
so threads made later are bound too); a count at least their number binds all of them again.
What is in effect is read back: the largest affinity mask among the process's threads. Where
the OS has no affinity masks, nothing is bound and the machine's core count is reported.
Nothing here imports a framework.
"""

from __future__ import annotations

import os

#: the cores this process started with (imported before any binding): ``bind`` takes its
#: first ``n`` and can widen back
START_CORES: tuple[int, ...] = (
    tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
)


def thread_ids() -> list[int]:
    """This process's thread ids (the calling thread's ``0`` where there is no ``/proc``)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # not Linux: the calling thread only
        return [0]


def in_effect() -> int:
    """The cores the process's threads may run on: the largest affinity mask among them."""
    if not START_CORES:
        return os.cpu_count() or 1
    sizes = []
    for tid in thread_ids():
        try:
            sizes.append(len(os.sched_getaffinity(tid)))
        except OSError:  # the thread ended meanwhile
            continue
    return max(sizes, default=len(os.sched_getaffinity(0)))


def bind(n: int) -> int:
    """Bind every thread of the process to the first ``n`` starting cores (all of them when ``n``
    is at least their number); returns the cores in effect, read back."""
    if START_CORES:
        cores = START_CORES[: max(1, int(n))]
        for tid in thread_ids():
            try:
                os.sched_setaffinity(tid, cores)
            except OSError:  # the thread ended meanwhile
                continue
    return in_effect()
