"""A run's folder: unique ids, one writer at a time, its configuration stored once, an index.

``results/<run-id>/`` holds one record per cell, the executed notebooks, ``run.json`` (the run's
configuration and selection, written once: a resume with other settings, backends, workloads or
executor is refused), ``index.json`` (each cell's status, rewritten atomically after every cell,
``interrupted`` after Ctrl-C, SIGTERM or SIGHUP) and ``.lock`` (held by the one ``rosetta bench``
working in it). A disk that refuses a write (full, read-only, no permission, a symlink loop) is
one line naming the path and the fix (:func:`rosetta.runner.records.disk_error`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import re
import secrets
import shutil
import time
from pathlib import Path

from rosetta.datasets.paths import probe_writable
from rosetta.errors import RosettaError
from rosetta.runner import records, safefile

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
RESULTS_ENV = "ROSETTA_RESULTS_DIR"
#: configuration fields a resumed run must share with the run it resumes
PINNED = ("profile", "dtype", "device", "seed", "threads", "data_dir", "sample_every",
          "bench_profile", "batch_sizes", "precisions", "repeat", "tf32", "backends", "workloads",
          "executor", "oversubscribe", "skip_points", "options", "lanes", "timing")  # fmt: skip
#: what a run made before the sweep axes (or a later pin) existed had, for the pins it lacks
AXIS_DEFAULTS = {"batch_sizes": [None], "precisions": ["fp32"], "repeat": 1, "skip_points": [],
                 "options": {}, "lanes": ["fast"], "timing": None}  # fmt: skip
# ``timing`` (a run's timing-round length) is pinned once a run has rounds beyond the training
# run: a run made before timing rounds existed repeated its training runs, and is not resumed
# into a run of another kind (one line instead)


def pinned_value(config: dict, key: str):
    """``config[key]`` as the pin compares it: the axes as lists (a run made before the axes
    existed had one thread setting and the defaults), the bench profile its spec profile's."""
    if key in AXIS_DEFAULTS:
        value = config.get(key, AXIS_DEFAULTS[key])
    elif key == "bench_profile":
        value = config.get(key, config.get("profile"))
    else:
        value = config.get(key)
    if key == "threads" and not isinstance(value, list):
        value = [value]
    return list(value) if isinstance(value, tuple) else value


def default_results_dir() -> Path:
    """``$ROSETTA_RESULTS_DIR``, else ``./results`` of the working directory."""
    env = os.environ.get(RESULTS_ENV, "").strip()
    return Path(env).expanduser() if env else Path.cwd() / "results"


def default_report_dir() -> Path:
    """``$ROSETTA_REPORT_DIR``, else ``./report`` of the working directory."""
    env = os.environ.get("ROSETTA_REPORT_DIR", "").strip()
    return Path(env).expanduser() if env else Path.cwd() / "report"


def check_run_id(run_id: str) -> str:
    """A run id is a plain folder name: letters, digits, ``._-``; never a path."""
    if not RUN_ID.match(run_id) or run_id in (".", ".."):
        raise RosettaError(
            f"run id {run_id!r} is not a plain name (letters, digits, '.', '_', '-'; "
            f"no '/' or '..'); pick another --run-id"
        )
    return run_id


def check_results_dir(path: Path) -> Path:
    """Prove ``path`` usable before anything runs, creating nothing: an existing folder must be
    writable, a missing one must be creatable (its nearest existing parent a writable folder)."""
    path = Path(path).absolute()
    fix = f"choose a writable folder with --results-dir or ${RESULTS_ENV}"
    from rosetta.runner.guards import check_no_loop

    check_no_loop(path, "results directory", fix)
    if path.exists() and not path.is_dir():
        raise RosettaError(f"results directory {path} is a file, not a folder; {fix}")
    probe_dir = path
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise RosettaError(f"results directory {path} cannot be created under a file; {fix}")
    try:
        probe_writable(probe_dir)
    except OSError as exc:
        raise RosettaError(
            f"results directory {path} is not usable ({exc.strerror or exc}); {fix}"
        ) from None
    return path


def new_run_id() -> str:
    """A time-stamped id with a random suffix: two runs started in the same second differ."""
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4)


class RunDir:
    """An opened, locked run folder. Use as a context manager; the lock goes with it."""

    def __init__(self, results_dir: Path, run_id: str, config: dict, *, create: bool):
        self.run_id = check_run_id(run_id)
        self.path = Path(results_dir) / run_id
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.mkdir(exist_ok=False)
            except FileExistsError:
                raise RosettaError(
                    f"run {run_id!r} already exists in {results_dir}; resume it with "
                    f"--resume {run_id} or pick another --run-id"
                ) from None
            except OSError as exc:
                raise records.disk_error(self.path, exc) from None
        elif not self.path.is_dir():
            runs = sorted(p.name for p in Path(results_dir).iterdir() if p.is_dir())
            raise RosettaError(
                f"no run {run_id!r} in {results_dir} to resume; runs there: "
                f"{', '.join(runs[-5:]) or 'none'}"
            )
        try:
            self._lock_fh = open(self.path / ".lock", "a+")  # noqa: SIM115 - held for the run
        except OSError as exc:
            raise records.disk_error(self.path / ".lock", exc) from None
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.seek(0)
            holder = self._lock_fh.read().strip() or "another process"
            self._lock_fh.close()
            raise RosettaError(
                f"run {run_id!r} is in use by another rosetta bench ({holder}); wait for it "
                f"or use another --run-id"
            ) from None
        try:
            self._lock_fh.seek(0)
            self._lock_fh.truncate()
            self._lock_fh.write(f"pid {os.getpid()}")
            self._lock_fh.flush()
        except OSError as exc:
            self.close()
            raise records.disk_error(self.path / ".lock", exc) from None
        self.config = self._pin(config)

    def _pin(self, config: dict) -> dict:
        path = self.path / "run.json"
        if path.exists():
            try:
                stored = records.loads_strict(safefile.read_text(path, records.MAX_RECORD_BYTES))
            except (OSError, ValueError) as exc:  # a device, a FIFO, oversize, not JSON
                raise RosettaError(f"{path}: unreadable ({exc}); move the run aside") from None
            if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
                raise RosettaError(
                    f"{path}: not a run file (no configuration object); restore it or move the "
                    f"run aside and start a new one"
                )
            old = stored["config"]
            for key in PINNED:
                was, now = pinned_value(old, key), pinned_value(config, key)
                if was != now:
                    raise RosettaError(
                        f"run {self.run_id!r} was made with {key}={was!r}, not "
                        f"{now!r}; resume it with the same settings or start a new run"
                    )
            return stored
        stored = {
            "schema_version": records.SCHEMA_VERSION,
            "run_id": self.run_id,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "config": config,
        }
        records.atomic_write_text(path, records.dumps(stored), replace=False)
        return stored

    def add_to_run_file(self, **fields) -> None:
        """Add facts to ``run.json`` (e.g. the peak probe) without touching its config."""
        self.config.update(fields)
        records.atomic_write_text(self.path / "run.json", records.dumps(self.config), replace=True)

    def round_orders(self, made: list[list[str]]) -> list[list[str]]:
        """The run's cell order, round by round: ``run.json``'s ``round_orders`` checked against
        ``made`` (the orders this run's pinned settings give), or ``made``, stored, for a run that
        has none yet. A stored order that is not a list of rounds of cell keys, or whose rounds do
        not hold exactly this run's cells (one removed, one unknown, one twice), is one line:
        every cell of the run must run, and none that is not one of its cells."""
        if "round_orders" not in self.config:
            self.add_to_run_file(round_orders=made)
            return made
        stored = self.config["round_orders"]
        where = f"{self.path / 'run.json'}: round_orders"
        fix = "restore run.json (or delete its round_orders to draw the order again)"
        if not isinstance(stored, list) or not all(
            isinstance(o, list) and all(isinstance(k, str) for k in o) for o in stored
        ):
            raise RosettaError(f"{where} is not a list of rounds of cell names; {fix}")
        if len(stored) != len(made):
            raise RosettaError(
                f"{where} has {len(stored)} round(s), this run has {len(made)}; {fix}"
            )
        for r, (have, want) in enumerate(zip(stored, made, strict=True)):
            missing = sorted(set(want) - set(have))
            unknown = sorted(set(have) - set(want))
            twice = sorted(k for k in set(have) if have.count(k) > 1)
            for what, keys in (("lacks", missing), ("names unknown cell", unknown),
                               ("names twice", twice)):  # fmt: skip
                if keys:
                    more = f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""
                    raise RosettaError(f"{where} round {r} {what} {keys[0][:80]!r}{more}; {fix}")
        return stored

    def read_index(self) -> dict[str, dict]:
        """The cells of ``index.json`` as the last bench left them (``{}`` when there is none or
        it cannot be read: then nothing is known about the records' digests)."""
        try:
            text = safefile.read_text(self.path / "index.json", records.MAX_RECORD_BYTES)
            cells = records.loads_strict(text).get("cells")
        except (OSError, ValueError, AttributeError):
            return {}
        if not isinstance(cells, dict):
            return {}
        return {k: v for k, v in cells.items() if isinstance(k, str) and isinstance(v, dict)}

    def write_index(self, cells: dict[str, dict]) -> None:
        """Each cell's status (``{cell: {status, error}}``), replaced atomically."""
        records.atomic_write_text(
            self.path / "index.json",
            records.dumps({"run_id": self.run_id, "cells": cells}),
            replace=True,
        )

    def set_aside(self, path: Path, why: str) -> Path:
        """Move a record (and its notebook) into ``attempts/`` so the cell can run again."""
        dest_dir = self.path / "attempts"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        dest = dest_dir / f"{path.stem}.{why}.{stamp}{path.suffix}"
        try:
            dest_dir.mkdir(exist_ok=True)
            shutil.move(str(path), dest)
            nb = path.with_suffix(".ipynb")
            if nb.exists():
                shutil.move(str(nb), dest.with_suffix(".ipynb"))
        except OSError as exc:
            raise records.disk_error(dest_dir, exc, f"--resume {self.run_id}") from None
        return dest

    def close(self) -> None:
        """Release the lock."""
        if not self._lock_fh.closed:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
