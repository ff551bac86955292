"""Refresh the shipped lowered ÷ hand-written table (``rosetta/report/baselines.json``) from the
records of ``python -m benchmarks lowering_<backend>`` (``benchmarks/out/lowering_*.json``).

    python -m benchmarks baselines [RECORD ...]

Records are read in the order given; where two hold the same backend x workload, the later wins.

Each record was written by the shared frame (``benchmarks/_lowering.py``): it names its backend
and the machine it ran on (CPU model, family, ISA flags). Its backend x workload rows replace
those of the same kind of machine (:func:`rosetta.report.references.same_kind`);
other backends and other machines are kept. Every record must come from one kind of machine; a
record without the frame's facts (an older benchmark's) is refused by name.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.common import OUT_DIR
from rosetta.report.baselines import DATA, SCHEMA
from rosetta.report.references import machine_name, same_kind

ABOUT = (
    "lowered / hand-written step-time ratios (median, bootstrap 95% interval) per backend x "
    "workload and machine kind, with the load and both sides' fraction of the measured ceiling; "
    "read by rosetta.report.baselines. Refresh with: python -m benchmarks baselines"
)
SUFFIX = " lowered/handwritten"


def entries(record: dict) -> list[dict]:
    """The baseline rows of one benchmark record (one per workload)."""
    notes, backend = record["notes"], record["notes"]["backend"]
    out = []
    for row in record["rows"]:
        if not row["name"].endswith(SUFFIX):
            continue  # an alternative's row (a fast-path choice), not a baseline
        workload = row["name"][: -len(SUFFIX)]
        note = notes.get(workload, {})
        out.append({
            "backend": backend, "workload": workload,
            "ratio": round(row["ratio"], 4), "low": round(row["low"], 4),
            "high": round(row["high"], 4), "rounds": row["n"],
            "lowered_ms": round(row["median_a"] * 1e3, 3),
            "handwritten_ms": round(row["median_b"] * 1e3, 3),
            "step": note.get("step"), "batch": note.get("batch"),
            "image_size": note.get("image_size"),
            "load1": (note.get("load_before") or [None])[0],
            "of_ceiling_lowered": _round(note.get("of_ceiling_lowered")),
            "of_ceiling_handwritten": _round(note.get("of_ceiling_handwritten")),
        })  # fmt: skip
    return out


def _round(v: object) -> float | None:
    return round(v, 4) if isinstance(v, float) else None


def merge(doc: dict, machine: dict, rows: list[dict], measured: str) -> dict:
    """``doc`` with ``rows`` in: the same kind of machine's rows of those backend x workloads
    replaced, every other row kept."""
    machines = [m for m in doc.get("machines", []) if isinstance(m, dict)]
    mine = next((m for m in machines if same_kind(machine, m, machines)), None)
    if mine is None:
        mine = {**machine, "baselines": []}
        machines.append(mine)
    new = {(r["backend"], r["workload"]) for r in rows}
    kept = [
        r for r in mine.get("baselines", []) if (r.get("backend"), r.get("workload")) not in new
    ]
    mine.update({**machine, "measured": measured, "baselines": kept + rows})
    return {"schema": SCHEMA, "about": ABOUT, "machines": machines}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks baselines")
    p.add_argument("records", nargs="*", type=Path, help="default: out/lowering_*.json")
    p.add_argument("--out", type=Path, default=DATA, help="the file to refresh")
    args = p.parse_args(argv)
    paths = args.records or sorted(OUT_DIR.glob("lowering_*.json"))
    machine, rows = None, {}  # (backend, workload) -> row: a later record's wins
    for path in paths:
        record = json.loads(path.read_text())
        notes = record.get("notes") or {}
        if not isinstance(notes.get("machine"), dict) or not notes.get("backend"):
            raise SystemExit(f"{path}: not written by benchmarks/_lowering.py (no backend and "
                             "machine in its notes); rerun it with python -m benchmarks "
                             f"{path.stem}")  # fmt: skip
        m = {k: notes["machine"].get(k) for k in ("cpu", "family", "model", "isa", "cores")}
        if machine is not None and not same_kind(m, machine):
            raise SystemExit(
                f"{path}: measured on {machine_name(m)}, the others on "
                f"{machine_name(machine)}: one kind of machine per refresh"
            )
        machine = machine or m
        rows.update({(r["backend"], r["workload"]): r for r in entries(record)})
        print(f"{path.name}: {len(entries(record))} workloads of {notes['backend']}")
    if machine is None:
        raise SystemExit(f"no lowering records in {OUT_DIR}: run python -m benchmarks "
                         "lowering_<backend> first")  # fmt: skip
    doc = json.loads(args.out.read_text()) if args.out.exists() else {}
    measured = time.strftime("%Y-%m-%d", time.gmtime())
    doc = merge(doc, machine, list(rows.values()), measured)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"written: {args.out} ({machine_name(machine)})")
    return 0
