"""Refresh the shipped reference fractions (``rosetta/report/reference_fractions.json``) from one
or more runs of one machine: per (workload, backend, precision, batch), the median over rounds
(of every run that has it) of the fraction of its run's *measured* ceiling its ok, equivalent
CPU cells reached. Several runs fill one matrix between them (e.g. a smoke run of some backends
and a shorter run of the others); runs of different kinds of machine are refused. The machine is
named by its kind (``references.machine_name``: CPU model name, family, widest ISA flags; the
measured FLOP per cycle is stored beside it); an entry of the same kind is replaced, another
kind's kept. ``--family N`` supplies the CPU family of runs made before it was recorded. A run
whose ceiling is the matmul probe (no compiler) is refused: its fractions would not travel.

    python -m benchmarks reference_fractions RUN_DIR [RUN_DIR ...] [--placeholder] [--note TEXT]
        [--family N]

``--placeholder`` marks the entry as not a reference yet (e.g. a ci run on a loaded machine);
the load averages the run recorded are stored with it either way.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from rosetta.report import load_tables
from rosetta.report.references import DATA, SCHEMA, machine_name, run_machine


def machine_entry(run_dir: Path, placeholder: bool, note: str) -> dict:
    """The reference entry of one run (module docstring); ``SystemExit`` naming what is wrong.
    Its fractions carry the rounds' values (``values``) for :func:`merge`."""
    t = load_tables([run_dir])
    run = t.runs.runs[0]
    peaks = run.info.get("peaks") if isinstance(run.info.get("peaks"), dict) else {}
    ceil = peaks.get("ceiling") if isinstance(peaks.get("ceiling"), dict) else {}
    if ceil.get("method") != "fma kernel":
        what = ceil.get("method") or "none recorded"
        raise SystemExit(
            f"{run_dir}: its ceiling is not the measured FMA kernel ({what}): its fractions "
            "would not travel"
        )
    ok = t.cells[(t.cells["status"] == "ok") & t.cells["peak_fraction"].notna()]
    ok = ok[[e is True or e == 1 for e in ok["equivalent"]]]
    ok = ok[[str(d).startswith("cpu") or not d for d in ok["device"]]]
    fractions = []
    keys = ["workload", "backend", "precision", "batch_size"]
    for (w, b, p, batch), g in ok.groupby(keys, sort=False):
        fractions.append({"workload": w, "backend": b, "precision": p, "batch": int(batch),
                          "fraction": round(float(statistics.median(g["peak_fraction"])), 4),
                          "rounds": int(len(g)),
                          "values": [float(v) for v in g["peak_fraction"]]})  # fmt: skip
    checks = run.info.get("quiet_checks") or []
    loads = [q.get("load1") for q in checks if isinstance(q, dict)]  # 1-minute, at the start
    cells_load = [  # each cell's 1-minute load average before and after it
        rec["load"][when]["load_avg"][0]
        for rec in run.records
        for when in ("before", "after")
        if isinstance(rec.get("load"), dict)
        and isinstance(rec["load"].get(when), dict)
        and rec["load"][when].get("load_avg")
    ]
    cfg = run.info.get("config") if isinstance(run.info.get("config"), dict) else {}
    return {
        **run_machine(run),
        "cores": ceil.get("threads"),
        "ceiling_fp32_gflops": (ceil.get("fp32") or {}).get("gflops"),
        "ceiling_bf16_gflops": (ceil.get("bf16") or {}).get("gflops"),
        "bandwidth_gbs": (ceil.get("bandwidth") or {}).get("gbs"),
        "run": {
            "run_id": run.run_id,
            "created": run.info.get("created"),
            "profile": cfg.get("profile"),
            "executor": cfg.get("executor"),
            "repeat": cfg.get("repeat"),
            "load1_at_start": loads,
            "cell_load1_range": [min(cells_load), max(cells_load)] if cells_load else [],
            "placeholder": placeholder,
            "note": note,
        },
        "fractions": fractions,
    }


def merge(entries: list[dict]) -> dict:
    """One machine's entry from the entries of several of its runs: each (workload, backend,
    precision, batch) the median over every run's rounds; the runs' details under ``runs``."""
    names = {machine_name(e) for e in entries}
    if len(names) > 1:
        raise SystemExit(f"the runs are of different machines ({'; '.join(sorted(names))}): "
                         "refresh each machine from its own runs")  # fmt: skip
    pooled: dict[tuple, list[float]] = {}
    for e in entries:
        for f in e["fractions"]:
            key = (f["workload"], f["backend"], f["precision"], f["batch"])
            pooled.setdefault(key, []).extend(f["values"])
    first = entries[0]
    runs = [e["run"] for e in entries]
    return {
        **{k: v for k, v in first.items() if k not in ("run", "fractions")},
        "run": {  # references.py reads ``placeholder``; the rest is for a reader
            "placeholder": any(r["placeholder"] for r in runs),
            "note": first["run"]["note"],
            "runs": [
                {k: v for k, v in r.items() if k not in ("placeholder", "note")} for r in runs
            ],
        },
        "fractions": [
            {
                "workload": w,
                "backend": b,
                "precision": p,
                "batch": batch,
                "fraction": round(float(statistics.median(v)), 4),
                "rounds": len(v),
            }
            for (w, b, p, batch), v in pooled.items()
        ],  # fmt: skip
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks reference_fractions")
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--placeholder", action="store_true")
    ap.add_argument("--note", default="")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--family", type=int, default=None,
                    help="the CPU family of runs made before it was recorded (AMD: 25 is Zen 3 "
                    "and Zen 4, 26 Zen 5); a run that records another is refused")  # fmt: skip
    args = ap.parse_args(argv)
    entries = [machine_entry(d, args.placeholder, args.note) for d in args.run_dirs]
    if args.family is not None:
        for d, e in zip(args.run_dirs, entries, strict=True):
            if e.get("family", args.family) != args.family:
                raise SystemExit(f"{d}: records CPU family {e['family']}, not {args.family}")
            e["family"] = args.family
    entry = merge(entries)
    doc = json.loads(args.data.read_text()) if args.data.exists() else {}
    if doc.get("schema") != SCHEMA:
        doc = {"schema": SCHEMA, "about": doc.get("about", ""), "machines": []}
    name = machine_name(entry)
    old = [m for m in doc.get("machines", []) if machine_name(m) == name]
    if old and "between_runs" in old[0]:  # measured from other runs (benchmarks.interval_coverage)
        entry["between_runs"] = old[0]["between_runs"]
    doc["machines"] = [m for m in doc.get("machines", []) if machine_name(m) != name] + [entry]
    args.data.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{name}: {len(entry['fractions'])} fractions written to {args.data}")
    return 0
