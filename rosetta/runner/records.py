"""Append-only JSON records: one file per cell per run, never overwritten, written atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rosetta.errors import RosettaError

SCHEMA_VERSION = 1


def make_record(*, backend: str, workload: str, profile: str, status: str, **fields) -> dict:
    """A record with the fields every record has; ``fields`` adds clocks, metrics, manifest..."""
    return {
        "schema_version": SCHEMA_VERSION,
        "backend": backend,
        "workload": workload,
        "profile": profile,
        "status": status,  # ok | failed | timeout | skipped | interrupted
        **fields,
    }


def record_path(results_dir: Path, run_id: str, backend: str, workload: str) -> Path:
    """Where the record of one cell of one run lives."""
    return results_dir / run_id / f"{backend}__{workload}.json"


def write_record(path: Path, record: dict) -> Path:
    """Write ``record`` to ``path`` atomically; refuses to replace an existing record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise RosettaError(
            f"{path}: a record already exists; records are append-only (new --run-id)"
        )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    tmp.write_text(json.dumps(record, indent=1, allow_nan=True))
    try:
        os.link(tmp, path)  # fails if another writer got there first: no record is ever replaced
    except FileExistsError:
        raise RosettaError(f"{path}: a record already exists; records are append-only") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_records(run_dir: Path) -> list[dict]:
    """Every record of one run, sorted by (workload, backend); unreadable files are reported."""
    out = []
    for p in sorted(run_dir.glob("*.json")):
        try:
            rec = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise RosettaError(f"{p}: unreadable record ({exc}); move it aside") from None
        if rec.get("schema_version") != SCHEMA_VERSION:
            raise RosettaError(
                f"{p}: schema_version {rec.get('schema_version')}, expected {SCHEMA_VERSION}"
            )
        out.append(rec)
    return sorted(out, key=lambda r: (r["workload"], r["backend"]))
