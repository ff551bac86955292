"""The generation view: a decoder's greedy decoding with a KV cache, per backend.

One row per (run, workload, backend, precision, batch) of every record holding
``metrics.generation`` (a decoder cell's generation run, ``rosetta.runner.generation.measure``):
time to first token (the prefill, until the first token is on the host), decode latency p50 and
p99 (one token a step, synchronised), tokens/s (the whole batch's new tokens over the
generation's wall time), the generation gate (every step's logits against the float64
reference, and whether the greedy tokens were the reference's; where not, the first position
that differs and the reference's top-1 minus top-2 margin there), and memory (the KV cache the
batch needs; the process's peak resident memory during that batch's generations; the device's
peak during them, where the framework can restart its counter). A backend
whose models do not
generate yet has a row saying why. Read from the records only; their text is data (escaped).
"""

from __future__ import annotations

from rosetta.report.fmt import fmt_ms, fmt_num
from rosetta.report.frame import Tables
from rosetta.report.order import workload_order

MAX_TEXT = 200  # characters of a recorded reason shown


def _dict(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _mib(v: object) -> str:
    """Bytes as MiB for the table ("-" where not recorded)."""
    n = _num(v)
    return "-" if n is None else fmt_num(n / 2**20, ".4g")


def _tokens(gate: dict) -> str:
    """The token agreement in words: identical, or where it first differed and the margin."""
    if gate.get("tokens_equal") is True:
        return "identical"
    first, margin = gate.get("first_divergence"), _num(gate.get("margin_at_divergence"))
    if not isinstance(first, int) or isinstance(first, bool):
        return "-"
    return f"differ from token {first} (margin {fmt_num(margin, '.3g')})"


def generation_rows(t: Tables) -> list[dict]:
    """The generation table's rows, by run, workload (the report's order), backend, batch."""
    rows = []
    for run in t.runs.runs:
        for rec in run.records:
            gen = _dict(_dict(rec.get("metrics")).get("generation"))
            if rec.get("status") != "ok" or not gen:
                continue
            point = _dict(rec.get("point"))
            base = {
                "run_id": run.run_id,
                "workload": str(rec.get("workload")),
                "backend": str(rec.get("backend")),
                "precision": str(point.get("precision") or "fp32"),
            }
            if "skipped" in gen:
                rows.append({**base, "batch": None, "skipped": str(gen["skipped"])[:MAX_TEXT]})
                continue
            gate = _dict(gen.get("gate"))
            for b in gen.get("batches") or []:
                b = _dict(b)
                rows.append(
                    {
                        **base,
                        "batch": _num(b.get("batch")),
                        "skipped": "",
                        "prompt": f"{fmt_num(gen.get('prompt_len'), '.0f')} + "
                        f"{fmt_num(gen.get('new_tokens'), '.0f')}",
                        "ttft": fmt_ms(b.get("ttft_s")),
                        "p50": fmt_ms(b.get("decode_p50_s")),
                        "p99": fmt_ms(b.get("decode_p99_s")),
                        "tokens_per_s": fmt_num(b.get("tokens_per_s"), ".4g"),
                        "tps": _num(b.get("tokens_per_s")),  # the chart's
                        "equivalent": gate.get("equivalent") is True,
                        "violation": fmt_num(gate.get("logits_violation"), ".3g"),
                        "tokens": _tokens(gate),
                        "kv_mib": _mib(_dict(b.get("memory")).get("kv_cache_bytes")),
                        "peak_mib": _mib(_dict(b.get("memory")).get("peak_rss_bytes")),
                        "device_mib": _mib(_dict(b.get("memory")).get("peak_device_bytes")),
                    }
                )
    order = {w: i for i, w in enumerate(workload_order([r["workload"] for r in rows]))}
    runs = {r.run_id: i for i, r in enumerate(t.runs.runs)}
    rows.sort(key=lambda r: (runs[r["run_id"]], order[r["workload"]], r["backend"],
                             r["batch"] or 0))  # fmt: skip
    return rows


def tokens_chart(rows: list[dict], workload: str):
    """Tokens/s per backend at each batch size of ``workload``'s generation rows (one bar
    group per backend, a bar per batch; a failed generation gate hatched), or None."""
    import numpy as np

    from rosetta.report.charts import Chart, colour, pyplot, safe_id, to_svg

    mine = [r for r in rows if r["workload"] == workload and not r["skipped"]]
    values = [(r["backend"], int(r["batch"]), r["tps"], r["equivalent"])
              for r in mine if r["tps"] is not None and r["batch"] is not None]  # fmt: skip
    if not values:
        return None
    names = list(dict.fromkeys(v[0] for v in values))
    batches = sorted({v[1] for v in values})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.5 * len(names) * len(batches)))
    height = 0.8 / len(batches)
    for j, b in enumerate(batches):
        for i, name in enumerate(names):
            hit = [v for v in values if v[0] == name and v[1] == b]
            if not hit:
                continue
            _, _, tps, ok = hit[0]
            y = len(names) - 1 - i + (j - (len(batches) - 1) / 2) * height
            ax.barh(y, tps, height=height * 0.9, color=colour(name), alpha=1 - 0.35 * j,
                    hatch=None if ok else "//", edgecolor="white")  # fmt: skip
            ax.text(tps, y, f"  {tps:.4g} (batch {b})", va="center", fontsize=8)
    ax.set_yticks(np.arange(len(names))[::-1], names)
    ax.set_xlabel("new tokens per second (the batch's, prefill included)")
    top = max(v[2] for v in values)
    ax.set_xlim(0, top * 1.35)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: greedy generation", loc="left", fontsize=11)
    cid = safe_id("tokens", workload)
    return Chart(cid, f"{workload}: tokens/s per backend and batch", to_svg(fig, cid))

