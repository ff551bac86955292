"""The fast-path table: per backend and workload, the form that ran, the measurement that chose
it, lowered ÷ hand-written with its interval, and the fraction of the measured ceiling reached.

The form and its reasons come from each record's manifest (``fast_path``): every key the
backend records a ``<key>_reason`` for is a measured choice (the reason carries its figure), and
``compile`` and ``layout`` say what ran, with the GRU's ``fused_rnn`` and the transformer's
``attention``. The ratio is the shipped baseline (:mod:`rosetta.report.baselines`) of the run's
kind of machine; where only another kind measured it, the row names that machine instead. The
fraction of ceiling is the run's own: the median over the float32 fast-lane cells of each batch.
"""

from __future__ import annotations

import statistics

from rosetta.report.baselines import baseline_for
from rosetta.report.fmt import DASH
from rosetta.report.frame import Tables
from rosetta.report.order import backend_order, workload_key
from rosetta.report.references import run_machine

#: what ran, always shown where recorded; and per workload, the key that matters most there
FORM_KEYS = ("compile", "layout")
WORKLOAD_KEYS = {"gru": ("fused_rnn",), "transformer": ("attention",)}
TARGET = 1.05  # lowered / hand-written above this: the translation costs time (issue 47)


def _text(v: object) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def form_and_reasons(fast_path: dict, workload: str) -> tuple[str, str]:
    """What ran (``key: value; ...``) and what chose it (each ``<key>_reason``; '' if none)."""
    chosen = [k[: -len("_reason")] for k in fast_path if k.endswith("_reason")]
    keys = [*FORM_KEYS, *WORKLOAD_KEYS.get(workload, ()), *chosen]
    keys = [k for k in dict.fromkeys(keys) if k in fast_path]
    form = "; ".join(f"{k}: {_text(fast_path[k])}" for k in keys)
    reasons = "; ".join(
        f"{k}: {_text(fast_path[f'{k}_reason'])}" for k in chosen if f"{k}_reason" in fast_path
    )
    return form, reasons


def _ceiling(t: Tables, run_id: str, workload: str, backend: str) -> str:
    """The run's median fraction of ceiling per batch, float32 fast-lane ok cells."""
    c = t.cells
    sel = c[(c["run_id"] == run_id) & (c["workload"] == workload) & (c["backend"] == backend)]
    sel = sel[(sel["status"] == "ok") & (sel["precision"].isin(["fp32", "float32"]))]
    if "lane" in sel:
        sel = sel[sel["lane"].fillna("fast") == "fast"]
    parts = []
    for batch, g in sel.groupby("batch_size", sort=True):
        vals = [float(v) for v in g["peak_fraction"] if v == v and v is not None]
        if vals:
            parts.append(f"{statistics.median(vals):.1%} (batch {int(batch)})")
    return ", ".join(parts) or DASH


def fastpath_rows(t: Tables, path=None) -> list[dict]:
    """One row per run x workload x backend that recorded a fast path (round 0)."""
    out = []
    for run in t.runs.runs:
        machine = run_machine(run)
        seen = set()
        for rec in run.records:
            manifest = rec.get("manifest") if isinstance(rec.get("manifest"), dict) else {}
            fp = manifest.get("fast_path")
            key = (str(rec.get("workload")), str(rec.get("backend")))
            if not isinstance(fp, dict) or key in seen:
                continue
            seen.add(key)
            workload, backend = key
            form, reasons = form_and_reasons(fp, workload)
            mine, elsewhere = baseline_for(backend, workload, machine, path)
            if mine is not None:
                ratio = mine.text()
                where = f"{mine.step}, batch {mine.batch}, {mine.rounds} rounds, load {mine.load1}"
                where += f", {mine.measured}"
            elif elsewhere:
                b = elsewhere[0]
                ratio, where = DASH, f"not on this kind of machine; {b.text()} on {b.machine}"
            else:
                ratio, where = DASH, "no hand-written baseline measured"
            out.append({
                "run_id": run.run_id, "workload": workload, "backend": backend,
                "form": form or DASH, "chosen_by": reasons or DASH, "ratio": ratio,
                "over": mine is not None and mine.ratio > TARGET, "where": where,
                "of_ceiling": _ceiling(t, run.run_id, workload, backend),
                "hand_of_ceiling": (f"{mine.of_ceiling_handwritten:.1%}"
                                    if mine and mine.of_ceiling_handwritten else DASH),
            })  # fmt: skip
    order = {b: i for i, b in enumerate(backend_order(r["backend"] for r in out))}
    return sorted(out, key=lambda r: (r["run_id"], workload_key(r["workload"]),
                                      order.get(r["backend"], 0)))  # fmt: skip
