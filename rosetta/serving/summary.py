"""LoadGen's logs read back: the summary's verdict and figures, the accuracy log's outputs.

The summary (``mlperf_log_summary.txt``) is LoadGen's own text; its lines are read as data
(``key : value``), never evaluated. What the record keeps: ``valid`` (``Result is : VALID``),
the reasons it gives (``Min duration satisfied : No``...), the scenario's figure (SingleStream's
90th percentile latency, Server's completed samples per second and 99th percentile, Offline's
samples per second, MultiStream's 99th percentile per query), every percentile it prints, and
its warnings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.+?)\s*$")
_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?) percentile latency \(ns\)$")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_summary(folder: Path) -> dict:
    """The record's view of ``folder/mlperf_log_summary.txt`` (module docstring)."""
    path = Path(folder) / "mlperf_log_summary.txt"
    if not path.is_file():
        return {"valid": False, "result": "missing", "reasons": ["LoadGen wrote no summary"]}
    out: dict = {"percentiles_s": {}, "reasons": [], "warnings": []}
    section = ""
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.strip()
        if line.startswith("====") or not line:
            continue
        if line in ("Additional Stats", "Test Parameters Used", "MLPerf Results Summary"):
            section = line
            continue
        m = _LINE.match(line)
        if m is None:
            if "warning" in line.lower() and "No warnings" not in line:
                out["warnings"].append(line[:200])
            continue
        key, value = m.group(1), m.group(2)
        if key == "Result is":
            out["result"] = value[:40]
            out["valid"] = value == "VALID"
        elif key.endswith("satisfied"):
            if value.lower().startswith("no"):
                out["reasons"].append(f"{key}: {value}"[:200])
        elif key == "Scenario":
            out["scenario"] = value[:40]
        elif _PERCENTILE.match(key) and section == "Additional Stats":
            p = _PERCENTILE.match(key).group(1)
            n = _number(value)
            if n is not None:
                out["percentiles_s"][p] = n / 1e9
        elif key in (
            "Samples per second",
            "Completed samples per second",
            "Scheduled samples per second",
        ):
            out[key.lower().replace(" ", "_")] = _number(value)
        elif key in ("QPS w/ loadgen overhead", "QPS w/o loadgen overhead"):
            out["qps_with_overhead" if "w/ " in key else "qps_without_overhead"] = _number(value)
        elif key in ("Mean latency (ns)", "Min latency (ns)", "Max latency (ns)"):
            n = _number(value)
            out[key.split()[0].lower() + "_latency_s"] = None if n is None else n / 1e9
        elif key.endswith("percentile latency (ns)") and section != "Additional Stats":
            n = _number(value)  # the scenario's own figure (90th for SingleStream, 99th else)
            out["scenario_latency_s"] = None if n is None else n / 1e9
            out["scenario_percentile"] = key.split("th")[0].strip()[:8]
    out.setdefault("valid", False)
    out.setdefault("result", "unknown")
    return out


def read_accuracy(folder: Path) -> dict[int, np.ndarray]:
    """Sample index -> its output (float32) from LoadGen's accuracy log (hex bytes)."""
    path = Path(folder) / "mlperf_log_accuracy.json"
    entries = json.loads(path.read_text()) if path.is_file() else []
    out: dict[int, np.ndarray] = {}
    for e in entries:
        data = bytes.fromhex(str(e["data"]))
        out[int(e["qsl_idx"])] = np.frombuffer(data, dtype=np.float32).copy()
    return out
