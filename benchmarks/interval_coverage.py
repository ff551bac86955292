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
counts B's medians against an interval for a *rerun's* median from A's rounds alone
(:func:`rerun_interval`), which allows for B's own noise but, like A's, not for a machine change.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

TARGET = 0.90


def coverage(run_a: Path, run_b: Path) -> dict:
    """Per group: A's median and interval, B's median, held or not; per ratio likewise; and the
    two fractions. Groups without an interval across rounds in A are listed as skipped."""
    from rosetta.report import compare, load_tables
    from rosetta.report.stats import ROUNDS

    t = load_tables([run_a, run_b])
    ida, idb = (r.run_id for r in t.runs.runs)
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
        mb = float(b[k]["steady_median"])
        rerun = rerun_interval(ra["round_medians"], len(b[k]["round_medians"]))
        cells.append({"group": list(k), "a": [ra["steady_median"], ra["steady_low"],
                      ra["steady_high"]], "b": mb,
                      "held": bool(ra["steady_low"] <= mb <= ra["steady_high"]),
                      "rerun": list(rerun),
                      "rerun_held": bool(rerun[0] <= mb <= rerun[1])})  # fmt: skip
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
        "medians_held": _fraction(cells),
        "rerun_held": [sum(c["rerun_held"] for c in cells), len(cells)],
        "ratios_held": _fraction(ratios),
        "cells": cells,
        "ratios": ratios,
        "skipped": skipped,
    }


def rerun_interval(round_medians, rounds_b: int) -> tuple[float, float]:
    """The 95% interval for the next run's median of ``rounds_b`` rounds, from A's round medians
    alone (a prediction interval: A's mean is uncertain and B's will be too, so sqrt(1/R_A +
    1/R_B) in place of sqrt(1/R_A)); like A's own interval, blind to a change of the machine
    between the runs."""
    from rosetta.report.stats import t_interval

    mean, _, high = t_interval([math.log(m) for m in round_medians])  # A's own: t sd / sqrt(R_A)
    half = (high - mean) * math.sqrt(1 + len(round_medians) / max(rounds_b, 1))
    return math.exp(mean - half), math.exp(mean + half)


def _fraction(rows: list[dict]) -> list[int]:
    return [sum(r["held"] for r in rows), len(rows)]


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks interval_coverage")
    p.add_argument("run_a", type=Path, help="the run whose intervals are checked")
    p.add_argument("run_b", type=Path, help="the run whose medians they should hold")
    p.add_argument("--out", type=Path, help="write the whole result as JSON here")
    args = p.parse_args(argv)
    from rosetta.errors import RosettaError

    try:
        res = coverage(args.run_a, args.run_b)
    except (RosettaError, ValueError) as exc:
        print(f"interval_coverage: {exc}", file=sys.stderr)
        return 2
    for c in res["cells"]:
        med, lo, hi = (x * 1e3 for x in c["a"])
        mark = "held" if c["held"] else "OUT "
        print(f"{mark} {' / '.join(str(x) for x in c['group'] if x)}: A {med:.4g} ms "
              f"[{lo:.4g}, {hi:.4g}], B {c['b'] * 1e3:.4g} ms")  # fmt: skip
    for s in res["skipped"]:
        print(f"skip {' / '.join(str(x) for x in s['group'] if x)}: {s['why']}")
    held, n = res["medians_held"]
    rh, rn = res["ratios_held"]
    print(
        f"medians: {held} of {n} groups of {res['run_b']} inside {res['run_a']}'s 95% "
        f"intervals ({held / n:.0%})"
        if n
        else "medians: no group with an interval in A"
    )
    if n:
        ph, _ = res["rerun_held"]
        print(f"medians: {ph} of {n} inside A's intervals for a rerun's median ({ph / n:.0%})")
    if rn:
        print(f"ratios to the fastest: {rh} of {rn} inside A's intervals ({rh / rn:.0%})")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1, default=str))
    return 0 if n and held / n >= TARGET else 1
