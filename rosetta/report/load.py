"""Read runs from disk, defensively: every unreadable thing becomes one line, never a traceback.

A run is a folder ``results/<run-id>/`` holding one JSON record per cell
(``<backend>__<workload>.json``), an optional ``run.json`` (when, how, the machine's peak
GFLOP/s) and the executed notebooks. This module only reads: it knows nothing of pandas, so
``rosetta list`` and the runner never pay for the report's imports.

Bad input is reported, not fatal, wherever the rest can still be shown: a truncated record, a
record of an unknown schema version, a run id that does not exist, a run folder with no records
each give one line in ``Runs.problems`` (printed by the CLI and shown in the report). Only when
nothing at all can be read does :func:`load_runs` raise a :class:`RosettaError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from rosetta.errors import RosettaError
from rosetta.runner import safefile
from rosetta.runner.records import (
    MAX_RECORD_BYTES,
    MIGRATES,
    SCHEMA_VERSION,
    data_changes,
    loads_strict,
    migrate,
    record_problem,
)

# Schema 1 (the first runner) is a subset of 2: no notebook, load, flags or run.json; 2 held no
# spec facts, cold-start parts or flag codes (records.migrate derives them).
KNOWN_SCHEMAS = (*MIGRATES, SCHEMA_VERSION)  # older ones through records.migrate
STATUSES = ("ok", "failed", "timeout", "killed", "skipped", "interrupted")
UNREADABLE = "unreadable"  # the report's own status for a record file it could not read


@dataclass(frozen=True)
class Run:
    """One run as read from disk: its id, folder, ``run.json`` (or {}), and its records."""

    run_id: str
    path: Path
    info: dict
    records: tuple[dict, ...]

    @property
    def peak_gflops(self) -> float | None:
        """The machine's fp32 matmul peak recorded with the run (None if not recorded)."""
        v = self.info.get("peak_gflops")
        return float(v) if isinstance(v, int | float) and v > 0 else None

    @cached_property
    def ceilings(self):
        """The run's measured ceilings (:func:`rosetta.report.ceilings.run_ceilings`)."""
        from rosetta.report.ceilings import run_ceilings

        return run_ceilings(self.info, self.environment)

    @property
    def environment(self) -> dict:
        """The run's environment (``run.json``), else the first record's manifest, else {}."""
        env = self.info.get("environment")
        if isinstance(env, dict) and env:
            return env
        for r in self.records:
            if isinstance(r.get("manifest"), dict):
                return r["manifest"]
        return {}

    @property
    def device(self) -> str:
        """The device the run asked for (``cpu``, ``cuda``, ``auto``), or '' if unknown."""
        cfg = self.info.get("config")
        if isinstance(cfg, dict) and cfg.get("device"):
            return str(cfg["device"])
        devices = {str(_get(r, "config", "device") or "") for r in self.records} - {""}
        return devices.pop() if len(devices) == 1 else ""


@dataclass(frozen=True)
class Runs:
    """Everything that was read, plus one line per thing that could not be."""

    runs: tuple[Run, ...]
    problems: tuple[str, ...] = field(default=())


def find_runs(results_dir: Path, run_ids: list[str] | None) -> tuple[list[Path], list[str]]:
    """The run folders to report: the named ones, else the newest run in ``results_dir``.

    Returns (folders found, one-line problems for the names that are not runs). Raises
    ``RosettaError`` if ``results_dir`` has no runs at all or none of the names exist."""
    results_dir = Path(results_dir)
    existing = []
    if results_dir.is_dir():
        existing = sorted(p for p in results_dir.iterdir() if _is_run(p))
    if not run_ids:
        if not existing:
            raise RosettaError(
                f"no runs in {results_dir} (it is empty or missing): run `rosetta bench` first"
            )
        newest = max(existing, key=_run_time)
        return [newest], []
    found, problems = [], []
    for rid in run_ids:
        p = Path(rid)  # a run id, or a path to a run folder
        cand = p if p.is_absolute() or len(p.parts) > 1 else results_dir / rid
        if cand.is_dir():
            found.append(cand)
        else:
            valid = ", ".join(x.name for x in existing[-5:]) or "none"
            problems.append(f"run {rid!r} does not exist in {results_dir} (latest: {valid})")
    if not found:
        raise RosettaError("; ".join(problems))
    return found, problems


def load_runs(run_dirs: list[Path], progress=None) -> Runs:
    """Read every run folder; raise ``RosettaError`` only if not one record could be read.

    Each run is named after its folder (never after the ``run_id`` written inside it: a copied
    run keeps the id of its original); where two folders share a name (``a/r4`` and ``b/r4``),
    the later ones are named with their parent folder too (``b-r4``)."""
    runs, problems = [], []
    names = run_names([Path(d) for d in run_dirs])
    for d, name in zip(run_dirs, names, strict=True):
        run, probs = load_run(Path(d), name=name, progress=progress)
        problems.extend(probs)
        if run is not None:
            runs.append(run)
    if not any(r["status"] != UNREADABLE for run in runs for r in run.records):
        detail = "; ".join(problems) or "no records"
        raise RosettaError(f"nothing to report: {detail}")
    return Runs(tuple(runs), tuple(problems))


def run_names(run_dirs: list[Path]) -> list[str]:
    """Each run folder's name (resolved: ``results/..`` is named after what it is), made unique
    in the list by its parent folder's name, then by a number."""
    out: list[str] = []
    for d in run_dirs:
        path = Path(d).resolve()
        name = path.name or "run"
        if name in out:
            name = f"{path.parent.name}-{path.name}"
        base, n = name, 2
        while name in out:
            name, n = f"{base}-{n}", n + 1
        out.append(name)
    return out


PROGRESS_EVERY = 1000  # records read between two progress calls


def load_run(run_dir: Path, name: str | None = None, progress=None) -> tuple[Run | None, list[str]]:
    """One run folder: (the run or None if it is not a folder, one line per problem). The run
    is named ``name`` (default: the folder's name); ``progress(read, total)`` is called every
    ``PROGRESS_EVERY`` records. Records are kept with their long series (step times, losses)
    as compact arrays."""
    if not run_dir.is_dir():
        return None, [f"{run_dir}: not a run folder (does not exist)"]
    problems: list[str] = []
    info: dict = {}
    run_file = run_dir / "run.json"
    if run_file.exists():
        info, err = read_json(run_file)
        if err:
            problems.append(f"{run_file}: {err}; the run's peak GFLOP/s and settings are unknown")
            info = {}
    recs = []
    paths = sorted(run_dir.glob("*__*.json"))
    for i, p in enumerate(paths, 1):
        rec, err = read_record(p)
        if err:
            problems.append(f"{p}: {err}; cell left out")
            rec = unreadable_record(p, err)
        recs.append(compact(rec))
        if progress is not None and i % PROGRESS_EVERY == 0:
            progress(run_dir, i, len(paths))
    if not any(r["status"] != UNREADABLE for r in recs):
        problems.append(f"{run_dir}: no readable records in this run folder")
    problems.extend(f"{run_dir}: {line}" for line in data_changes(recs))
    run_id = name or run_dir.resolve().name  # the folder, never the id written inside it
    return Run(run_id, run_dir, info, tuple(recs)), problems


SERIES = (("clocks", "steady_raw_s"), ("metrics", "losses"))  # the long lists of a record


def compact(rec: dict) -> dict:
    """``rec`` with its long series (every raw step time, every loss) as float arrays (their
    numbers only): a tenth of the memory of a list of Python floats, for runs of 10,000
    records. Everything else is left as read."""
    import numpy as np

    for outer, key in SERIES:
        part = rec.get(outer)
        if isinstance(part, dict) and isinstance(part.get(key), list):
            vals = [x for x in part[key] if isinstance(x, int | float) and not isinstance(x, bool)]
            rec[outer] = {**part, key: np.asarray(vals, dtype=float)}
    return rec


def unreadable_record(path: Path, reason: str) -> dict:
    """A stand-in for a record that could not be read, so its cell still shows (as
    ``unreadable``, with the reason); backend and workload come from the file name."""
    backend, _, workload = path.stem.partition("__")
    return {
        "schema_version": None,
        "backend": backend,
        "workload": workload,
        "status": UNREADABLE,
        "error": f"{path.name}: {reason}",
    }


def read_json(path: Path) -> tuple[dict, str]:
    """(object, '') or ({}, one-line reason): a truncated file, invalid JSON, not an object,
    not a regular file (read through :mod:`rosetta.runner.safefile`: no device or FIFO is read)."""
    try:
        text = safefile.read_text(path, MAX_RECORD_BYTES)
    except safefile.NotARegularFile as exc:  # a device, a FIFO: never read, never waited on
        return {}, f"{exc}, not a record"
    except OSError as exc:
        return {}, f"unreadable ({exc.strerror or exc})"
    except UnicodeDecodeError as exc:
        return {}, f"not UTF-8 text (byte {exc.start})"
    if not text.strip():
        return {}, "empty file (truncated record?)"
    try:
        obj = loads_strict(text)
    except json.JSONDecodeError as exc:
        where = "truncated" if exc.pos >= len(text.rstrip()) - 1 else "invalid JSON"
        return {}, f"{where} ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except ValueError as exc:  # NaN/Infinity, nesting past the recursion limit
        return {}, f"invalid JSON ({exc})"
    if not isinstance(obj, dict):
        return {}, f"not a JSON object but {type(obj).__name__}"
    return obj, ""


def read_record(path: Path) -> tuple[dict, str]:
    """A cell record with its required fields checked, or ({}, one-line reason)."""
    rec, err = read_json(path)
    if err:
        return {}, err
    version = rec.get("schema_version")
    if version not in KNOWN_SCHEMAS:
        return {}, (
            f"schema_version {version!r} is not one this report reads "
            f"({', '.join(map(str, KNOWN_SCHEMAS))}); update rosetta"
        )
    missing = [k for k in ("backend", "workload", "status") if not isinstance(rec.get(k), str)]
    if missing:
        return {}, f"record lacks {', '.join(missing)}"
    rec = migrate(rec)  # an older record in the current schema: the one place it is read apart
    problem = record_problem(rec)
    if problem:
        return {}, problem
    return rec, ""


def _get(d: object, *keys: str) -> object:
    """``d[k1][k2]...`` or None where any level is missing or not a dict."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _is_run(path: Path) -> bool:
    """A folder that holds a run.json or at least one cell record."""
    return path.is_dir() and ((path / "run.json").exists() or any(path.glob("*__*.json")))


def _run_time(path: Path) -> float:
    """When a run was made: run.json's mtime, else the folder's."""
    f = path / "run.json"
    return (f if f.exists() else path).stat().st_mtime
