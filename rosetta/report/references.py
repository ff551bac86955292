""" "Is my installation performing?": the fractions of the measured ceiling each backend x
workload reached on machines this project ran, shipped with the package, and a cell's verdict
against them.

Seconds do not travel between machines; a fraction of the machine's own measured ceiling
(:mod:`rosetta.runner.ceiling`) mostly does. ``reference_fractions.json`` (beside this module)
lists machines, each named by its CPU model, its ISA flags and its *measured* FLOP per cycle
(Zen 4 and Zen 5 both read "AMD EPYC" with ``avx512f``: 32 and 64), with the run it came from
(profile, load average, whether it is a placeholder) and one fraction per (workload, backend,
precision, batch). A cell is **far below** where it reaches less than half the lowest reference
fraction (a NumPy held to a slow BLAS kernel, a framework built without its fast library),
**above the references** beyond twice the highest, else **in line**.

The file is data: every field is checked, text is shown as text, and a file that cannot be read
gives no references (and :func:`problems` says why), never a crash.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("reference_fractions.json")
SCHEMA = 1
MAX_BYTES = 4 << 20  # the reference file: 4 MiB (the shipped one is 8 KiB)
FAR_BELOW = 0.5  # under half the lowest reference: far below
FAR_ABOVE = 2.0  # over twice the highest: above the references
IN_LINE, BELOW, ABOVE, NONE = "in line", "far below", "above the references", "no reference"


@dataclass(frozen=True)
class Reference:
    """The fractions of ceiling one (workload, backend, precision, batch) reached elsewhere."""

    low: float
    high: float
    machines: tuple[str, ...]  # each "CPU model (ISA, FLOP/cycle)"
    placeholder: bool  # any of them from a placeholder run (a loaded machine, the ci profile)

    def span(self) -> str:
        """``"12-15%"`` (``"12%"`` from one figure), with "placeholder" where one is."""
        span = f"{self.low:.0%}" if self.low == self.high else f"{self.low:.0%}-{self.high:.0%}"
        return span + (" (placeholder)" if self.placeholder else "")

    def text(self) -> str:
        """``"12-15% on 2 machines"``, or on the one machine by name."""
        n = len(self.machines)
        where = self.machines[0] if n == 1 else f"{n} machines"
        span = self.span()
        return f"{span.split(' (')[0]} on {where}" + (" (placeholder)" if self.placeholder else "")


def verdict(fraction: float | None, ref: Reference | None) -> str:
    """``in line``, ``far below``, ``above the references``, or ``no reference``."""
    if fraction is None:
        return ""
    if ref is None:
        return NONE
    if fraction < FAR_BELOW * ref.low:
        return BELOW
    if fraction > FAR_ABOVE * ref.high:
        return ABOVE
    return IN_LINE


def reference_for(
    workload: str, backend: str, precision: str, batch: int | None, path: Path | None = None
) -> Reference | None:
    """The reference range of one cell's kind, or None where no machine ran it."""
    table, _ = load(path or DATA)
    return table.get((workload, backend, precision, batch))


def machines(path: Path | None = None) -> list[str]:
    """Every reference machine's name, in the file's order (the report lists them once)."""
    table, _ = load(path or DATA)
    return list(dict.fromkeys(m for ref in table.values() for m in ref.machines))


def problems(path: Path | None = None) -> list[str]:
    """Why the reference file could not be (fully) read: one line each."""
    return list(load(path or DATA)[1])


def _version(path: Path) -> tuple[int, int] | None:
    """What the caches below are keyed by beside the path: a rewritten file is read again."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def document(path: Path) -> tuple[dict, tuple[str, ...]]:
    """The file as a dict ({} where absent or unusable) and why it is unusable: one line."""
    return _document(path, _version(path))


@lru_cache(maxsize=8)
def _document(path: Path, version: tuple[int, int] | None) -> tuple[dict, tuple[str, ...]]:
    from rosetta.runner import safefile

    try:  # a regular file within the bound (a FIFO or /dev/zero named by --data is refused)
        doc = json.loads(safefile.read_bytes(path, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return {}, ()
    except safefile.NotARegularFile as exc:
        return {}, (f"{path.name}: {exc}; no reference fractions",)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {}, (f"{path.name}: unreadable ({type(exc).__name__}); no reference fractions",)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return {}, (f"{path.name}: not a schema {SCHEMA} reference file; no reference fractions",)
    return doc, ()


def load(path: Path) -> tuple[dict[tuple, Reference], tuple[str, ...]]:
    """{(workload, backend, precision, batch): Reference} from the file, and its problems."""
    return _load(path, _version(path))


@lru_cache(maxsize=8)
def _load(
    path: Path, version: tuple[int, int] | None
) -> tuple[dict[tuple, Reference], tuple[str, ...]]:
    doc, problems = _document(path, version)
    if problems or not doc:
        return {}, problems
    seen: dict[tuple, list[tuple[float, str, bool]]] = {}
    bad: list[str] = []
    for i, m in enumerate(doc.get("machines") if isinstance(doc.get("machines"), list) else []):
        name = machine_name(m) if isinstance(m, dict) else ""
        if not name:
            bad.append(f"{path.name}: machine {i} names no CPU; left out")
            continue
        run = m.get("run") if isinstance(m.get("run"), dict) else {}
        placeholder = run.get("placeholder") is not False
        for f in m.get("fractions") if isinstance(m.get("fractions"), list) else []:
            key = _key(f)
            if key is None:
                bad.append(f"{path.name}: {name}: a fraction entry is malformed; left out")
                continue
            seen.setdefault(key[:4], []).append((key[4], name, placeholder))
    table = {
        k: Reference(
            low=min(v[0] for v in vals),
            high=max(v[0] for v in vals),
            machines=tuple(dict.fromkeys(v[1] for v in vals)),
            placeholder=any(v[2] for v in vals),
        )
        for k, vals in seen.items()
    }
    return table, tuple(bad)


def machine_name(m: dict) -> str:
    """``"AMD EPYC (avx512f, avx512_bf16; 32 FLOP/cycle fp32)"``; '' where no CPU is named. The
    measured FLOP per cycle is named at the nearest power of two (what cores have: 16, 32, 64),
    so a figure measured on a busy machine (36.4) still names its generation."""
    cpu = _text(m.get("cpu"))
    if not cpu:
        return ""
    isa = (
        [_text(x) for x in m.get("isa") or [] if _text(x)] if isinstance(m.get("isa"), list) else []
    )
    wide = [x for x in isa if x.startswith(("avx512f", "avx512_bf16", "amx", "sve"))] or isa[-1:]
    fpc = m.get("flop_per_cycle_fp32")
    bits = ", ".join(wide)
    if _finite(fpc) and fpc > 0:
        bits += f"; {2 ** round(math.log2(fpc))} FLOP/cycle fp32"
    return f"{cpu} ({bits})" if bits else cpu


def run_machine(run) -> dict:
    """A run's (:class:`rosetta.report.load.Run`) machine as a reference entry names it
    (:func:`machine_name`): the CPU model from its environment, the ISA flags and the measured
    FLOP per cycle from its ``run.json`` peaks."""
    environment = run.environment
    peaks = run.info.get("peaks") if isinstance(run.info.get("peaks"), dict) else {}
    ceil = peaks.get("ceiling") if isinstance(peaks.get("ceiling"), dict) else {}
    fp32 = ceil.get("fp32") if isinstance(ceil.get("fp32"), dict) else {}
    return {
        "cpu": environment.get("cpu") or "unknown CPU",
        "isa": peaks.get("cpu_flags") or [],
        "flop_per_cycle_fp32": fp32.get("flop_per_cycle"),
    }


def _key(f: object) -> tuple | None:
    if not isinstance(f, dict):
        return None
    w, b, p = (_text(f.get(k)) for k in ("workload", "backend", "precision"))
    batch, frac = f.get("batch"), f.get("fraction")
    if not (w and b and p) or not isinstance(batch, int) or isinstance(batch, bool):
        return None
    if not _finite(frac) or not 0 < frac < 100:
        return None
    return w, b, p, batch, float(frac)


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _text(v: object) -> str:
    return str(v).splitlines()[0][:120] if isinstance(v, str) and v.strip() else ""
