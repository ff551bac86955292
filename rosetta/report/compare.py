"""Verdicts over groups: every backend against the fastest, and one run against another.

Both read :attr:`rosetta.report.frame.Tables.groups` and the raw steps by round, and apply the
rules of :mod:`rosetta.report.stats`: ratios paired by round with Student's t across rounds,
"no clear difference" unless the interval excludes 1, "too few rounds for an interval" with one
round. Comparing two runs uses
the ratio of ratios to a common backend (so a machine that is uniformly faster changes nothing),
and the machines' own difference is stated separately as one factor.
"""

from __future__ import annotations

import pandas as pd

from rosetta.report.frame import Tables
from rosetta.report.order import backend_order
from rosetta.report.stats import (
    NO_CLEAR,
    TOO_FEW,
    TOO_FEW_ROUNDS,
    Estimate,
    Ratio,
    machine_factor,
    noise_matters,
    paired_ratio,
    passed,
    ratio_of_ratios,
)

RATIO_COLUMNS = ["run_id", "workload", "backend", "batch_size", "precision", "threads", "point",
                 "machine", "fastest", "ratio", "low", "high", "verdict", "clear", "equivalent",
                 "method", "rounds", "stability", "noisy"]  # fmt: skip
POINT = ["batch_size", "precision", "threads"]


def _estimate(g: pd.Series) -> Estimate | None:
    med = g.get("steady_median")
    if g["status"] != "ok" or med is None or pd.isna(med) or med <= 0:
        return None
    return Estimate(
        float(med),
        float(g["steady_low"]),
        float(g["steady_high"]),
        str(g["method"]),
        tuple(g["round_medians"]),
        float(g["spread"]),
    )


def _by_point(groups: pd.DataFrame, keys: list[str]):
    """Group rows by ``keys`` + the point, NaN-safe, in the frame's order."""
    return groups.astype({k: object for k in POINT}).groupby(
        [*keys, *POINT], sort=False, dropna=False
    )


def ratios_to_fastest(t: Tables, groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run, workload, point and machine, every timed backend against the fastest (by median).

    Groups are already split by machine where a run spans several (:mod:`rosetta.report.groups`),
    so a ratio only ever pairs rounds that ran on the same machine.

    The fastest is chosen among groups that passed the gate (among all timed ones only if none
    did). Columns: :data:`RATIO_COLUMNS`; the fastest's verdict names who is within the noise,
    ``noisy`` says whether the group's noise could change a verdict."""
    groups = t.groups if groups is None else groups
    key = ("ratios_to_fastest", tuple(groups.index))
    if key not in t.cache:  # several sections read it: computed once per page
        t.cache[key] = _ratios_to_fastest(t, groups)
    return t.cache[key].copy()


def _ratios_to_fastest(t: Tables, groups: pd.DataFrame) -> pd.DataFrame:
    out = []
    ok = groups[groups["status"] == "ok"]
    for _, g in _by_point(ok, ["run_id", "workload", "machine"]):
        timed = [(c, e) for _, c in g.iterrows() if (e := _estimate(c)) is not None]
        if not timed:
            continue
        pool = [x for x in timed if passed(x[0]["equivalent"])] or timed
        best_c, best_e = min(pool, key=lambda x: x[1].median)
        best_rounds = t.rounds(best_c["steady_cells"])
        medians = {c["backend"]: e.median for c, e in timed}
        rows = []
        for c, e in timed:
            if c["backend"] == best_c["backend"]:
                continue
            rows.append((c, e, paired_ratio(t.rounds(c["steady_cells"]), best_rounds, e, best_e)))
        ties = [
            c["backend"] + ("" if passed(c["equivalent"]) else " (not equivalent)")
            for c, _, r in rows
            if not r.clear and r.method != TOO_FEW_ROUNDS
        ]
        verdict = "fastest" + (f"; {NO_CLEAR} from {', '.join(ties)}" if ties else "")
        if any(r.method == TOO_FEW_ROUNDS for _, _, r in rows):
            verdict += f"; {TOO_FEW}"  # the lowest median, no verdict on it
        same = Ratio(1.0, 1.0, 1.0, False, best_e.method, best_e.round_medians)
        out.append(_row(best_c, best_c, best_e, same, verdict, medians))
        for c, e, r in sorted(rows, key=lambda x: x[2].ratio):
            out.append(_row(c, best_c, e, r, r.verdict, medians))
    return pd.DataFrame(out, columns=RATIO_COLUMNS)


def _row(c: pd.Series, best: pd.Series, e: Estimate, r: Ratio, verdict: str, medians) -> dict:
    others = [m for b, m in medians.items() if b != c["backend"]]
    return {
        **{k: c[k] for k in ["run_id", "workload", "backend", *POINT, "point", "equivalent"]},
        "machine": c.get("machine", ""),
        "fastest": best["backend"],
        "ratio": r.ratio,
        "low": r.low,
        "high": r.high,
        "verdict": verdict,
        "clear": r.clear,
        "method": r.method,
        "rounds": e.rounds,
        "stability": r.stability if c["backend"] != best["backend"] else "",
        "noisy": noise_matters(e.spread, e.median, others),
    }


COMPARE_COLUMNS = ["workload", "machine", "backend", "point", "common", "base_median",
                   "other_median", "ratio", "low", "high", "changed", "verdict", "e2e_ratio",
                   "equivalent_base", "equivalent_other"]  # fmt: skip


def compare_runs(t: Tables, base: str, other: str) -> tuple[pd.DataFrame, tuple | None]:
    """Each group timed in both runs, as a ratio of ratios to a common backend, and the machines'
    factor ``(k, lowest, highest)`` (None when no group was timed in both).

    The common backend of a workload and point is the first backend (registry order: the
    reference first) that passed the gate in both runs (any timed one if none did); its own row
    shows its plain ``other / base`` ratio and no verdict. ``changed`` is True only where the
    ratio of ratios' interval excludes 1. Groups keyed by machine (a run spanning several) are
    compared machine by machine: the same hostname in both runs. End-to-end times are one
    measurement per round, so their ratio is shown without an interval and never flagged."""
    ok = t.groups[(t.groups["status"] == "ok") & t.groups["steady_median"].notna()]
    out, pairs = [], []
    sel = ok[ok["run_id"].isin([base, other])]
    for (workload, machine, *_point), g in _by_point(sel, ["workload", "machine"]):
        a = {c["backend"]: c for _, c in g[g["run_id"] == base].iterrows()}
        b = {c["backend"]: c for _, c in g[g["run_id"] == other].iterrows()}
        both = backend_order(k for k in b if k in a)
        if not both:
            continue
        good = [k for k in both if passed(a[k]["equivalent"]) and passed(b[k]["equivalent"])]
        common = (good or both)[0]
        for k in both:
            ca, cb = a[k], b[k]
            pairs.append((ca["steady_median"], cb["steady_median"]))
            row = {
                "workload": workload,
                "machine": machine,
                "backend": k,
                "point": cb["point"],
                "common": common,
                "base_median": ca["steady_median"],
                "other_median": cb["steady_median"],
                "e2e_ratio": _ratio(cb["end_to_end_s"], ca["end_to_end_s"]),
                "equivalent_base": ca["equivalent"],
                "equivalent_other": cb["equivalent"],
            }
            if k == common:
                r = cb["steady_median"] / ca["steady_median"]
                row.update(ratio=r, low=None, high=None, changed=False, verdict="common backend")
            else:
                rr = ratio_of_ratios(
                    t.rounds(ca["steady_cells"]),
                    t.rounds(a[common]["steady_cells"]),
                    t.rounds(cb["steady_cells"]),
                    t.rounds(b[common]["steady_cells"]),
                )
                if rr is None:
                    continue
                row.update(
                    ratio=rr.ratio, low=rr.low, high=rr.high, changed=rr.clear, verdict=rr.verdict
                )
            out.append(row)
    return pd.DataFrame(out, columns=COMPARE_COLUMNS), machine_factor(pairs)


def _ratio(a: object, b: object) -> float | None:
    ok = all(isinstance(v, int | float) and not pd.isna(v) and v > 0 for v in (a, b))
    return float(a) / float(b) if ok else None
