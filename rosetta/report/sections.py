"""The report's sections after the headline tables, as plain values, numbers already formatted.

Each function reads the frames of :mod:`rosetta.report.frame` and returns frozen dataclasses or
lists of dicts; the Jinja2 template only lays them out. Tests assert on these values and on the
HTML they become. A missing value is always shown as ``-``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from rosetta.report.compare import compare_runs, ratios_to_fastest
from rosetta.report.fmt import DASH, fmt_interval, fmt_ms, fmt_num, fmt_pct, fmt_s, missing
from rosetta.report.frame import CHECKS, Tables, notebook_exists
from rosetta.report.groups import machines, multi_machine
from rosetta.report.order import backend_order, workload_key, workload_order
from rosetta.report.rerun import run_spread
from rosetta.report.stats import ROUNDS, TOO_FEW_ROUNDS, passed, robust_spread


# -- per-workload timing tables ----------------------------------------------------------------
def ratio_rows(t: Tables) -> list[dict]:
    """Ratio to the fastest backend per run, workload and point, paired by round, with its
    interval, verdict, stability (rounds it held in) and whether its noise could change it."""
    r = ratios_to_fastest(t)
    g = t.groups.set_index(["run_id", "workload", "backend", "point", "machine"])
    points = t.groups.groupby(["run_id", "workload"])["point"].nunique()
    out = []
    for _, x in r.iterrows():
        c = g.loc[(x["run_id"], x["workload"], x["backend"], x["point"], x["machine"])]
        several = points[(x["run_id"], x["workload"])] > 1
        where = f" on {x['machine']}" if x["machine"] else ""
        out.append(
            {
                "run_id": x["run_id"],
                "workload": x["workload"] + (f" ({x['point']})" if several else "") + where,
                "backend": x["backend"],
                "step_ms": fmt_interval(c["steady_median"], c["steady_low"], c["steady_high"]),
                "rerun_ms": _rerun_ms(c),
                "rounds": str(int(x["rounds"])),
                "ratio": fmt_interval(x["ratio"], x["low"], x["high"], lambda v: f"{v:.2f}"),
                "verdict": x["verdict"],
                "stability": x["stability"] or DASH,
                "too_few": x["method"] == TOO_FEW_ROUNDS,
                "fastest": x["backend"] == x["fastest"],
                "clear": bool(x["clear"]) and x["backend"] != x["fastest"],
                "noisy": bool(x["noisy"]),
                "equivalent": passed(x["equivalent"]),
            }
        )
    return out


def _rerun_ms(c) -> str:
    """``"[12.1, 14.9]"`` ms: the group's interval for another run's median, or a dash."""
    lo, hi = c.get("rerun_low"), c.get("rerun_high")
    if missing(lo) or missing(hi):
        return DASH
    return f"[{fmt_ms(lo)}, {fmt_ms(hi)}]"


def rerun_lines(t: Tables) -> list[str]:
    """Per run with timing rounds: the run-to-run spread its rerun intervals use, or why it has
    none (:mod:`rosetta.report.rerun`)."""
    out = []
    for run in t.runs.runs:
        mine = t.groups[(t.groups["run_id"] == run.run_id) & (t.groups["method"] == ROUNDS)]
        if mine.empty:
            continue
        spread, problems = run_spread(run)
        if spread is not None:
            out.append(
                f"{run.run_id}: a rerun's interval uses the run-to-run spread {spread.text()}."
            )
        else:
            why = "; ".join(problems) or "none is shipped for this machine"
            out.append(
                f"{run.run_id}: no rerun interval ({why}): its intervals cover its own processes "
                "only. Measure the spread with python -m benchmarks interval_coverage A B --write."
            )
    return out


def cold_rows(t: Tables) -> list[dict]:
    """Cold start (import, build, first step) beside the steady-state step and end to end."""
    ok = t.cells[t.cells["status"] == "ok"]
    return [
        {
            "run_id": c["run_id"],
            "workload": c["workload"],
            "backend": _name(c),
            "import": fmt_s(c["import_s"]),
            "build": fmt_s(c["build_s"]),
            "first": fmt_s(c["first_step_s"]),
            "cold": fmt_s(c["cold_start_s"]),
            "steady": fmt_interval(c["steady_median"], c["steady_low"], c["steady_high"]),
            "e2e": fmt_s(c["end_to_end_s"]),
            "equivalent": passed(c["equivalent"]),
        }
        for _, c in _sorted(ok).iterrows()
    ]


def efficiency_rows(t: Tables) -> list[dict]:
    """Samples/s, achieved GFLOP/s (spec FLOPs; training = 3x forward), its share of the run's
    measured ceiling (explained beside it above 100%), and the reference fractions other
    machines reached with the verdict against them (:mod:`rosetta.report.ceilings`)."""
    ok = t.cells[t.cells["status"] == "ok"]
    out = []
    for _, c in _sorted(ok).iterrows():
        st = c["standing"] if not missing(c["standing"]) else None
        ceil = st.ceiling if st is not None else None
        ref = st.reference if st is not None else None
        out.append(
            {
                "run_id": c["run_id"],
                "workload": c["workload"],
                "backend": _name(c),
                "throughput": fmt_num(c["throughput"], ".4g"),
                "flops": fmt_num(
                    None if missing(c["flops_per_sample"]) else c["flops_per_sample"] / 1e9,
                    ".3g",
                ),
                "factor": "3 (fwd + bwd)" if c["task"] == "train" else "1 (fwd)",
                "gflops": fmt_num(c["gflops"], ".3g"),
                "peak": fmt_pct(c["peak_fraction"]),
                "ceiling": DASH if ceil is None else f"{ceil.gflops:.0f} {ceil.short}",
                "above": st.above if st is not None else "",
                "reference": ref.span() if ref is not None else DASH,
                "verdict": (st.verdict if st is not None else "") or DASH,
                "far_below": st is not None and st.verdict == "far below",
                "equivalent": passed(c["equivalent"]),
            }
        )
    return out


def ceiling_lines(t: Tables) -> list[str]:
    """Once per run, above the efficiency table: what its ceilings are (and why a probe stands
    in); then the reference machines the fractions came from."""
    from rosetta.report import references

    out = []
    for run in t.runs.runs:
        bits = [
            f"{c.gflops:.0f} GFLOP/s {c.label}" + (f" ({c.note})" if c.note else "")
            for c in run.ceilings.compute
        ]
        if run.ceilings.bandwidth_gbs:
            bits.append(f"memory {run.ceilings.bandwidth_gbs:.0f} GB/s")
        out.append(f"{run.run_id}: " + ("; ".join(bits) or "no ceiling recorded"))
        m = run.ceilings.machine
        if m:
            measured = references.measured_text(m)
            name = references.machine_name(m) + (f", {measured}" if measured else "")
            if not references.has_reference(m):
                out.append(f"{run.run_id} ran on {name}: {references.NO_MACHINE}")
            else:
                out.append(f"{run.run_id} ran on {name}")
    names = references.machines()
    if names:
        out.append("reference fractions from: " + "; ".join(names))
    return out


def equivalence_rows(t: Tables) -> list[dict]:
    """Gate verdict and the largest error relative to its bound, per check, for every cell."""
    out = []
    ran = t.cells[(t.cells["status"] == "ok") | t.cells["equivalent"].notna()]
    for _, c in _sorted(ran).iterrows():
        if missing(c["equivalent"]):
            gate = DASH if c["status"] != "ok" else "not recorded"
        else:
            gate = "pass" if passed(c["equivalent"]) else "NOT EQUIVALENT"
        viol = {k: c[f"violation_{k}"] for k in CHECKS}
        out.append(
            {
                "run_id": c["run_id"],
                "workload": c["workload"],
                "backend": _name(c),
                "status": c["status"],
                "gate": gate,
                "failed": gate == "NOT EQUIVALENT",
                "violations": {k: fmt_num(v) for k, v in viol.items()},
                "over": {k: (not missing(v) and float(v) > 1.0) for k, v in viol.items()},
                "detail": c["divergence"] or c["gate_note"] or DASH,
            }
        )
    return out


def problem_rows(t: Tables) -> list[dict]:
    """Every cell that did not finish (failed, timeout, killed, skipped, interrupted)."""
    bad = t.cells[t.cells["status"] != "ok"]
    return [
        {
            "run_id": c["run_id"],
            "workload": c["workload"],
            "backend": _name(c),
            "status": c["status"],
            "reason": c["error"] or DASH,
        }
        for _, c in _sorted(bad).iterrows()
    ]


def condition_rows(t: Tables) -> list[dict]:
    """Per cell: load average before/after, peak memory, wall time, the robust spread of its
    steps (IQR / median) and the flags. The runner's noise flag is replaced by the report's
    judgement: a cell is marked noisy only where its noise could change a verdict."""
    noisy = noisy_groups(t)
    multi = multi_machine(t.cells)
    out = []
    for _, c in _sorted(t.cells[t.cells["status"] == "ok"]).iterrows():
        steps = t.samples.get(c.name, np.empty(0))
        flags = [text for code, text in c["flag_list"] or () if code != "noisy"]  # by code
        machine = c["machine"] if c["run_id"] in multi else ""
        key = (c["run_id"], c["workload"], c["backend"], c["point"], machine)
        if key in noisy:
            flags.insert(0, "noisy: spread could change a verdict")
        out.append(
            {
                "run_id": c["run_id"],
                "workload": c["workload"],
                "backend": _name(c),
                "load_before": c["load_before"] or DASH,
                "load_after": c["load_after"] or DASH,
                "rss": fmt_num(c["peak_rss_mb"], ".0f"),
                "device_mem": fmt_num(c["peak_device_mb"], ".0f"),
                "wall": fmt_s(c["wall_s"]),
                "spread": fmt_pct(robust_spread(steps)) if steps.size >= 2 else DASH,
                "noisy": key in noisy,
                "flags": "; ".join(flags) or DASH,
            }
        )
    return out


def noisy_groups(t: Tables) -> set[tuple]:
    """(run, workload, backend, point, machine) of every group whose noise could change a
    verdict (machine "" where the run ran on one machine)."""
    r = ratios_to_fastest(t)
    return {
        (x["run_id"], x["workload"], x["backend"], x["point"], x["machine"])
        for _, x in r.iterrows()
        if x["noisy"]
    }


# -- machines (a run spanning several) --------------------------------------------------------
THIS_MACHINE = "this machine"  # records that name no machine (written before they did)


def machine_rows(t: Tables) -> list[dict]:
    """Per run spanning several machines, one row per machine: hostname, CPU, cores, GPU, the
    range of load averages seen (1-minute, before and after its cells), and the cells that ran
    there (backend x workload x point x round) with their steady medians. [] for one machine."""
    out = []
    for run_id in [r for r in dict.fromkeys(t.cells["run_id"]) if r in multi_machine(t.cells)]:
        mine = t.cells[t.cells["run_id"] == run_id]
        for host in machines(t.cells, run_id) + _others(mine, run_id, t):
            here = _sorted(mine[mine["machine"] == host])
            node = next((n for n in here["node"] if n), {})
            out.append(
                {
                    "run_id": run_id,
                    "hostname": host or THIS_MACHINE,
                    "cpu": _plain(node.get("cpu")),
                    "cores": _plain(node.get("cpu_count")),
                    "gpu": _gpu(node.get("gpu")),
                    "load": _load_range(here, node),
                    "cells": [_machine_cell(c) for _, c in here.iterrows()],
                }
            )
    return out


def _others(mine: pd.DataFrame, run_id: str, t: Tables) -> list[str]:
    """Machines that only ran cells that did not finish."""
    ok = set(machines(t.cells, run_id))
    return [m for m in dict.fromkeys(str(x) for x in mine["machine"]) if m not in ok]


def _machine_cell(c: pd.Series) -> str:
    rnd = f", round {int(c['round'])}" if not missing(c["round"]) else ""
    what = fmt_ms(c["steady_median"]) + " ms" if c["status"] == "ok" else c["status"]
    return f"{c['backend']} x {c['workload']} ({c['point']}{rnd}): {what}"


def _gpu(gpu: object) -> str:
    gpus = gpu.get("gpus") if isinstance(gpu, dict) else None
    names = [str(g.get("name")) for g in gpus or [] if isinstance(g, dict)]
    return ", ".join(names) or DASH


def _load_range(cells: pd.DataFrame, node: dict) -> str:
    """Lowest-highest 1-minute load average seen on the machine: the cells' before/after
    snapshots and the node's own facts."""
    seen = [float(v.split(" / ")[0]) for v in [*cells["load_before"], *cells["load_after"]] if v]
    if isinstance(node.get("load_avg"), list) and node["load_avg"]:
        seen.append(float(node["load_avg"][0]))
    return f"{min(seen):.2f}-{max(seen):.2f}" if seen else DASH


# -- manifests, environment, notebooks ----------------------------------------------------------
def manifests(t: Tables) -> list[dict]:
    """Per run and backend: the fast-path manifest (key x workload) and framework versions."""
    out = []
    for run in t.runs.runs:
        recs = [r for r in run.records if isinstance(r.get("manifest"), dict)]
        for b in backend_order([str(r["backend"]) for r in recs]):
            mine = sorted(
                (r for r in recs if r["backend"] == b and not _get_round(r)),
                key=lambda r: workload_key(r["workload"]),
            )
            workloads = [str(r["workload"]) for r in mine]
            paths = [r["manifest"].get("fast_path") or {} for r in mine]
            keys = list(dict.fromkeys(k for p in paths if isinstance(p, dict) for k in p))
            keys = [k for k in keys if k != "backend"]
            rows = [
                (k, [_plain(p.get(k)) if isinstance(p, dict) else DASH for p in paths])
                for k in keys
            ]
            versions = {}
            for r in mine:
                v = r["manifest"].get("backend_versions")
                if isinstance(v, dict):
                    versions.update({str(k): str(x) for k, x in v.items()})
            out.append(
                {
                    "run_id": run.run_id,
                    "backend": b,
                    "workloads": workloads,
                    "rows": rows,
                    "versions": ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or DASH,
                }
            )
    return out


ENV_KEYS = (
    "os",
    "machine",
    "cpu",
    "cpu_count",
    "python",
    "numpy",
    "blas",
    "thread_env",
    "git_revision",
    "load_avg",
    "gpu",
)


def environments(t: Tables) -> dict:
    """The runs' settings and machines side by side: {"runs": [ids], "rows": [(key, [value per
    run], differs)]}; ``differs`` marks what changed between runs (machine, versions, ...)."""
    per_run = []
    for run in t.runs.runs:
        env = run.environment
        cfg = run.info.get("config") if isinstance(run.info.get("config"), dict) else {}
        vals = {"created": _plain(run.info.get("created"))}
        vals.update(
            {k: _plain(cfg.get(k)) for k in ("profile", "dtype", "device", "seed", "threads")}
        )
        vals["peak fp32 GFLOP/s (matmul probe)"] = fmt_num(run.peak_gflops, ".1f")
        vals.update(ceiling_facts(run))
        vals.update({k: _plain(env.get(k)) for k in ENV_KEYS})
        sources = {
            str(r["manifest"].get("data_source"))
            for r in run.records
            if isinstance(r.get("manifest"), dict) and r["manifest"].get("data_source")
        }
        vals["data source"] = ", ".join(sorted(sources)) or DASH
        vals["records"] = str(run.path)
        per_run.append(vals)
    keys = list(dict.fromkeys(k for v in per_run for k in v))
    rows = []
    for k in keys:
        vals = [v.get(k, DASH) for v in per_run]
        if all(x == DASH for x in vals):
            continue
        rows.append((k, vals, len(set(vals)) > 1 and k not in ("created", "records")))
    return {"runs": [r.run_id for r in t.runs.runs], "rows": rows}


def ceiling_facts(run) -> dict[str, str]:
    """The run's measured ceilings as environment rows: per precision the GFLOP/s with what it
    is (and why a probe stands in), FLOP per cycle, the bandwidth with how it was measured."""
    out = {}
    for c in run.ceilings.compute:
        out[f"ceiling {c.precision} GFLOP/s"] = f"{c.gflops:.1f}: {c.label}" + (
            f" ({c.note})" if c.note else ""
        )
    peaks = run.info.get("peaks") if isinstance(run.info.get("peaks"), dict) else {}
    rec = peaks.get("ceiling") if isinstance(peaks.get("ceiling"), dict) else {}
    for p in ("fp32", "bf16"):
        part = rec.get(p) if isinstance(rec.get(p), dict) else {}
        fpc = part.get("flop_per_cycle")
        if isinstance(fpc, int | float) and not isinstance(fpc, bool):
            out[f"FLOP per cycle per core {p} (measured)"] = f"{fpc:.1f}"
    if run.ceilings.bandwidth_gbs:
        out["memory bandwidth GB/s"] = (
            f"{run.ceilings.bandwidth_gbs:.1f}: {run.ceilings.bandwidth_how}"
        )
    comp = rec.get("compiler") if isinstance(rec.get("compiler"), dict) else {}
    src = rec.get("source") if isinstance(rec.get("source"), dict) else {}
    if comp:
        flags = " ".join(str(f) for f in comp.get("flags") or [])
        out["ceiling kernel"] = (
            f"{src.get('file', '')} sha256 {str(src.get('sha256', ''))[:16]}, built by "
            f"{comp.get('version', '')} {flags}"
        )
    return out


def notebook_rows(t: Tables, out_dir: Path) -> list[dict]:
    """Each cell's executed notebook: a link relative to the report, or why there is none."""
    out = []
    for _, c in _sorted(t.cells).iterrows():
        nb = c["notebook"]
        href, note = None, "no notebook recorded"
        if not missing(nb):
            if notebook_exists(nb):
                href = Path(os.path.relpath(nb, out_dir)).as_posix()
                note = Path(nb).name
            else:
                note = f"recorded but missing: {Path(nb).name}"
        out.append(
            {
                "run_id": c["run_id"],
                "workload": c["workload"],
                "backend": _name(c),
                "status": c["status"],
                "href": href,
                "note": note,
            }
        )
    return out


# -- comparing runs -------------------------------------------------------------------------
def comparisons(t: Tables) -> list[dict]:
    """Every later run against the first: each group's ratio to the common backend in one run
    over that in the other (a uniformly faster machine changes nothing), changes outside the
    noise flagged, and the machines' own factor stated once."""
    ids = [r.run_id for r in t.runs.runs]
    out = []
    for other in ids[1:]:
        c, factor = compare_runs(t, ids[0], other)
        several = c.groupby("workload")["point"].nunique() > 1 if len(c) else {}
        rows = [
            {
                "workload": x["workload"]
                + (f" ({x['point']})" if several[x["workload"]] else "")
                + (f" on {x['machine']}" if x["machine"] else ""),
                "backend": x["backend"],
                "common": x["common"],
                "base": fmt_ms(x["base_median"]),
                "other": fmt_ms(x["other_median"]),
                "ratio": fmt_interval(x["ratio"], x["low"], x["high"], lambda v: f"{v:.2f}"),
                "verdict": x["verdict"],
                "changed": bool(x["changed"]),
                "e2e": fmt_num(x["e2e_ratio"], ".2f"),
                "equivalent": passed(x["equivalent_base"]) and passed(x["equivalent_other"]),
            }
            for _, x in c.iterrows()
        ]
        machines = DASH
        if factor is not None:
            k, lo, hi = factor
            machines = (
                f"the machines differ by {k:.2f}x ({other} / {ids[0]}, geometric mean of every "
                f"cell's step-time ratio; cells range {lo:.2f}x to {hi:.2f}x)"
            )
        out.append(
            {
                "base": ids[0],
                "other": other,
                "rows": rows,
                "changed": sum(r["changed"] for r in rows),
                "compared": sum(r["verdict"] != "common backend" for r in rows),
                "machines": machines,
            }
        )
    return out


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells are already in the report's order (``build_tables`` sorts them)."""
    return frame


def _name(c: pd.Series) -> str:
    """A cell's backend, with its point and round where the run has several."""
    tag = c.get("tag") if hasattr(c, "get") else ""
    return f"{c['backend']} ({tag})" if isinstance(tag, str) and tag else str(c["backend"])


def _get_round(rec: dict) -> int:
    """A record's round (0 when it has none)."""
    for where in (rec.get("point"), rec.get("config")):
        if isinstance(where, dict) and isinstance(where.get("round"), int):
            return where["round"]
    return 0


def _plain(v: object) -> str:
    if missing(v):
        return DASH
    if isinstance(v, dict):
        return ", ".join(f"{k}={_plain(x)}" for k, x in v.items()) or DASH
    if isinstance(v, list | tuple):
        return ", ".join(_plain(x) for x in v) or DASH
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


# -- per-op drift ---------------------------------------------------------------------------
DRIFT_BUCKETS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)  # heat classes drift0..drift4; over 1: drift5


def drift_class(v: float | None) -> str:
    """The heat class of a violation (x its bound): one per decade up to 1, then 'over'."""
    if v is None or v != v:
        return "drift-na"
    for i, edge in enumerate(DRIFT_BUCKETS):
        if v <= edge:
            return f"drift{i}"
    return "drift5"


def drift_maps(t: Tables) -> list[dict]:
    """Per workload, a small heat map of ops x backends: the worst gradient violation (x its
    bound) of each parameterised op, over the workload's cells (points and rounds), so drift is
    visible even where every cell passes."""
    ok = t.cells[(t.cells["status"] == "ok") & t.cells["drift"].notna()]
    out = []
    for workload in workload_order(ok["workload"]):
        rows = ok[ok["workload"] == workload]
        backends = backend_order(rows["backend"])
        ops: dict[str, dict[str, float]] = {}
        for _, c in rows.iterrows():
            for op, v in c["drift"] or ():
                cur = ops.setdefault(op, {}).get(c["backend"])
                ops[op][c["backend"]] = v if cur is None else max(cur, v)
        if not ops:
            continue
        out.append(
            {
                "workload": workload,
                "backends": backends,
                "rows": [
                    {
                        "op": op,
                        "cells": [
                            {"cls": drift_class(vals.get(b)), "text": fmt_num(vals.get(b))}
                            for b in backends
                        ],
                    }
                    for op, vals in ops.items()
                ],
            }
        )
    return out
