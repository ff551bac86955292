"""LoadGen's serving scenarios in the reports: one section per workload.

``rosetta serve`` writes ``serving.html`` beside its records (:func:`write`); a bench run that
``rosetta serve --run RUN_ID`` added to holds them in its ``serving/`` folder, and its main
report shows the same sections (:func:`run_sections`, rendered by the report's template).

Per workload, a scenario table (per backend: SingleStream p90/p99, MultiStream p99, Offline
samples/s, Server's highest VALID target QPS at its p99 bound; LoadGen's VALID or INVALID with
its reasons, never hidden; the accuracy check of LoadGen's accuracy log against the float64
reference), and a latency-against-load chart from the Server search's trials (the p99 latency of
each trial against its target rate, one line per backend; a VALID trial a filled dot, an INVALID
one a cross). The page is one self-contained HTML file (inline SVG); every text from a record is
escaped: a record is data, never markup.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from rosetta.report.charts import WIDTH_IN, Chart, colour, pyplot, safe_id, to_svg

SCENARIO_ORDER = ("single_stream", "multi_stream", "offline", "server")
SERVING_DIR = "serving"  # a bench run's folder of serving records (`rosetta serve --run`)


def load(folder: Path) -> tuple[list[dict], list[str]]:
    """The serving records of ``folder`` (``*.json`` other than requests), and a line for each
    file that is not one (read as data; a broken file is named, not fatal)."""
    records, problems = [], []
    for path in sorted(Path(folder).glob("*.json")):
        if path.name.endswith(".request.json") or path.is_symlink():
            continue
        try:
            r = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path.name}: not a record ({type(exc).__name__})")
            continue
        if (
            isinstance(r, dict)
            and r.get("kind") == "serving"
            and isinstance(r.get("request"), dict)
        ):
            records.append(r)
        else:
            problems.append(f"{path.name}: not a serving record")
    return records, problems


def _ms(v) -> str:
    return "-" if not isinstance(v, int | float) else f"{v * 1e3:.3g} ms"


def figure(r: dict) -> tuple[str, str]:
    """(the scenario's figure, LoadGen's verdict) of a record, as text."""
    q = r["request"]
    if r.get("status") != "ok":
        return "-", f"{r.get('status')}: {r.get('reason') or r.get('error') or ''}"
    if q.get("scenario") == "server":
        s = r.get("server") or {}
        best = s.get("max_valid_qps")
        trials = s.get("trials") or []
        valid = sum(1 for t in trials if t.get("valid"))
        # every trial VALID: the search stopped below its top (the calibrated max-batch rate),
        # so the highest VALID rate is a floor, not the maximum
        floor = ">= " if best and trials and valid == len(trials) else ""
        fig = (f"{floor}{best:.4g} QPS at p99 <= {_ms(r.get('p99_bound_s'))}" if best
               else f"no VALID rate at p99 <= {_ms(r.get('p99_bound_s'))}")  # fmt: skip
        return fig, f"{valid} of {len(trials)} trials VALID"
    perf = r.get("performance") or {}
    pct = perf.get("percentiles_s") or {}
    if q.get("scenario") == "offline":
        fig = f"{perf.get('samples_per_second') or 0:.4g} samples/s"
    else:
        fig = f"p90 {_ms(pct.get('90.00'))}, p99 {_ms(pct.get('99.00'))}"
    verdict = str(perf.get("result", "unknown"))
    if perf.get("reasons"):
        verdict += " (" + "; ".join(str(x) for x in perf["reasons"]) + ")"
    return fig, verdict


def accuracy(r: dict) -> str:
    """The accuracy check of a record, as text."""
    acc = r.get("accuracy") or {}
    if not acc:
        return "-"
    v = acc.get("violation")
    worst = f"{v:.2g}x its bound" if isinstance(v, int | float) else "no outputs"
    state = "equivalent" if acc.get("equivalent") else "NOT equivalent"
    return f"{state} ({acc.get('samples', 0)} samples, worst {worst})"


@dataclass(frozen=True)
class Row:
    """One line of a scenario table, as text (escaped where it is shown)."""

    scenario: str
    backend: str
    figure: str
    verdict: str
    accuracy: str
    load: str
    bad: bool  # not ok, INVALID or not equivalent: shown in red, never hidden


@dataclass(frozen=True)
class Section:
    """One workload's scenario table and Server chart."""

    workload: str
    rows: tuple[Row, ...]
    chart: Chart | None


def row(r: dict) -> Row:
    """The table line of one record."""
    q = r["request"]
    fig, verdict = figure(r)
    acc = accuracy(r)
    load = (r.get("load_before") or ["-"])[0]
    load = f"{load:.2f}" if isinstance(load, int | float) else str(load)
    bad = r.get("status") != "ok" or "INVALID" in verdict or "NOT" in acc
    return Row(str(q.get("scenario")), str(q.get("backend")), fig, verdict, acc, load, bad)


def sections(records: list[dict], prefix: str = "") -> list[Section]:
    """One section per workload, rows in scenario order then backend; ``prefix`` keeps chart
    ids apart when several runs share a page."""
    rank = {s: i for i, s in enumerate(SCENARIO_ORDER)}
    out = []
    for w in dict.fromkeys(str(r["request"].get("workload")) for r in records):
        rows = [r for r in records if str(r["request"].get("workload")) == w]
        rows.sort(key=lambda r: (rank.get(r["request"].get("scenario"), 9),
                                 str(r["request"].get("backend"))))  # fmt: skip
        server = [r for r in rows if r["request"].get("scenario") == "server"]
        out.append(Section(w, tuple(row(r) for r in rows), latency_load_chart(w, server, prefix)))
    return out


def run_sections(run_dirs: list[Path]) -> tuple[list[tuple[str, Section]], list[str]]:
    """The serving sections of bench runs that ``rosetta serve --run`` added to (their
    ``serving/`` folders): (run name, section) pairs, and a line per unreadable file."""
    found, problems = [], []
    for run_dir in run_dirs:
        folder = Path(run_dir) / SERVING_DIR
        if not folder.is_dir() or folder.is_symlink():
            continue
        records, bad = load(folder)
        problems += [f"{Path(run_dir).name}/{SERVING_DIR}/{line}" for line in bad]
        found += [(Path(run_dir).name, s) for s in sections(records, Path(run_dir).name)]
    return found, problems


def latency_load_chart(workload: str, records: list[dict], prefix: str = "") -> Chart | None:
    """p99 latency against target QPS of every Server trial, one line per backend."""
    series = []
    for r in records:
        trials = ((r.get("server") or {}).get("trials")) or []
        points = sorted(
            (float(t["target_qps"]), float(t["percentiles_s"]["99.00"]), bool(t.get("valid")))
            for t in trials
            if isinstance(t.get("percentiles_s"), dict) and "99.00" in t["percentiles_s"]
        )
        if points:
            series.append((str(r["request"]["backend"]), points, r.get("p99_bound_s")))
    if not series:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.6))
    for backend, points, bound in series:
        col = colour(backend)
        xs, ys = [p[0] for p in points], [p[1] * 1e3 for p in points]
        ax.plot(xs, ys, color=col, lw=1.2, label=backend)
        for x, y, ok in points:
            ax.plot(x, y * 1e3, "o" if ok else "x", color=col, ms=6, fillstyle="full")
        if isinstance(bound, int | float):
            ax.axhline(bound * 1e3, color=col, lw=0.8, ls="--")
    ax.set_xlabel("Server target QPS (LoadGen's Poisson arrivals)")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_yscale("log")
    ax.grid(color="#dddddd", lw=0.6)
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: latency against load (dots VALID, crosses INVALID; dashed: "
                 "each backend's p99 bound)", loc="left", fontsize=10)  # fmt: skip
    cid = safe_id("serving", prefix, workload)
    return Chart(cid, f"{workload}: Server trials, p99 latency against target QPS",
                 to_svg(fig, cid))  # fmt: skip


def page(records: list[dict], problems: list[str], title: str) -> str:
    """The whole page (module docstring)."""
    e = html.escape
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title><style>body{{font-family:system-ui,sans-serif;margin:2em;"
        "max-width:70em}table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;"
        "padding:.3em .7em;text-align:left;vertical-align:top}.bad{color:#b3261e}</style>",
        f"</head><body><h1>{e(title)}</h1>",
        "<p>MLPerf LoadGen (mlcommons-loadgen) drove each backend's prediction path; each "
        "scenario ran in its own process. Accuracy: LoadGen's accuracy log against the float64 "
        "reference at the workload's float32 bound.</p>",
    ]
    for line in problems:
        parts.append(f"<p class='bad'>{e(line)}</p>")
    for sec in sections(records):
        parts.append(f"<h2>{e(sec.workload)}</h2><table><tr><th>scenario</th><th>backend</th>"
                     "<th>figure</th><th>LoadGen</th><th>accuracy</th><th>load (1 min)"
                     "</th></tr>")  # fmt: skip
        for r in sec.rows:
            cells = (r.scenario, r.backend, r.figure, r.verdict, r.accuracy, r.load)
            tds = "".join(f"<td>{e(c)}</td>" for c in cells)
            parts.append(f"<tr{' class=bad' if r.bad else ''}>{tds}</tr>")
        parts.append("</table>")
        if sec.chart is not None:
            c = sec.chart
            parts.append(f"<figure>{c.svg}<figcaption>{e(c.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "".join(parts)


def write(folder: Path) -> Path:
    """``folder/serving.html`` from the records in ``folder``."""
    records, problems = load(folder)
    out = Path(folder) / "serving.html"
    out.write_text(page(records, problems, f"Serving scenarios: {Path(folder).name}"))
    return out
