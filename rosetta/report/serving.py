"""The serving view: what a person choosing how to *serve* a model reads.

One row per backend that ran a forward pass with a batch-1 latency (``metrics.latency``, measured
in round 0 of each point), per run and workload: batch-1 latency p50 and p99, the forward pass's
throughput at the cell's batch (``metrics.predict_at_batch``: a training cell times its trained
model over the test set, a serving engine's cell of a training workload times the forward pass
alone; older records only hold ``metrics.throughput_at_batch``, the timed program, labelled
``train step`` where it was one), the gate's verdict, the engine's own version and the
settings in effect (an engine's read-back settings, ``fast_path.engine_settings``; else the
framework's compile mode). The four training frameworks, the new ones and the serving engines
(ONNX Runtime, OpenVINO) stand side by side on the same weights. Read from the records only.
"""

from __future__ import annotations

from rosetta.report.fmt import fmt_ms, fmt_num
from rosetta.report.frame import Tables
from rosetta.report.order import workload_order
from rosetta.report.stats import passed

MAX_TEXT = 240  # characters of a recorded setting shown (records are data: cut, escaped)


def _dict(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def engine_versions(manifest: dict) -> str:
    """The backend's own versions (``backend_versions`` less NumPy), e.g. ``onnxruntime 1.32.0``."""
    versions = _dict(manifest.get("backend_versions"))
    text = ", ".join(f"{k} {v}" for k, v in versions.items() if k != "numpy")
    return text[:MAX_TEXT]


def settings_text(manifest: dict) -> str:
    """The settings in effect: an engine's read-back settings, else the compile mode and threads."""
    fast = _dict(manifest.get("fast_path"))
    engine = _dict(fast.get("engine_settings"))
    threads = _dict(manifest.get("runtime")).get("threads")
    if engine:
        text = "; ".join(f"{k}={v}" for k, v in engine.items())
    else:
        text = "; ".join(
            x for x in (str(fast.get("compile") or ""), f"threads={threads}" if threads else "")
            if x
        )  # fmt: skip
    return " ".join(text.split())[:MAX_TEXT]


def serving_rows(t: Tables) -> list[dict]:
    """The serving table's rows, by run, workload (the report's order), then p50."""
    rows = []
    for run in t.runs.runs:
        for rec in run.records:
            metrics = _dict(rec.get("metrics"))
            lat = _dict(metrics.get("latency"))
            if rec.get("status") != "ok" or _num(lat.get("p50")) is None:
                continue
            man = _dict(rec.get("manifest"))
            # the forward pass at the cell's batch where the cell timed one (every training
            # cell over its test set, a serving engine's forward cell), else the timed program
            at = _dict(metrics.get("predict_at_batch")) or _dict(metrics.get("throughput_at_batch"))
            point = _dict(rec.get("point"))
            rows.append(
                {
                    "run_id": run.run_id,
                    "workload": str(rec.get("workload")),
                    "backend": str(rec.get("backend")),
                    "precision": str(point.get("precision") or "fp32"),
                    "threads": fmt_num(_dict(man.get("runtime")).get("threads"), ".0f"),
                    "n": fmt_num(lat.get("n"), ".0f"),
                    "p50_s": _num(lat.get("p50")),
                    "p50": fmt_ms(lat.get("p50")),
                    "p99": fmt_ms(lat.get("p99")),
                    "batch": fmt_num(at.get("batch"), ".0f"),
                    "throughput": fmt_num(at.get("samples_per_s"), ".4g"),
                    "what": str(at.get("what") or "predict")[:40],
                    "equivalent": passed(_dict(rec.get("equivalence")).get("equivalent")),
                    "versions": engine_versions(man),
                    "settings": settings_text(man),
                }
            )
    order = {w: i for i, w in enumerate(workload_order([r["workload"] for r in rows]))}
    runs = {r.run_id: i for i, r in enumerate(t.runs.runs)}
    rows.sort(key=lambda r: (runs[r["run_id"]], order[r["workload"]], r["p50_s"]))
    return rows
