"""Do run A's intervals hold run B? The check of issue 32 item 4 across two real runs.

    python -m benchmarks interval_coverage results/smoke-a results/smoke-b [--out FILE]

Two runs of the same profile, one after the other on the same quiet machine. For every group
(workload, backend, point) timed in both with an interval across rounds in A (method ``rounds``:
Student's t over A's timing rounds), it asks whether B's median step time falls inside A's 95%
interval, and, for every backend's ratio to the fastest, whether B's ratio falls inside A's
ratio interval. It prints one line per group, the two counts, and exits 0 when at least
:data:`TARGET` of the groups' medians are held (1 otherwise, 2 for unusable input).

What to expect of a correct method: A's interval is for the typical median of a process on
that machine; B's median is one more estimate with its own noise, so even an exact 95% interval
holds it somewhat less often than 95% (with five rounds each, about 92% for normal round
effects); a shift of the whole machine between the runs (another load, a frequency change)
lowers the medians' count but not the ratios', which pair rounds within each run. So it also
counts B's medians against the interval for a *rerun's* median
(:func:`rosetta.report.stats.rerun_interval`): from A's rounds alone (B's own noise, no machine
change), and with the machine's run-to-run spread (:mod:`rosetta.report.rerun`): the one the
report states as "a rerun's median", and the count the exit status reads. The spread is the one
shipped for A's machine, or ``--between-sd``; the pair's own estimate of it is printed, and
``--write`` pools it into the machine's entry of ``reference_fractions.json`` (a check of the
shipped spread is out of sample only for a pair that did not make it).

    python -m benchmarks interval_coverage A B [--between-sd S] [--write] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

TARGET = 0.90


def coverage(
    run_a: Path, run_b: Path, between_sd: float | None = None, data: Path | None = None
) -> dict:
    """Per group: A's median and interval, B's median, held or not; the two rerun intervals;
    per ratio likewise; the fractions; and this pair's estimate of the run-to-run spread.
    Groups without an interval across rounds in A are listed as skipped. ``between_sd`` None:
    the spread shipped for A's machine (none: that count is not made)."""
    from rosetta.report import compare, load_tables
    from rosetta.report.references import machine_name, run_machine
    from rosetta.report.rerun import between_run_sd, run_spread
    from rosetta.report.stats import ROUNDS, rerun_interval

    t = load_tables([run_a, run_b])
    ida, idb = (r.run_id for r in t.runs.runs)
    machine = ""
    if between_sd is None:
        shipped, _ = run_spread(t.runs.runs[0], data)
        if shipped is not None:
            between_sd, machine = shipped.sd_log, shipped.text()
    elif not (math.isfinite(between_sd) and 0 <= between_sd < 1):
        raise ValueError(f"--between-sd {between_sd}: give an sd of log step time in [0, 1)")
    else:
        machine = f"sd {between_sd:.3f} of log step time, given"
    g = t.groups[(t.groups["status"] == "ok") & t.groups["steady_median"].notna()]
    key = ["workload", "backend", "point", "machine"]
    a = {tuple(r[k] for k in key): r for _, r in g[g["run_id"] == ida].iterrows()}
    b = {tuple(r[k] for k in key): r for _, r in g[g["run_id"] == idb].iterrows()}
    cells, skipped = [], []
    for k, ra in a.items():
        if k not in b:
            continue
        if ra["method"] != ROUNDS:
            skipped.append({"group": list(k), "why": f"A's interval is {ra['method']!r}"})
            continue
        mb, rb = float(b[k]["steady_median"]), len(b[k]["round_medians"])
        rerun = rerun_interval(ra["round_medians"], rb)
        row = {"group": list(k), "a": [ra["steady_median"], ra["steady_low"], ra["steady_high"]],
               "b": mb, "held": bool(ra["steady_low"] <= mb <= ra["steady_high"]),
               "rounds": [list(ra["round_medians"]), list(b[k]["round_medians"])],
               "rerun": list(rerun), "rerun_held": bool(rerun[0] <= mb <= rerun[1])}  # fmt: skip
        if between_sd is not None:
            lo, hi = rerun_interval(ra["round_medians"], rb, between_sd)
            row.update(machine_rerun=[lo, hi], machine_held=bool(lo <= mb <= hi))
        cells.append(row)
    pairable = [c["rounds"] for c in cells if min(len(c["rounds"][0]), len(c["rounds"][1])) >= 2]
    spread = between_run_sd([pairable]) if pairable else None
    r = compare.ratios_to_fastest(t)
    ratios = []
    rkey = ["workload", "backend", "point", "machine", "fastest"]
    rb = {tuple(x[k] for k in rkey): x for _, x in r[r["run_id"] == idb].iterrows()}
    for _, x in r[r["run_id"] == ida].iterrows():
        k = tuple(x[k] for k in rkey)
        if x["backend"] == x["fastest"] or k not in rb or not _finite(x["low"]):
            continue
        other = float(rb[k]["ratio"])
        ratios.append({"group": list(k), "a": [x["ratio"], x["low"], x["high"]], "b": other,
                       "held": bool(x["low"] <= other <= x["high"])})  # fmt: skip
    return {
        "run_a": ida,
        "run_b": idb,
        "machine_a": machine_name(run_machine(t.runs.runs[0])),
        "machine_a_facts": run_machine(t.runs.runs[0]),
        "medians_held": _fraction(cells),
        "rerun_held": [sum(c["rerun_held"] for c in cells), len(cells)],
        "machine_held": (
            [sum(c["machine_held"] for c in cells), len(cells)] if between_sd is not None else None
        ),
        "between_sd_used": between_sd,
        "between_sd_source": machine,
        "between_sd_of_pair": spread,
        "pair_cells": len(pairable),
        "ratios_held": _fraction(ratios),
        "cells": cells,
        "ratios": ratios,
        "skipped": skipped,
    }


def _fraction(rows: list[dict]) -> list[int]:
    return [sum(r["held"] for r in rows), len(rows)]


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def write_spread(res: dict, data: Path) -> str:
    """Pool this pair's estimate into A's machine entry of the reference file (``between_runs``:
    the method of moments is a mean over cells, so the pooled sd^2 weights each pair by its
    cells); refuse a pair already in it, or a machine without an entry. Returns what it did."""
    from rosetta.report.references import MAX_BYTES, same_kind
    from rosetta.runner import safefile
    from rosetta.userfile import check_target

    sd = res["between_sd_of_pair"]
    if sd is None:
        raise ValueError("the pair shares no cell with 2 rounds in both runs: nothing to write")
    if not _finite(sd) or sd <= 0:
        raise ValueError(f"the pair's spread is {sd}: two copies of one run (or a broken pair) "
                         "measure nothing of the machine; pool only two runs made one after "
                         "the other")  # fmt: skip
    name = res["machine_a"]
    check_target(data, "--data", force=True)  # a regular file, no link, device or FIFO
    try:
        doc = json.loads(safefile.read_bytes(data, MAX_BYTES).decode("utf-8"))
    except (safefile.NotARegularFile, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{data}: not a reference file ({exc})") from None
    machines = doc.get("machines") if isinstance(doc, dict) else None
    if not isinstance(machines, list) or not all(isinstance(m, dict) for m in machines):
        raise ValueError(f"{data}: not a reference file (no list of machines)")
    facts = res.get("machine_a_facts") or {}
    entry = next((m for m in machines if same_kind(facts, m, machines)), None)
    if entry is None:
        raise ValueError(f"{data.name} has no entry for {name}: run benchmarks.reference_fractions "
                         "on this machine's runs first")  # fmt: skip
    old = entry.get("between_runs") or {"sd_log": 0.0, "cells": 0, "pairs": []}
    if not (isinstance(old, dict) and _finite(old.get("sd_log")) and _finite(old.get("cells"))
            and isinstance(old.get("pairs"), list)):  # fmt: skip
        raise ValueError(f"{data}: {name}'s between_runs is malformed; fix or remove it first")
    pair = [res["run_a"], res["run_b"]]
    if pair in old["pairs"]:
        raise ValueError(f"the pair {pair} is already in {name}'s between_runs")
    n_old, n_new = int(old["cells"]), int(res["pair_cells"])
    var = (old["sd_log"] ** 2 * n_old + res["between_sd_of_pair"] ** 2 * n_new) / (n_old + n_new)
    entry["between_runs"] = {
        "sd_log": round(math.sqrt(var), 4),
        "cells": n_old + n_new,
        "pairs": [*old["pairs"], pair],
        "note": "run-to-run sd of log step time (rosetta.report.rerun.between_run_sd), pooled "
        "over pairs of runs made back to back; written by python -m benchmarks interval_coverage "
        "A B --write",
    }
    from rosetta.userfile import write_user_file

    write_user_file(data, (json.dumps(doc, indent=1) + "\n").encode(), "--data", force=True)
    return f"{name}: between_runs sd {entry['between_runs']['sd_log']} over {n_old + n_new} cells"


def main(argv: list[str]) -> int:
    from rosetta.report.references import DATA

    p = argparse.ArgumentParser(prog="python -m benchmarks interval_coverage")
    p.add_argument("run_a", type=Path, help="the run whose intervals are checked")
    p.add_argument("run_b", type=Path, help="the run whose medians they should hold")
    p.add_argument("--between-sd", type=float, help="the run-to-run spread to use (default: "
                   "the one shipped for A's machine)")  # fmt: skip
    p.add_argument("--write", action="store_true", help="pool this pair's spread into the file")
    p.add_argument("--data", type=Path, default=DATA, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="write the whole result as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    args = p.parse_args(argv)
    from rosetta.errors import RosettaError
    from rosetta.userfile import check_target

    try:
        for run in (args.run_a, args.run_b):
            if not run.is_dir():
                raise ValueError(f"{run}: not a run folder (give results/<run-id>)")
        if args.run_a.resolve() == args.run_b.resolve():
            raise ValueError(f"{args.run_a} given as both A and B: compare two runs")
        if args.out:
            check_target(args.out, "--out", args.force)  # before the work, not after it
        res = coverage(args.run_a, args.run_b, args.between_sd, args.data)
    except (RosettaError, ValueError, OSError) as exc:
        print(f"interval_coverage: {exc}", file=sys.stderr)
        return 2
    for c in res["cells"]:
        med, lo, hi = (x * 1e3 for x in c["a"])
        mark = "held" if c.get("machine_held", c["held"]) else "OUT "
        rr = c.get("machine_rerun")
        rerun = f", a rerun [{rr[0] * 1e3:.4g}, {rr[1] * 1e3:.4g}]" if rr else ""
        print(f"{mark} {' / '.join(str(x) for x in c['group'] if x)}: A {med:.4g} ms "
              f"[{lo:.4g}, {hi:.4g}]{rerun}, B {c['b'] * 1e3:.4g} ms")  # fmt: skip
    for s in res["skipped"]:
        print(f"skip {' / '.join(str(x) for x in s['group'] if x)}: {s['why']}")
    held, n = res["medians_held"]
    rh, rn = res["ratios_held"]
    if not n:
        print("medians: no group with an interval in A")
        return 1
    print(f"medians: {held} of {n} groups of {res['run_b']} inside {res['run_a']}'s own 95% "
          f"intervals ({held / n:.0%})")  # fmt: skip
    ph, _ = res["rerun_held"]
    print(f"medians: {ph} of {n} inside A's intervals for a rerun's median from its rounds alone "
          f"({ph / n:.0%})")  # fmt: skip
    if res["machine_held"] is not None:
        mh, _ = res["machine_held"]
        print(f"medians: {mh} of {n} inside A's intervals for a rerun's median with the "
              f"run-to-run spread ({res['between_sd_source']}): {mh / n:.0%}")  # fmt: skip
        held = mh
    else:
        print("no run-to-run spread shipped for A's machine: give --between-sd, or --write one")
    if rn:
        print(f"ratios to the fastest: {rh} of {rn} inside A's intervals ({rh / rn:.0%})")
    if res["between_sd_of_pair"] is not None:
        print(f"this pair's run-to-run spread: sd {res['between_sd_of_pair']:.4f} of log step "
              f"time over {res['pair_cells']} cells")  # fmt: skip
    if args.out:
        from rosetta.userfile import write_user_file

        try:
            write_user_file(args.out, json.dumps(res, indent=1, default=str).encode(), "--out",
                            args.force)  # fmt: skip
        except RosettaError as exc:
            print(f"interval_coverage: {exc}", file=sys.stderr)
            return 2
    if args.write:
        try:
            print(write_spread(res, args.data))
        except (OSError, ValueError, RosettaError) as exc:
            print(f"interval_coverage: --write: {exc}", file=sys.stderr)
            return 2
    return 0 if held / n >= TARGET else 1
