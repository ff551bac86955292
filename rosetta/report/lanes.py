"""The lanes side by side: each framework as it comes (``default``: its own plain defaults, the
options its package's ``LANES`` names) beside Rosetta's fast path, per cell: the steady step of
each, their ratio, and each lane's cold start and first step apart from its step time (a compiled
fast path pays its compile there, once)."""

from __future__ import annotations

from rosetta.report.fmt import DASH, fmt_ms, fmt_s, missing
from rosetta.report.frame import Tables
from rosetta.report.order import backend_order

KEY = ("run_id", "workload", "backend", "batch_size", "precision", "threads")


def lane_rows(t: Tables) -> list[dict]:
    """One row per cell run in both lanes (round 0, the training run, status ok): the fast and
    the default lane's steady median step, default / fast (above 1: the fast path is faster),
    and each lane's cold start and first step."""
    cells = t.cells
    if "lane" not in cells or not (cells["lane"] == "default").any():
        return []
    ok = cells[(cells["status"] == "ok") & (cells["round"] == 0)]
    out = []
    for key, group in ok.groupby(list(KEY), dropna=False, sort=False):
        lanes = {str(r["lane"]): r for _, r in group.iterrows()}
        fast, plain = lanes.get("fast"), lanes.get("default")
        if fast is None or plain is None:
            continue
        ratio = _ratio(plain["steady_median"], fast["steady_median"])
        out.append(
            {
                **dict(zip(KEY, key, strict=True)),
                "point": fast["point"],
                "fast_ms": fmt_ms(fast["steady_median"]),
                "default_ms": fmt_ms(plain["steady_median"]),
                "ratio": DASH if ratio is None else f"{ratio:.2f}x",
                "fast_cold": fmt_s(fast["cold_start_s"]),
                "default_cold": fmt_s(plain["cold_start_s"]),
                "fast_first": fmt_s(fast["first_step_s"]),
                "default_first": fmt_s(plain["first_step_s"]),
                "options": plain.get("options_text") or DASH,
            }
        )
    order = {b: i for i, b in enumerate(backend_order(r["backend"] for r in out))}
    return sorted(out, key=lambda r: (r["run_id"], r["workload"], order.get(r["backend"], 0)))


def _ratio(a: object, b: object) -> float | None:
    if missing(a) or missing(b) or not b:
        return None
    return float(a) / float(b)
