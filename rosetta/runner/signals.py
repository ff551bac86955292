"""SIGTERM and SIGHUP end ``rosetta bench`` the way Ctrl-C does: as a ``KeyboardInterrupt``.

A batch scheduler stops a job with SIGTERM, a closed terminal sends SIGHUP; both used to end the
process at once, leaving the running cell without a record and the index unwritten. Inside
:func:`interrupt_on_signals` they raise :class:`Interrupted` (a ``KeyboardInterrupt`` naming the
signal), so the code that records a Ctrl-C records them too. Once one interruption has been
raised, further SIGTERM/SIGHUP/SIGINT are ignored until the block ends, so that a second signal
cannot cut the writing of the records and the index short.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; ``signame`` is ``SIGTERM``, ``SIGHUP`` or ``SIGINT``."""

    def __init__(self, signame: str):
        super().__init__(signame)
        self.signame = signame


#: the signals :func:`interrupt_on_signals` turned into an interruption, latest last: a library
#: that catches the :class:`Interrupted` and raises a plain ``KeyboardInterrupt`` in its place
#: (Ray's ``ray.wait`` and ``ray.get`` do) must not turn a SIGTERM into "Ctrl-C"
_received: list[str] = []


def describe(exc: BaseException) -> str:
    """How an interruption is named in records and messages: ``Ctrl-C`` or the signal."""
    name = getattr(exc, "signame", None) or (_received[-1] if _received else "SIGINT")
    return "Ctrl-C" if name == "SIGINT" else name


@contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Turn SIGTERM, SIGHUP and SIGINT into :class:`Interrupted` for the duration of the block
    (main thread only; elsewhere a no-op). The previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = {"n": 0}
    _received.clear()

    def handler(signum: int, frame: object) -> None:
        fired["n"] += 1
        if fired["n"] == 1:  # later signals would interrupt the writing of the records
            _received.append(signal.Signals(signum).name)
            raise Interrupted(signal.Signals(signum).name)

    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextmanager
def ignore_signals() -> Iterator[None]:
    """Ignore SIGTERM, SIGHUP and SIGINT for the block (writing the last records and the index
    after an interruption); the previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
