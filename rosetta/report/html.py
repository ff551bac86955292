"""Render the report: sections -> the Jinja2 template -> one self-contained ``index.html``.

The template (``templates/report.html.j2`` with its ``report.css``) ships as package data. The
page carries a Content-Security-Policy of ``default-src 'none'`` (inline styles and data: images
only), has no script, and embeds every chart as inline SVG, so it can be mailed as one file.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from rosetta.report import (
    charts,
    generation,
    headline,
    loadgen_page,
    references,
    roofline,
    scaling,
    sections,
    serving,
)
from rosetta.report.compare import ratios_to_fastest
from rosetta.report.fastpaths import TARGET, fastpath_rows
from rosetta.report.frame import CHECKS, Tables
from rosetta.report.groups import primary
from rosetta.report.headline import APART
from rosetta.report.lanes import lane_rows
from rosetta.report.order import workload_order
from rosetta.report.stats import NO_CLEAR, TOO_FEW, TOO_FEW_ROUNDS, passed

TEMPLATE = "report.html.j2"
REFERENCE = "numpy_ref"


def environment():
    """The Jinja2 environment over the package's templates (autoescaped HTML)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("rosetta.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def context(t: Tables, out_dir: Path) -> dict:
    """Everything the template shows, computed from the frames."""
    cells = t.cells
    heads = primary(t)
    workloads = workload_order(cells["workload"])
    train = [w for w in workloads if (cells[cells["workload"] == w]["task"] == "train").any()]
    failed: list[str] = []

    def drawn(fn, w: str, *args):  # one chart that cannot be drawn must not take the page down
        try:
            return fn(w, *args)
        except Exception as exc:  # noqa: BLE001 - matplotlib's failures are many and deep
            failed.append(f"{w}: chart {fn.__name__} not drawn ({type(exc).__name__}: {exc})")
            return None

    step_charts = [c for w in workloads if (c := drawn(charts.step_time_chart, w, heads))]
    round_charts = [c for w in workloads if (c := drawn(charts.round_chart, w, heads))]
    first = cells.loc[[g[0] for g in heads["cells"]]]  # each headline group's first round
    first = first.assign(machine=list(heads["machine"]))  # the group's key: "" on one machine
    cold_charts = [c for w in workloads if (c := drawn(charts.cold_start_chart, w, first))]
    losses = t.losses_of(list(first.index))  # the charted cells only
    loss_charts = [
        c
        for w in train
        for run in t.runs.runs
        if (c := drawn(charts.loss_chart, w, run.run_id, first, losses, REFERENCE))
    ]
    try:
        roof = roofline.section(t)
    except Exception as exc:  # noqa: BLE001 - as above: the page stands without its roofline
        failed.append(f"roofline not drawn ({type(exc).__name__}: {exc})")
        roof = None
    try:
        loadgen, loadgen_problems = loadgen_page.run_sections([r.path for r in t.runs.runs])
    except Exception as exc:  # noqa: BLE001 - as above: the page stands without its serving runs
        why = f"serving scenarios not shown ({type(exc).__name__}: {exc})"
        loadgen, loadgen_problems = [], [why]
    ids = [r.run_id for r in t.runs.runs]
    gen_rows = generation.generation_rows(t)
    return {
        "title": " vs ".join(ids),
        "lede": lede(t),
        "machine": machine_line(t),
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "problems": [*t.runs.problems, *failed, *loadgen_problems, *references.problems()],
        "headlines": headline.headlines(t),
        "step_charts": step_charts,
        "round_charts": round_charts,
        "scaling": scaling.sections(t),
        "latency": scaling.latency_sections(t),
        "serving": serving.serving_rows(t),
        "generation": gen_rows,
        "generation_charts": [
            c for w in workload_order([r["workload"] for r in gen_rows])
            if (c := generation.tokens_chart(gen_rows, w))
        ],
        "loadgen": loadgen,
        "cold_charts": cold_charts,
        "loss_charts": loss_charts,
        "ratios": sections.ratio_rows(t),
        "rerun_lines": sections.rerun_lines(t),
        "cold": sections.cold_rows(t),
        "efficiency": sections.efficiency_rows(t),
        "ceiling_lines": sections.ceiling_lines(t),
        "roofline": roof,
        "equivalence": sections.equivalence_rows(t),
        "drift_maps": sections.drift_maps(t),
        "checks": CHECKS,
        "problem_cells": sections.problem_rows(t),
        "comparisons": sections.comparisons(t),
        "environments": sections.environments(t),
        "machines": sections.machine_rows(t),
        "manifests": sections.manifests(t),
        "conditions": sections.condition_rows(t),
        "lanes": lane_rows(t),
        "fastpaths": fastpath_rows(t),
        "baseline_target": TARGET,
        "notebooks": sections.notebook_rows(t, out_dir),
        "sources": [str(r.path) for r in t.runs.runs],
    }


def render(t: Tables, out_dir: Path) -> str:
    """The report's HTML text."""
    return environment().get_template(TEMPLATE).render(**context(t, out_dir))


def write_html(t: Tables, out_dir: Path) -> Path:
    """Write ``out_dir/index.html`` (creating the folder) and return its path."""
    from rosetta.runner.records import disk_error
    from rosetta.userfile import check_target

    out_dir = Path(out_dir)
    html = render(t, out_dir.resolve())
    path = out_dir / "index.html"
    if out_dir.is_dir():  # a report is rewritten in place, but never through a link or device
        check_target(path, "the report", force=True)
    tmp = path.with_name(".index.html.partial")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # full, read-only, no permission: one line, no .partial left
        raise disk_error(Path(exc.filename or out_dir), exc, "run `rosetta report` again") from None
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    return path


def lede(t: Tables) -> list[str]:
    """At a glance, one line each: who is fastest per workload (or no clear winner), whether
    the backends computed the same thing, what did not run."""
    cells = t.cells
    parts = []
    r = ratios_to_fastest(t, primary(t))
    for (run_id, w, machine), g in r.groupby(["run_id", "workload", "machine"], sort=False):
        best = g.iloc[0]
        others = g.iloc[1:]
        run_tag = f" ({run_id})" if len(t.runs.runs) > 1 else ""
        prefix = f"{w}" + (f" on {machine}" if machine else "") + run_tag
        if others.empty and _apart(r, run_id, w):
            apart = f"{w}{run_tag}: {APART}"  # one line for the workload, not one per machine
            parts.extend([] if apart in parts else [apart])
        elif others.empty:
            parts.append(f"{prefix}: only {best['backend']} timed")
        elif (others["method"] == TOO_FEW_ROUNDS).any():
            parts.append(f"{prefix}: {best['backend']} has the lowest median; {TOO_FEW}")
        elif (others["verdict"] == NO_CLEAR).any():
            tie = others[others["verdict"] == NO_CLEAR]
            tied = ", ".join(
                b if passed(e) else f"{b} (not equivalent)"
                for b, e in zip(tie["backend"], tie["equivalent"], strict=True)
            )
            parts.append(f"{prefix}: {best['backend']} fastest, {NO_CLEAR} from {tied}")
        else:
            nxt = others.iloc[0]
            parts.append(
                f"{prefix}: {best['backend']} fastest, {nxt['ratio']:.2f}x "
                f"[{nxt['low']:.2f}, {nxt['high']:.2f}] ahead of {nxt['backend']}"
                f" ({nxt['stability']})"
            )
    ok = cells[cells["status"] == "ok"]
    n_eq = sum(passed(v) for v in ok["equivalent"])
    parts.append(f"{n_eq} of {len(ok)} timed cells passed the equivalence gate")
    n_noisy = int(r["noisy"].sum())
    if n_noisy:
        cells_word = "cell" if n_noisy == 1 else "cells"
        parts.append(f"{n_noisy} {cells_word} noisy enough to change a verdict (see the ratios)")
    n_bad = int((cells["status"] != "ok").sum())
    if n_bad:
        parts.append(f"{n_bad} cells did not finish (see below)")
    return parts


def _apart(r, run_id: str, workload: str) -> bool:
    """Whether a run's workload was timed on several machines with no two backends sharing one
    (so there is no cross-framework verdict for it)."""
    g = r[(r["run_id"] == run_id) & (r["workload"] == workload)]
    return (
        g["machine"].astype(bool).any()
        and g["backend"].nunique() > 1
        and g.groupby("machine")["backend"].nunique().max() < 2
    )


def _ceiling_text(run) -> str | None:
    """``ceiling 234 GFLOP/s fp32 (FMA), 469 bf16, 34 GB/s`` or the probe standing in."""
    fp32, bf16 = run.ceilings.of("fp32"), run.ceilings.of("bf16")
    if fp32 is None:
        return None
    kind = "FMA" if fp32.measured else "matmul probe"
    bits = [f"ceiling {fp32.gflops:.0f} GFLOP/s fp32 ({kind})"]
    if bf16 is not None and bf16.precision == "bf16":
        bits.append(f"{bf16.gflops:.0f} bf16")
    if run.ceilings.bandwidth_gbs:
        bits.append(f"{run.ceilings.bandwidth_gbs:.0f} GB/s")
    return ", ".join(bits)


def machine_line(t: Tables) -> str:
    """CPU, cores, OS and the peak GFLOP/s of the (first) run's machine."""
    bits = []
    for run in t.runs.runs:
        env = run.environment
        desc = ", ".join(
            str(x)
            for x in (
                env.get("cpu"),
                f"{env['cpu_count']} cores" if env.get("cpu_count") else None,
                env.get("os"),
                _ceiling_text(run),
            )
            if x
        )
        bits.append(f"{run.run_id}: {desc or 'machine not recorded'}")
    return " | ".join(bits)
