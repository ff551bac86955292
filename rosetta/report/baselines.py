"""The shipped lowered ÷ hand-written ratios: is a backend slow, or our translation of it?

Each backend's lowered model was timed against the same model written by hand in that
framework's own idiom (``benchmarks/lowering_<backend>.py``: the canonical weights loaded into
both, their outputs checked equal first, the steps interleaved in one process). ``baselines.json``
beside this module keeps, per machine kind (:func:`rosetta.report.references.machine_name`), each
backend x workload's median ratio with its bootstrap 95% interval, the load average when it ran
and both sides' fraction of the measured compute ceiling. ``python -m benchmarks baselines``
writes it from those benchmarks' records; the report's fast-path table reads it here. A ratio is
shown for a run only where it was measured on a machine of the run's kind; else the table says
where it was measured.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rosetta.report.references import _version, machine_name, same_kind

DATA = Path(__file__).with_name("baselines.json")
SCHEMA = 1
MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class Baseline:
    """One backend x workload's lowered / hand-written ratio on one machine kind."""

    backend: str
    workload: str
    ratio: float
    low: float
    high: float
    rounds: int
    step: str  # "train" or "forward"
    batch: int
    load1: float | None  # the 1-minute load average before its rounds
    of_ceiling_lowered: float | None
    of_ceiling_handwritten: float | None
    machine: str  # machine_name of where it ran
    measured: str  # the date, YYYY-MM-DD

    def text(self) -> str:
        """``"0.98 [0.95, 1.01]"``."""
        return f"{self.ratio:.2f} [{self.low:.2f}, {self.high:.2f}]"


def _num(v: object) -> float | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def _baseline(e: dict, name: str, measured: str) -> Baseline | None:
    ratio, low, high = (_num(e.get(k)) for k in ("ratio", "low", "high"))
    backend, workload = e.get("backend"), e.get("workload")
    if None in (ratio, low, high) or not isinstance(backend, str) or not isinstance(workload, str):
        return None
    rounds, batch = e.get("rounds"), e.get("batch")
    return Baseline(
        backend, workload, ratio, low, high,
        rounds if isinstance(rounds, int) else 0, str(e.get("step") or ""),
        batch if isinstance(batch, int) else 0, _num(e.get("load1")),
        _num(e.get("of_ceiling_lowered")), _num(e.get("of_ceiling_handwritten")), name, measured,
    )  # fmt: skip


def load(path: Path | None = None) -> tuple[tuple[tuple[dict, tuple[Baseline, ...]], ...], str]:
    """Per machine of the file: its facts and its baselines; and why the file is unusable ('')."""
    path = path or DATA
    return _load(path, _version(path))


@lru_cache(maxsize=8)
def _load(path: Path, version: tuple[int, int] | None):
    from rosetta.runner import safefile

    try:
        doc = json.loads(safefile.read_bytes(path, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return (), ""
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, safefile.NotARegularFile) as exc:
        return (), f"{path.name}: unreadable ({type(exc).__name__}); no baselines"
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return (), f"{path.name}: not a schema {SCHEMA} baselines file; no baselines"
    out = []
    for m in doc.get("machines") if isinstance(doc.get("machines"), list) else []:
        if not isinstance(m, dict) or not machine_name(m):
            continue
        name, measured = machine_name(m), str(m.get("measured") or "")
        raw = m.get("baselines") if isinstance(m.get("baselines"), list) else []
        got = (_baseline(e, name, measured) for e in raw if isinstance(e, dict))
        out.append((m, tuple(b for b in got if b is not None)))
    return tuple(out), ""


def baseline_for(
    backend: str, workload: str, machine: dict | None, path: Path | None = None
) -> tuple[Baseline | None, tuple[Baseline, ...]]:
    """The baseline measured on a machine of ``machine``'s kind (None where none was), and those
    measured on other kinds (for "measured elsewhere")."""
    machines, _ = load(path)
    facts = [m for m, _ in machines]
    mine, elsewhere = None, []
    for m, rows in machines:
        for b in rows:
            if (b.backend, b.workload) != (backend, workload):
                continue
            if machine and mine is None and same_kind(machine, m, facts):
                mine = b
            else:
                elsewhere.append(b)
    return mine, tuple(elsewhere)
