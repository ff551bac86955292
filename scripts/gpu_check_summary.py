"""What a GPU check ran, read back from its records (``scripts/gpu_check.sh``, step 5).

    python scripts/gpu_check_summary.py RESULTS_DIR RUN_ID [RUN_ID ...]

One row per cell record: the device asked for and the one in effect, status, the gate's verdict,
the median step and the cold start, and the fast path the backend's manifest read back (layout,
autotune, compile, TF32 in effect, precision). Exits 1 when a cell that ran is not ``ok`` and
equivalent, ran on another device than it asked for, or read back a TF32 setting other than the
one asked for, or a torch convolution cell on CUDA without cuDNN autotune; 2 when nothing is wrong
but some cells were interrupted (not run); 0 otherwise. Skipped cells are listed with their
reason and are no failure. Reads JSON only: it imports no framework.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: workloads whose torch lowering convolves (cuDNN autotune must be on for them on CUDA)
CONV_WORKLOADS = ("cnn", "resnet50")
RUN_FILES = ("run.json", "index.json")


def cell_records(run_dir: Path) -> list[dict]:
    """The cell records of one run folder, sorted by file name (unreadable ones as errors)."""
    out = []
    for path in sorted(run_dir.glob("*.json")):
        if path.name in RUN_FILES:
            continue
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            rec = {"status": "unreadable", "error": f"{path.name}: {exc}"}
        rec.setdefault("_file", path.stem)
        out.append(rec if isinstance(rec, dict) else {"status": "unreadable", "_file": path.stem})
    return out


def problems(rec: dict) -> list[str]:
    """What is wrong with one record, in words (empty: nothing)."""
    status = rec.get("status")
    if status in ("skipped", "interrupted"):  # listed; an interrupted bench is the script's exit 2
        return []
    if status != "ok":
        return [f"status {status}: {str(rec.get('error') or rec.get('reason') or '')[:160]}"]
    out = []
    eq = rec.get("equivalence") or {}
    if eq.get("equivalent") is not True:
        out.append(f"not equivalent: {str(eq.get('where') or eq.get('note') or '')[:160]}")
    config = rec.get("config") or {}
    runtime = (rec.get("manifest") or {}).get("runtime") or {}
    fast = (rec.get("manifest") or {}).get("fast_path") or {}
    asked = config.get("device")
    if asked in ("cuda", "cpu") and runtime.get("device") != asked:
        out.append(f"asked for {asked}, ran on {runtime.get('device')}")
    if bool(runtime.get("tf32")) != bool(config.get("tf32")):
        out.append(f"TF32 asked {config.get('tf32')}, in effect {runtime.get('tf32')}")
    if (rec.get("backend") == "torch" and runtime.get("device") == "cuda"
            and rec.get("workload") in CONV_WORKLOADS
            and "benchmark=True" not in str(fast.get("autotune"))):
        out.append(f"cuDNN autotune not on: {fast.get('autotune')}")
    return out


def row(run: str, rec: dict) -> str:
    """One line of the table."""
    config = rec.get("config") or {}
    manifest = rec.get("manifest") or {}
    runtime = manifest.get("runtime") or {}
    fast = manifest.get("fast_path") or {}
    clocks = rec.get("clocks") or {}
    steady = clocks.get("steady") or {}
    eq = (rec.get("equivalence") or {}).get("equivalent")
    step = steady.get("median")
    cold = clocks.get("cold_start_s")
    parts = [
        f"{run:9s}",
        f"{rec.get('_file', '?'):34s}",
        f"{config.get('device', '?')}->{runtime.get('device', '-'):5s}",
        f"{rec.get('status', '?'):8s}",
        f"eq={'yes' if eq is True else 'NO' if eq is False else '-':3s}",
        f"step={step * 1e3:9.3f}ms" if isinstance(step, int | float) else "step=        -  ",
        f"cold={cold:6.2f}s" if isinstance(cold, int | float) else "cold=     - ",
        f"tf32={runtime.get('tf32', '-')!s:5s}",
        f"layout={fast.get('layout', '-')}",
        f"autotune={fast.get('autotune', '-')}",
        f"compile={str(fast.get('compile', '-'))[:40]}",
        f"precision={str(fast.get('precision_mode', '-'))[:60]}",
    ]
    if rec.get("status") == "skipped":
        parts.append(f"skipped: {str(rec.get('reason') or rec.get('error') or '')[:120]}")
    return "  ".join(parts)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    results, runs = Path(argv[0]), argv[1:]
    if not runs:
        print("gpu_check_summary: no run ran (nothing to read back)")
        return 1
    bad: list[str] = []
    count = cut = 0
    for run in runs:
        for rec in cell_records(results / run):
            count += 1
            cut += rec.get("status") == "interrupted"
            print(row(run, rec))
            bad += [f"{run}/{rec.get('_file')}: {p}" for p in problems(rec)]
    print(f"{count} cell records in {len(runs)} runs; {len(bad)} problems; {cut} interrupted "
          "(not run: the budget ran out)")
    for line in bad:
        print(f"PROBLEM {line}")
    return 1 if bad or count == 0 else 2 if cut else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
