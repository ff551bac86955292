""" "Is my installation performing?": the fractions of the measured ceiling each backend x
workload reached on machines this project ran, shipped with the package, and a cell's verdict
against them.

Seconds do not travel between machines; a fraction of the machine's own measured ceiling
(:mod:`rosetta.runner.ceiling`) mostly does. ``reference_fractions.json`` (beside this module)
lists machines, each named by what kind of machine it is: its CPU model name, vendor family and
widest ISA flags (Zen 4 and Zen 5 both read "AMD EPYC" with ``avx512f``; families 25 and 26),
the measured figures beside the name (FLOP per cycle: 32 and 64, but a busy core reads anything),
with the run it came from (profile, load average, whether it is a placeholder) and one fraction
per (workload, backend, precision, batch). A cell is judged only against machines of its own
kind (:func:`same_kind`); elsewhere there is no reference, and the report says how to make one.
It is **far below** where it reaches less than half the lowest reference fraction (a NumPy held
to a slow BLAS kernel, a framework built without its fast library), **above the references**
beyond twice the highest, else **in line**.

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
    workload: str,
    backend: str,
    precision: str,
    batch: int | None,
    path: Path | None = None,
    machine: dict | None = None,
) -> Reference | None:
    """The reference range of one cell's kind on machines of the kind ``machine`` is
    (:func:`same_kind`), or None where none such ran it (or ``machine`` is unknown): a Zen 5's
    cell is not judged by a Zen 4's fractions."""
    if not machine:
        return None
    entries, _ = load(path or DATA)
    machines_ = [e.machine for e in entries]
    got = [
        (e.fractions[key], e.name, e.placeholder)
        for e in entries
        if same_kind(machine, e.machine, machines_)
        and (key := (workload, backend, precision, batch)) in e.fractions
    ]
    if not got:
        return None
    return Reference(
        low=min(g[0] for g in got),
        high=max(g[0] for g in got),
        machines=tuple(dict.fromkeys(g[1] for g in got)),
        placeholder=any(g[2] for g in got),
    )


def machines(path: Path | None = None) -> list[str]:
    """Every reference machine's name, in the file's order (the report lists them once)."""
    entries, _ = load(path or DATA)
    return list(dict.fromkeys(e.name for e in entries))


def has_reference(machine: dict, path: Path | None = None) -> bool:
    """Whether the file holds an entry of ``machine``'s kind (else the report says "no reference
    for this machine" and how to make one: :data:`NO_MACHINE`)."""
    entries, _ = load(path or DATA)
    machines_ = [e.machine for e in entries]
    return any(same_kind(machine, e.machine, machines_) for e in entries)


#: what the report says of a run whose machine kind has no entry, and how to make one
NO_MACHINE = (
    "no reference for this machine: its fractions come from a quiet smoke run on it, "
    "python -m benchmarks reference_fractions results/RUN_ID (writes "
    "rosetta/report/reference_fractions.json)"
)


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


@dataclass(frozen=True)
class Entry:
    """One machine of the file: its facts, its name, whether a placeholder, its fractions."""

    machine: dict
    name: str
    placeholder: bool
    fractions: dict  # (workload, backend, precision, batch) -> fraction


def load(path: Path) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
    """The file's machines (:class:`Entry`) and its problems."""
    return _load(path, _version(path))


@lru_cache(maxsize=8)
def _load(path: Path, version: tuple[int, int] | None) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
    doc, problems = _document(path, version)
    if problems or not doc:
        return (), problems
    entries: list[Entry] = []
    bad: list[str] = []
    for i, m in enumerate(doc.get("machines") if isinstance(doc.get("machines"), list) else []):
        name = machine_name(m) if isinstance(m, dict) else ""
        if not name:
            bad.append(f"{path.name}: machine {i} names no CPU; left out")
            continue
        run = m.get("run") if isinstance(m.get("run"), dict) else {}
        fractions = {}
        for f in m.get("fractions") if isinstance(m.get("fractions"), list) else []:
            key = _key(f)
            if key is None:
                bad.append(f"{path.name}: {name}: a fraction entry is malformed; left out")
                continue
            fractions[key[:4]] = key[4]
        entries.append(Entry(m, name, run.get("placeholder") is not False, fractions))
    return tuple(entries), tuple(bad)


def _wide_isa(m: dict) -> list[str]:
    raw = m.get("isa") if isinstance(m.get("isa"), list) else []
    isa = [_text(x) for x in raw if _text(x)]
    return [x for x in isa if x.startswith(("avx512f", "avx512_bf16", "amx", "sve"))] or isa[-1:]


def _family(m: dict) -> int | None:
    fam = m.get("family")
    return fam if isinstance(fam, int) and not isinstance(fam, bool) and fam >= 0 else None


def machine_name(m: dict) -> str:
    """``"AMD EPYC family 25 (avx512f, avx512_bf16)"``: what kind of machine it is, by its CPU
    model name, vendor family and widest ISA flags; '' where no CPU is named. The measured FLOP
    per cycle is no part of it (a busy Zen 4 measured 74-87 and named itself a Zen 5's 64):
    :func:`measured_text` goes beside it. An entry or run that records no family (runs before
    it was recorded) is named without one."""
    cpu = _text(m.get("cpu"))
    if not cpu:
        return ""
    fam = _family(m)
    bits = ", ".join(_wide_isa(m))
    name = f"{cpu} family {fam}" if fam is not None else cpu
    return f"{name} ({bits})" if bits else name


def measured_text(m: dict) -> str:
    """``"32.2 FLOP/cycle fp32 measured"`` ('' where none was): the figure beside the name."""
    fpc = m.get("flop_per_cycle_fp32")
    return f"{fpc:.1f} FLOP/cycle fp32 measured" if _finite(fpc) and fpc > 0 else ""


def same_kind(run: dict, entry: dict, entries: list[dict] | None = None) -> bool:
    """Whether the machine ``run`` ran on is the kind ``entry`` was measured on: the same CPU
    model name and widest ISA flags, and the same family where both record one. A run that
    records no family matches an entry only where no other of ``entries`` shares its name and
    ISA with another family (else it is ambiguous: no reference, rather than a wrong one)."""
    def base(m: dict) -> tuple:
        return _text(m.get("cpu")), tuple(sorted(_wide_isa(m)))

    if not _text(run.get("cpu")) or base(run) != base(entry):
        return False
    fr, fe = _family(run), _family(entry)
    if fr is not None and fe is not None:
        return fr == fe
    if fr is None:
        families = {_family(e) for e in entries or [entry] if base(e) == base(run)}
        return len(families) == 1
    return True  # an entry recorded before families were: the name and ISA agree


def run_machine(run) -> dict:
    """A run's (:class:`rosetta.report.load.Run`) machine as a reference entry names it
    (:func:`machine_name`): the CPU model name and family from its environment, the ISA flags and
    the measured FLOP per cycle (beside the name, not in it) from its ``run.json`` peaks."""
    return machine_of(run.environment, run.info)


def machine_of(environment: dict, info: dict) -> dict:
    """The machine facts of a run from its environment and ``run.json`` (:func:`run_machine`)."""
    environment = environment if isinstance(environment, dict) else {}
    peaks = info.get("peaks") if isinstance(info.get("peaks"), dict) else {}
    ceil = peaks.get("ceiling") if isinstance(peaks.get("ceiling"), dict) else {}
    fp32 = ceil.get("fp32") if isinstance(ceil.get("fp32"), dict) else {}
    fam = environment.get("cpu_family") if isinstance(environment.get("cpu_family"), dict) else {}
    out = {
        "cpu": environment.get("cpu") or "unknown CPU",
        "isa": peaks.get("cpu_flags") or [],
        "flop_per_cycle_fp32": fp32.get("flop_per_cycle"),
    }
    if _family(fam) is not None:
        out["family"] = fam["family"]
        if isinstance(fam.get("model"), int):
            out["model"] = fam["model"]
    return out


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
