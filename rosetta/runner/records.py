"""Append-only JSON records: one file per cell per run, written once, atomically and durably.

A record is strict JSON (no NaN/Infinity: a value that is not finite is stored as null). It is
written to a temporary file in the same folder, flushed and fsync'ed, then hard-linked to its
final name (which fails if a record is already there, so none is ever replaced) and the folder is
fsync'ed: after a crash or power loss a record is either whole or absent.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

from rosetta.errors import RosettaError
from rosetta.runner import safefile

SCHEMA_VERSION = 3
#: older schemas a reader takes through :func:`migrate` (2: before records held their spec's
#: facts, cold-start parts and flag codes)
MIGRATES = (1, 2)
#: the codes of a record's ``flag_codes`` (each beside its text in ``flags``), and what each means
FLAG_CODES = {
    "batch": "trained at another batch than the spec's: throughput only",
    "data_cache": "a data-cache file was refused and the data decoded again",
    "profile_not_met": "fewer samples than the profile asks for",
    "gated_here": "gated in this cell, not reused from another point",
    "noisy": "uneven steady-state steps (IQR / median over the bound)",
    "non_finite_loss": "a training loss that is not finite",
    "no_warm_sample": "no warm step sampled: the steady figure is the cold first step",
    "generation": "the generation gate failed: a decode step's logits off the reference's",
    "other": "a flag written before flags had codes",
}
#: the texts older records' flags begin with, by code (read by :func:`migrate` alone)
_FLAG_PREFIXES = (
    ("batch ", "batch"),
    ("data cache", "data_cache"),
    ("profile not met", "profile_not_met"),
    ("gated in this cell", "gated_here"),
    ("steady-state CV", "noisy"),
    ("steady-state spread", "noisy"),
    ("non-finite training loss", "non_finite_loss"),
    ("steady state: no warm step", "no_warm_sample"),
)
STATUSES = ("ok", "failed", "timeout", "killed", "skipped", "interrupted")
#: statuses that a resumed run keeps unless asked to retry them
RETRYABLE = ("failed", "timeout", "killed", "interrupted")


def make_record(*, backend: str, workload: str, profile: str, status: str, **fields) -> dict:
    """A record with the fields every record has; ``fields`` adds clocks, metrics, manifest...

    A record given its ``config`` also gets its ``point`` (:func:`point`), unless one is given."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; valid: {STATUSES}")
    if "config" in fields and "point" not in fields:
        runtime = (fields.get("manifest") or {}).get("runtime")
        fields["point"] = point(fields["config"], runtime if status == "ok" else None)
    if "spec" not in fields:  # a cell that never ran its spec: the facts of the spec as it is now
        base = {"workload": workload, "profile": profile, **fields}
        fields["spec"] = _spec_of(base)
    return {
        "schema_version": SCHEMA_VERSION,
        "backend": backend,
        "workload": workload,
        "profile": profile,
        "status": status,
        **fields,
    }


def point(config: dict, runtime: dict | None = None) -> dict:
    """Where on the measured surface a record sits: ``{batch_size, precision, round, kind}``
    (``kind``: ``training`` for the training run, ``timing`` for a timing round).

    ``batch_size`` is the effective one (the profile's when the config says ``None``). The
    thread count is not repeated here: an ok record holds the count in effect once, in
    ``manifest.runtime.threads``, and every record its request in ``config.threads``
    (``None``: all usable cores). The report groups records by (workload, backend, batch_size,
    precision, threads) and treats rounds as repeated measurements of that group."""
    batch = config.get("batch_size")
    if batch is None:
        try:
            from rosetta.spec import get_workload

            batch = get_workload(config["workload"]).profile(config["profile"]).batch_size
        except Exception:  # noqa: BLE001 - an unknown workload's failure record still gets one
            batch = None
    return {
        "batch_size": batch,
        "precision": config.get("precision", "fp32"),
        "round": int(config.get("round", 0)),
        "kind": str(config.get("kind", "training")),  # the training run or a timing round
        "lane": str(config.get("lane", "fast")),  # the fast path, or the framework's defaults
    }


def cell_key(config) -> str:
    """A cell's name in its run: the record's file stem and its ``index.json`` key.

    ``{backend}__{workload}`` for the default point (batch ``None``, ``fp32``, threads ``None``,
    round 0), so runs made before the axes existed still load; otherwise
    ``{backend}__{workload}__{parts}`` where ``parts`` joins with ``-``, in this order, only the
    parts off their default: ``b{batch_size}`` (a batch size was asked), ``{precision}`` (not
    fp32), ``t{threads}`` (a thread count was asked), ``r{round}`` (round > 0), the lane (not
    ``fast``). Examples:
    ``torch__cnn__b16-bf16-t1-r2``, ``jax__gru__t2``, ``numpy_ref__gru__r1``.
    ``config`` is a ``CellConfig`` or its dict."""
    c = config if isinstance(config, dict) else config.as_dict()
    parts = []
    if c.get("batch_size") is not None:
        parts.append(f"b{c['batch_size']}")
    if c.get("precision", "fp32") != "fp32":
        parts.append(c["precision"])
    if c.get("threads") is not None:
        parts.append(f"t{c['threads']}")
    if c.get("round", 0):
        parts.append(f"r{c['round']}")
    if c.get("lane", "fast") != "fast":
        parts.append(str(c["lane"]))  # a lane besides the fast path: ``torch__resnet50__default``
    base = f"{c['backend']}__{c['workload']}"
    return f"{base}__{'-'.join(parts)}" if parts else base


_FIXES = {
    errno.ENOSPC: "free space on that disk (or choose another folder)",
    errno.EDQUOT: "free space within your quota (or choose another folder)",
    errno.EROFS: "the file system is read-only: choose a folder on a writable disk",
    errno.EACCES: "make it writable for this user (or choose another folder)",
    errno.EPERM: "make it writable for this user (or choose another folder)",
    errno.ELOOP: "a symlink in the path points to itself: fix or remove the link",
}


def disk_error(path: Path, exc: OSError, then: str = "") -> RosettaError:
    """One line for a write that the disk refused (full, read-only, no permission, a symlink
    loop): the path, the cause and the fix; ``then`` says how to go on afterwards."""
    fix = _FIXES.get(exc.errno or 0, "check the disk and the folder's permissions")
    cause = exc.strerror or str(exc)
    return RosettaError(
        f"{path}: cannot write ({cause}); {fix}" + (f", then {then}" if then else "")
    )


def record_path(results_dir: Path, run_id: str, backend: str, workload: str) -> Path:
    """Where the record of one cell (at the default point) of one run lives."""
    return Path(results_dir) / run_id / f"{backend}__{workload}.json"


def record_path_for(results_dir: Path, run_id: str, config) -> Path:
    """Where the record of the cell ``config`` (any point) of one run lives."""
    return Path(results_dir) / run_id / f"{cell_key(config)}.json"


def dumps(obj: object) -> str:
    """Strict JSON text (raises on NaN/Infinity instead of writing invalid JSON)."""
    return json.dumps(obj, indent=1, allow_nan=False, default=str)


def atomic_write_text(path: Path, text: str, *, replace: bool) -> Path:
    """Write ``text`` to ``path`` via a fsync'ed temporary file; ``replace=False`` refuses to
    overwrite an existing file (hard link), ``True`` replaces it atomically (rename)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise disk_error(path.parent, exc) from None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if another writer got there first
    except FileExistsError:
        raise RosettaError(f"{path}: a record already exists; records are append-only") from None
    except OSError as exc:
        raise disk_error(path, exc) from None
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # the folder itself is gone or unwritable; the message above says so
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise disk_error(path.parent, exc) from None
    return path


def write_record(path: Path, record: dict) -> Path:
    """Write ``record`` to ``path`` once; refuses to replace an existing record."""
    path = Path(path)
    if path.exists():
        raise RosettaError(
            f"{path}: a record already exists; records are append-only (new --run-id)"
        )
    return atomic_write_text(path, dumps(record), replace=False)


NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # backend and workload names
MAX_SECONDS = 1e6  # 11.6 days: no step, cold start or run of a cell is longer
MAX_RECORD_BYTES = 50 * 2**20  # a record with every raw step time is well under 1 MB


MAX_LOSS = 1e30  # a diverged loss is stored as null; a finite one beyond this is not a loss


def _plausible(v: object, bound: float) -> bool:
    """A value of a recorded series: null (not finite when measured) or a number within bound."""
    if v is None:
        return True
    return not isinstance(v, bool) and isinstance(v, int | float) and -bound <= v <= bound


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not strict JSON (records store non-finite values as null)")


def loads_strict(text: str) -> object:
    """Parse a record's text: strict JSON only (``NaN``/``Infinity`` refused); nesting deeper
    than Python's recursion limit raises ``ValueError`` like any other bad text."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def record_problem(rec: dict) -> str:
    """'' if ``rec`` has the shape its status promises, else one line saying what is wrong.

    Names must be plain (they become file names, labels and CSV cells); an ``ok`` record must
    carry finite, plausible clocks and an equivalence verdict, because the summary, the report
    and a resume read them without further checks."""
    for key in ("backend", "workload", "status"):
        if not isinstance(rec.get(key), str):
            return f"{key} is {type(rec.get(key)).__name__}, not a string"
    for key in ("backend", "workload"):
        if not NAME.match(rec[key]):
            return f"{key} {rec[key][:40]!r} is not a plain name"
    if rec["status"] not in STATUSES:
        return f"unknown status {rec['status'][:40]!r}"
    if not isinstance(rec.get("flags", []), list):
        return "flags is not a list"
    codes = rec.get("flag_codes")
    if codes is not None and (
        not isinstance(codes, list)
        or len(codes) != len(rec.get("flags", []))
        or any(c not in FLAG_CODES for c in codes)
    ):
        return f"flag_codes is not one code of {', '.join(FLAG_CODES)} per flag"
    if rec["status"] != "ok":
        return ""
    clocks = rec.get("clocks")
    steady = clocks.get("steady") if isinstance(clocks, dict) else None
    if not isinstance(steady, dict):
        return "status ok but no clocks (clocks.steady)"
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    timing = cfg.get("kind") == "timing"  # a timing round has no end to end: its steps only
    for where, d, key in [
        ("clocks.steady", steady, k) for k in ("median", "ci95_low", "ci95_high")
    ] + [
        ("clocks", clocks, "cold_start_s"),
        *([] if timing else [("clocks", clocks, "end_to_end_s")]),
    ]:
        v = d.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"{where}.{key} is {type(v).__name__}, not a number"
        if not 0 <= v <= MAX_SECONDS:
            return f"{where}.{key} = {v:g} s is not a plausible time"
    series = [("clocks.steady_raw_s", clocks.get("steady_raw_s"), MAX_SECONDS)]
    if isinstance(rec.get("metrics"), dict):
        series.append(("metrics.losses", rec["metrics"].get("losses"), MAX_LOSS))
    for where, values, bound in series:
        if values is None:
            continue
        if not isinstance(values, list):
            return f"{where} is {type(values).__name__}, not a list"
        bad = next((v for v in values if not _plausible(v, bound)), "ok")
        if bad != "ok":
            return f"{where} holds {str(bad)[:20]}, not a number within +-{bound:g}"
    eq = rec.get("equivalence")
    if not isinstance(eq, dict) or not isinstance(eq.get("equivalent"), bool):
        return "status ok but no equivalence verdict (equivalence.equivalent)"
    if not isinstance(rec.get("metrics", {}), dict):
        return "metrics is not an object"
    return ""


def read_record(path: Path) -> dict:
    """One record; a truncated, non-JSON or foreign file is a one-line ``RosettaError``."""
    path = Path(path)
    try:
        rec = loads_strict(safefile.read_text(path, MAX_RECORD_BYTES))
    except safefile.NotARegularFile as exc:
        raise RosettaError(
            f"{path}: {exc}, not a record; remove it (a resume sets it aside and runs the cell "
            f"again)"
        ) from None
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise RosettaError(
            f"{path}: unreadable record ({type(exc).__name__}: {exc}); move it aside, or rerun "
            f"the cell with --resume <run-id> --retry-failed after deleting it"
        ) from None
    version = rec.get("schema_version") if isinstance(rec, dict) else type(rec).__name__
    if version in MIGRATES:
        rec = migrate(rec)
    elif version != SCHEMA_VERSION:
        raise RosettaError(
            f"{path}: record schema_version {version}, this rosetta reads {SCHEMA_VERSION} "
            f"(and {', '.join(map(str, MIGRATES))}); read it with the rosetta version that wrote "
            f"it, or move it aside"
        )
    for key in ("backend", "workload", "status"):
        if key not in rec:
            raise RosettaError(f"{path}: record lacks {key!r}; move it aside")
    problem = record_problem(rec)
    if problem:
        raise RosettaError(f"{path}: malformed record ({problem}); move it aside")
    return rec


def read_records(run_dir: Path, errors: list[str] | None = None) -> list[dict]:
    """Every record of one run, sorted by (workload, backend).

    With ``errors`` given, an unreadable record is reported there (one line each) and skipped;
    without it, the first one raises."""
    out = []
    for p in sorted(Path(run_dir).glob("*.json")):
        if p.name.startswith(".") or p.name in ("run.json", "index.json"):
            continue
        try:
            out.append(read_record(p))
        except RosettaError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    return sorted(out, key=lambda r: (r["workload"], r["backend"]))


def data_changes(recs: list[dict]) -> list[str]:
    """One line per workload whose cells of one run read different data: two checksums of the
    data file (it was replaced between cells), or one data file and two cut digests (a cell
    trained on other arrays than the file's cut), naming the cells of each digest."""
    files: dict[str, dict[str, list[str]]] = {}
    cuts: dict[tuple[str, str], dict[str, list[str]]] = {}
    for r in recs:
        man = r.get("manifest")
        man = man if isinstance(man, dict) else {}
        digest, cut = man.get("data_checksum"), man.get("data_cut_digest")
        name = f"{r.get('backend')}" + (f" r{_round(r)}" if _round(r) else "")
        if isinstance(digest, str) and digest:
            files.setdefault(str(r.get("workload")), {}).setdefault(digest, []).append(name)
            if isinstance(cut, str) and cut:
                key = (str(r.get("workload")), digest)
                cuts.setdefault(key, {}).setdefault(cut, []).append(name)
    lines = [
        f"the data of {w} changed during the run: {len(by)} checksums ("
        + "; ".join(f"{d[:19]}: {', '.join(sorted(b))}" for d, b in sorted(by.items()))
        + "); compare these cells with care or rerun the run on one copy of the data"
        for w, by in sorted(files.items())
        if len(by) > 1
    ]
    lines += [
        f"the cells of {w} read different cuts of one data file: {len(by)} cut digests ("
        + "; ".join(f"{d[:19]}: {', '.join(sorted(b))}" for d, b in sorted(by.items()))
        + "); compare these cells with care or rerun them"
        for (w, _), by in sorted(cuts.items())
        if len(by) > 1
    ]
    return lines


def _round(rec: dict) -> int:
    """A record's round (0 where it names none)."""
    for where in (rec.get("point"), rec.get("config")):
        if isinstance(where, dict) and isinstance(where.get("round"), int):
            return where["round"]
    return 0


def migrate(rec: dict) -> dict:
    """A record of an older schema (:data:`MIGRATES`) in the current one, the one place old
    records are read differently: its ``spec`` facts computed from the spec as this install has
    it (marked ``spec.derived``: the old record did not state them), the cold start's parts
    derived from its total, and its flags' codes read from their texts. A current record is
    returned as it is."""
    if rec.get("schema_version") not in MIGRATES:
        return rec
    out = dict(rec)
    out["schema_version"] = SCHEMA_VERSION
    out["migrated_from"] = rec.get("schema_version")
    clocks = dict(rec["clocks"]) if isinstance(rec.get("clocks"), dict) else None
    if clocks is not None:
        cold, ib, imp = (clocks.get(k) for k in ("cold_start_s", "import_build_s", "import_s"))
        if _number(cold) and _number(ib) and "first_step_s" not in clocks:
            clocks["first_step_s"] = cold - ib
        if _number(ib) and _number(imp) and "build_s" not in clocks:
            clocks["build_s"] = ib - imp
        out["clocks"] = clocks
    flags = rec.get("flags") if isinstance(rec.get("flags"), list) else []
    out["flag_codes"] = [_flag_code(str(f)) for f in flags]
    if "spec" not in rec:
        spec = _spec_of(rec)
        out["spec"] = spec and {**spec, "derived": "from the spec as this install has it"}
    return out


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _flag_code(text: str) -> str:
    return next((code for prefix, code in _FLAG_PREFIXES if text.startswith(prefix)), "other")


def _spec_of(rec: dict) -> dict | None:
    """The spec facts of a record's cell from the spec as this install has it (None where it
    cannot say): for a record written without them (a cell that never ran, an older record)."""
    from rosetta.spec import get_workload
    from rosetta.spec.facts import spec_facts

    try:
        w = get_workload(rec["workload"])
        prof = w.profile(rec["profile"])
        manifest = rec.get("manifest") if isinstance(rec.get("manifest"), dict) else {}
        shape = manifest.get("input_shape")
        if isinstance(shape, list) and len(shape) == 3 and shape[1:] != list(w.input.shape[1:]):
            w = w.at_image_size(int(shape[1]))
        pt = rec.get("point") if isinstance(rec.get("point"), dict) else {}
        cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
        batch = pt.get("batch_size") or cfg.get("batch_size") or prof.batch_size
        precision = pt.get("precision") or cfg.get("precision") or "fp32"
        facts = spec_facts(w, prof.batch_size, int(batch), str(precision))
    except Exception:  # noqa: BLE001 - a spec or profile this install lacks: no facts
        return None
    return facts
