"""The bench's end-of-run summary: a plain-text table and a CSV, one row per record.

What ``rosetta bench`` prints when a run ends and writes to ``<run>/summary.csv``; the HTML
report reads the same records. Rows come in the report's one order (:mod:`rosetta.report.order`:
workload by the spec's ``order``, backend by registry, then point and round). Imports neither
pandas nor matplotlib: it works without the report's extra.
"""

from __future__ import annotations

import csv
from pathlib import Path

from rosetta.report.ceilings import achieved_gflops, run_ceilings, standing
from rosetta.report.order import row_key
from rosetta.report.references import NO_MACHINE, has_reference, machine_name
from rosetta.safetext import csv_cell, plain

SUMMARY_COLUMNS = ["workload", "backend", "status", "equivalent", "cold_start_s", "step_median_s",
                   "step_ci95_low_s", "step_ci95_high_s", "end_to_end_s", "test_accuracy",
                   "time_per_1000_images_s", "data_source", "wall_s", "flags", "error"]  # fmt: skip


def _row(r: dict) -> dict:
    """One record as the summary's columns (CSV and text share them)."""
    row = {
        "workload": r["workload"],
        "backend": _name(r),
        "status": r["status"],
        "equivalent": "",
        "cold_start_s": "",
        "step_median_s": "",
        "step_ci95_low_s": "",
        "step_ci95_high_s": "",
        "end_to_end_s": "",
        "test_accuracy": "",
        "time_per_1000_images_s": "",
        "data_source": r.get("manifest", {}).get("data_source", ""),
        "wall_s": r.get("wall_s", ""),
        "flags": "; ".join(r.get("flags", [])),
        "error": r.get("error", ""),
    }
    if r["status"] == "ok":
        c, m, st = r["clocks"], r["metrics"], r["clocks"]["steady"]
        row.update(
            equivalent=r["equivalence"]["equivalent"],
            cold_start_s=c["cold_start_s"],
            step_median_s=st["median"],
            step_ci95_low_s=st["ci95_low"],
            step_ci95_high_s=st["ci95_high"],
            end_to_end_s=c.get("end_to_end_s", ""),  # a timing round has none
            test_accuracy=m.get("test_accuracy", ""),
            time_per_1000_images_s=m.get("time_per_1000_images_s", ""),
        )
    return row


def _ordered(recs: list[dict]) -> list[dict]:
    """The report's one order: workload (spec ``order``), backend (registry), point, round."""
    return sorted(recs, key=lambda r: row_key({}, _key_fields(r)))


def _key_fields(r: dict) -> dict:
    pt = r.get("point") if isinstance(r.get("point"), dict) else {}
    cfg = r.get("config") if isinstance(r.get("config"), dict) else {}
    return {
        "workload": r["workload"],
        "backend": r["backend"],
        **{k: pt.get(k, cfg.get(k)) for k in ("batch_size", "precision", "threads", "round")},
    }


def _name(r: dict) -> str:
    """The backend, with its point and round where the record is not the default cell."""
    pt = r.get("point") if isinstance(r.get("point"), dict) else {}
    cfg = r.get("config") if isinstance(r.get("config"), dict) else {}
    parts = []
    if cfg.get("batch_size"):
        parts.append(f"b{pt.get('batch_size', cfg['batch_size'])}")
    if cfg.get("precision") not in (None, "fp32"):
        parts.append(str(cfg["precision"]))
    rnd = pt.get("round", cfg.get("round")) or 0
    if rnd:
        parts.append(f"r{rnd}")  # as in its file name and index key (__r1)
    return " ".join([r["backend"], *parts])


def write_csv(recs: list[dict], path: Path) -> Path:
    """The summary as CSV, one row per cell."""
    rows = [{k: csv_cell(v) for k, v in _row(r).items()} for r in _ordered(recs)]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


#: how the cell's spread flag begins (``rosetta.runner.cell.noise_flag``)
SPREAD_FLAG = "steady-state spread (IQR/median)"


def summary(recs: list[dict], info: dict | None = None) -> str:
    """A plain-text table of a run's records (the HTML report reads the same records), then each
    ok cell against the run's measured ceiling (``info``: its ``run.json``, when given).

    Flags are listed one per line under the table, except the steady-state spread flag: alone it
    does not say whether the noise matters (the report decides that against the other
    backends), so its records are counted in one line rather than listed one by one."""
    head = (
        f"{'workload':<9} {'backend':<11} {'status':<8} {'equiv':<5} {'cold s':>7} "
        f"{'step s (median [95% CI])':>27} {'e2e s':>8} {'result':>14} {'data':<13} {'wall s':>6}"
    )
    lines = [head, "-" * len(head)]
    notes = []
    spread = 0
    for r in _ordered(recs):
        row = _row(r)
        wall = f"{row['wall_s']:>6.0f}" if isinstance(row["wall_s"], float) else f"{'':>6}"
        if r["status"] != "ok":
            source = f" [data: {row['data_source']}]" if row["data_source"] else ""
            lines.append(
                f"{r['workload']:<9} {row['backend']:<11} {r['status']:<8} -- {r.get('error', '')}"
                + source
            )
            continue
        step = (
            f"{row['step_median_s']:.4f} [{row['step_ci95_low_s']:.4f}, "
            f"{row['step_ci95_high_s']:.4f}]"
        )
        if (r.get("metrics") or {}).get("mode") == "forward":  # a serving engine: no training
            result = "forward only"
        elif row["test_accuracy"] != "":
            result = f"acc {row['test_accuracy']:.3f}"
        elif row["time_per_1000_images_s"] != "":
            result = f"{row['time_per_1000_images_s']:.1f} s/1k img"
        else:
            result = "timing round"  # steps only: no accuracy, no end to end
        e2e = row["end_to_end_s"]
        e2e = f"{e2e:>8.2f}" if isinstance(e2e, int | float) else f"{'-':>8}"
        eq = "yes" if row["equivalent"] else "NO"
        flag = " *" if row["flags"] else ""
        lines.append(
            f"{r['workload']:<9} {row['backend']:<11} {r['status']:<8} {eq:<5} "
            f"{row['cold_start_s']:>7.2f} {step:>27} {e2e} {result:>14} "
            f"{row['data_source']:<13} {wall}{flag}"
        )
        flags = r.get("flags", [])
        spread += any(str(f).startswith(SPREAD_FLAG) for f in flags)
        notes.extend(
            f"  * {row['backend']} x {r['workload']}: {f}"
            for f in flags
            if not str(f).startswith(SPREAD_FLAG)
        )
    if spread:
        ok = sum(r["status"] == "ok" for r in recs)
        notes.append(
            f"  * {spread} of {ok} ok records have a {SPREAD_FLAG} above 10% (uneven steps); "
            "whether that could change a verdict is the report's call (its noisy cells)"
        )
    if info is not None:
        notes.extend(ceiling_lines(recs, info))
    return plain("\n".join(lines + notes))  # a record's text may hold terminal escapes


def ceiling_lines(recs: list[dict], info: dict) -> list[str]:
    """Per ok cell: achieved GFLOP/s, its share of the run's ceiling (explained above 100%), the
    roofline bound, and the reference range with the verdict (:mod:`rosetta.report.ceilings`)."""
    ceilings = run_ceilings(info)
    fp32 = ceilings.of("fp32")
    if fp32 is None:
        return ["of ceiling: this run recorded no ceiling"]
    head = f"of ceiling ({fp32.gflops:.0f} GFLOP/s {fp32.label}"
    head += f"; {fp32.note}" if fp32.note else ""
    bf16 = ceilings.of("bf16")
    if bf16 is not None and bf16.precision == "bf16":
        head += f"; bf16 {bf16.gflops:.0f}"
    bw = f"; memory {ceilings.bandwidth_gbs:.0f} GB/s" if ceilings.bandwidth_gbs else ""
    out = [head + bw + "):"]
    above: dict[str, None] = {}  # the explanations of figures above 100%, once each
    machines: dict[str, None] = {}  # the reference machines named, once each
    for r in _ordered(recs):
        if r["status"] != "ok" or (r.get("metrics") or {}).get("mode") == "forward":
            continue  # a serving engine's forward pass: the report's serving view has it
        cell = _cell_facts(r)
        task, flops = cell["spec"].get("task"), cell["spec"].get("flops_per_sample")
        thr = _throughput(r, cell["batch"])
        gflops = achieved_gflops(task, thr, flops)
        if gflops is None:
            continue
        st = standing(
            ceilings,
            gflops=gflops,
            workload=r["workload"],
            profile=cell["profile"],
            backend=r["backend"],
            precision=cell["precision"],
            batch=cell["batch"],
            device=cell["device"],
            threads=cell["threads"],
            intensity=cell["intensity"],
        )
        frac = f"{st.fraction:6.1%}" if st.fraction is not None else "     -"
        above.update({st.above: None} if st.above else {})
        bound = f"{st.bound}-bound" if st.bound else ""
        comparable = st.reference is not None and st.ceiling is not None and st.ceiling.measured
        ref = f"ref {st.reference.span()}: {st.verdict}" if comparable else st.verdict
        machines.update(dict.fromkeys(st.reference.machines) if comparable else {})
        out.append(
            f"  {r['workload']:<9} {_name(r):<11} {gflops:8.1f} GFLOP/s {frac}"
            f"{' *' if st.above else '  '} {bound:<14} {ref}"
        )
    out.extend(f"  * {note}" for note in above)
    if machines:
        out.append(f"  ref: the fractions of ceiling reached on {'; '.join(machines)}")
    elif ceilings.machine and not has_reference(ceilings.machine):
        out.append(f"  ref: {machine_name(ceilings.machine)}: {NO_MACHINE}")
    return out


def _cell_facts(r: dict) -> dict:
    """Profile, batch, precision, device, threads and spec facts of a record (point, config,
    manifest, and the ``spec`` it states: records.migrate gives an older record one)."""
    pt = r.get("point") if isinstance(r.get("point"), dict) else {}
    cfg = r.get("config") if isinstance(r.get("config"), dict) else {}
    man = r.get("manifest") if isinstance(r.get("manifest"), dict) else {}
    rt = man.get("runtime") if isinstance(man.get("runtime"), dict) else {}
    profile = str(r.get("profile") or cfg.get("profile") or "")
    spec = r.get("spec") if isinstance(r.get("spec"), dict) else {}
    batch = pt.get("batch_size") or cfg.get("batch_size") or spec.get("profile_batch")
    flops, moved = spec.get("flops_per_step"), spec.get("bytes_per_step")
    return {
        "profile": profile,
        "batch": batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
        "precision": str(
            pt.get("precision") or cfg.get("precision") or rt.get("precision") or "fp32"
        ),
        "device": str(rt.get("device") or cfg.get("device") or "cpu"),
        "threads": next(
            (
                t
                for t in (rt.get("threads"), pt.get("threads"), cfg.get("threads"))
                if isinstance(t, int) and not isinstance(t, bool)
            ),
            None,
        ),  # fmt: skip
        "spec": spec,
        "intensity": flops / moved if flops and moved else None,
    }


def _throughput(r: dict, batch: int | None) -> float | None:
    clocks = r.get("clocks") if isinstance(r.get("clocks"), dict) else {}
    thr = clocks.get("throughput_samples_per_s")
    if isinstance(thr, int | float) and not isinstance(thr, bool) and thr > 0:
        return float(thr)
    med = (
        (clocks.get("steady") or {}).get("median")
        if isinstance(clocks.get("steady"), dict)
        else None
    )
    return batch / med if batch and isinstance(med, int | float) and med > 0 else None
