"""The plan of one ``rosetta bench``: every option checked once, into one frozen value.

``rosetta bench`` hands the options as typed (:class:`BenchOptions`, strings for the lists and
numbers) to :meth:`Plan.from_options`, which checks each of them here and nowhere else (one line
naming the option and its valid values, before anything runs), resolves what the driver owns
(the run id and folders, the data folder, the data each workload reads) and returns a frozen
:class:`Plan` that the matrix runs. The spellings are decided here once: ``--threads all`` is
``None`` from here on (every usable core; each cell records the number in effect), a batch size of
``None`` is the profile's. ``--device auto`` stays a request: each cell resolves it in its own
process, first; the plan only says what it means on the driver's machine (the banner's words).

Bounds, each with its reason: ``--repeat`` at most :data:`MAX_REPEAT` rounds, the whole run at
most :data:`MAX_CELLS` cells and its timing rounds at most an hour (:data:`MAX_TIMING_S`; or
as long as its training runs) by the profile's estimate, unless ``--allow-large-run`` (an
interrupted run writes a record per unstarted cell; a run that large is a typo more often than a
plan), never beyond
:data:`HARD_MAX_CELLS`; ``--wait-quiet`` 0 to :data:`MAX_WAIT_QUIET_S` s; ``--timeout``
:data:`MIN_TIMEOUT_S` s to :data:`MAX_TIMEOUT_S` s; ``--sample-every`` 1 to
:data:`MAX_SAMPLE_EVERY`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from rosetta import backends
from rosetta.backends import options
from rosetta.errors import RosettaError
from rosetta.runner.config import CellConfig
from rosetta.runtime import DEVICES, DTYPES, PRECISIONS, Runtime

#: how each cell is run locally (``rosetta.runner.matrix.EXECUTORS``), and Ray on top of them
LOCAL_EXECUTORS = ("papermill", "python")
#: the lanes a cell can run in: Rosetta's fast path, and each framework's own plain defaults
LANES = ("fast", "default")
MAX_REPEAT = 100  # rounds (issue 33: --repeat 100000 spent 9 minutes writing records)
MAX_TIMING_S = 3600.0  # the timing rounds' estimate, unless the training runs take longer
MAX_CELLS = 2000  # cells of one run, rounds included (smoke: 44 x 6 = 264, sweep: 44 x 6)
HARD_MAX_CELLS = 1_000_000  # even with --allow-large-run
MAX_WAIT_QUIET_S = 3600.0
MAX_RAY_TIMEOUT_S = 3600.0  # --ray-timeout: reaching a cluster
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1.0, 7 * 24 * 3600.0
MAX_SAMPLE_EVERY = 10_000
MAX_SEED = 2**32 - 1
MAX_CELLS_PER_NODE = 1024


@dataclass(frozen=True)
class BenchOptions:
    """The options of ``rosetta bench`` as the user typed them (``None``: not given)."""

    backends: str = "all"
    workloads: str = "all"
    profile: str = "smoke"
    run_id: str | None = None
    resume: str | None = None
    retry_failed: bool = False
    results_dir: str | None = None
    report_dir: str | None = None
    no_report: bool = False
    data_dir: str | None = None
    dtype: str = "float32"
    precisions: str | None = None
    batch_sizes: str | None = None
    repeat: str | None = None
    allow_large_run: bool = False
    wait_quiet: str = "0"
    tf32: bool = False
    device: str = "auto"
    seed: str = "0"
    threads: str | None = None
    oversubscribe: bool = False
    gate_every_point: bool = False
    sample_every: str | None = None
    timeout: str = "1800"
    memory_limit_mb: str | None = None
    executor: str = "papermill"
    ray_address: str | None = None
    cells_per_node: str = "1"
    ray_cell_executor: str = "papermill"
    ray_timeout: str = "30"
    options: tuple[str, ...] = ()  # --option BACKEND.NAME=VALUE (and the older flags' spellings)
    lanes: str = "fast"  # comma list of LANES
    dry_run: bool = False  # check and plan only: no data made, no folder created, nothing run

    @classmethod
    def from_namespace(cls, ns) -> BenchOptions:
        """The options from an ``argparse.Namespace`` (its other attributes ignored)."""
        return cls(**{f.name: getattr(ns, f.name) for f in fields(cls) if hasattr(ns, f.name)})


@dataclass(frozen=True)
class Plan:
    """What one ``rosetta bench`` runs: the cells and how each is run."""

    backends: tuple[str, ...]
    workloads: tuple[str, ...]
    template: CellConfig  # profile, dtype, device, seed, threads...; backend/workload filled in
    timeout_s: float = 1800.0
    retry_failed: bool = False
    memory_limit_mb: int | None = None  # address-space limit of each cell's processes
    executor: str = "papermill"
    data_sources: dict | None = None  # workload -> official | user-provided | synthetic | ...
    batch_sizes: tuple[int | None, ...] = (None,)  # axes: None = the profile's batch size
    precisions: tuple[str, ...] = ("fp32",)
    threads: tuple[int | None, ...] = (None,)  # None: all usable cores
    repeat: int = 1  # rounds, each cell once per round in a fresh process: 0 training, then timing
    timing_steps: int = 3  # a timing round's timed steps (rosetta.runner.profiles)
    timing_warmup: int = 1  # a timing round's untimed steps after its cold first one
    skip_points: tuple[dict, ...] = ()  # points of the product left out (a profile's grid)
    gate_once: bool = True  # gate each function once per run (CellConfig.gate_identity)
    ray: object | None = None  # a ray_executor.RayOptions: the cells run as tasks on a Ray cluster
    # -- what the driver owns (from_options fills them; a plan made by hand may leave them) --
    bench_profile: str = ""  # the --profile name (``template.profile`` is its spec profile)
    run_id: str = ""
    results_dir: Path | None = None
    resuming: bool = False  # the run folder exists: run what is missing
    report_dir: Path | None = None  # None: no HTML report
    wait_quiet_s: float = 0.0
    oversubscribe: bool = False
    device_here: str = ""  # what --device means on the driver's machine (the banner's words)
    pins: dict = field(default_factory=dict)  # extra run.json pins (oversubscribe...)
    dry_run: bool = False  # planned only (``rosetta bench --dry-run``): its data is not checked
    #: backend -> its framework settings asked for (``rosetta.backends.options``), per cell
    options: dict = field(default_factory=dict)
    #: the lanes each cell runs in (LANES): "fast" (Rosetta's fast path), "default" (each
    #: framework's own plain defaults, where its package declares them in LANES)
    lanes: tuple[str, ...] = ("fast",)

    def lane_options(self, backend: str, lane: str) -> dict | None:
        """The options a cell of ``backend`` runs with in ``lane``, or None where the backend
        has no such lane (its plain defaults are its fast path: nothing to run twice)."""
        asked = dict(self.options.get(backend, {}))
        if lane == "fast":
            return asked
        if not _has_lane(backend, lane):
            return None
        return {**asked, **backends.constant(backend, "LANES")[lane]}

    @classmethod
    def from_options(cls, opts: BenchOptions) -> Plan:
        """The plan of ``opts`` in its two steps: :meth:`parse` (every option checked, nothing
        touched), then, unless it is a dry run, :meth:`prepare` (the data sets verified or
        synthesised). What runs when, the schedule, is ``rosetta.runner.matrix.round_cells``;
        the machine's peaks are probed when the run starts (``rosetta.runner.launch``)."""
        plan = cls.parse(opts)
        return plan if opts.dry_run else plan.prepare(opts.data_dir)

    def prepare(self, data_dir: str | None) -> Plan:
        """This plan with its data ready: each workload's data set verified in the data folder
        (``--data-dir`` as given; the default folder is synthesised into) and its source noted."""
        folder, sources = _ensure_data(list(self.workloads), data_dir)
        return replace(self, template=replace(self.template, data_dir=folder), data_sources=sources)

    @classmethod
    def parse(cls, opts: BenchOptions) -> Plan:
        """Check every option once (one line each, naming the option and its valid values) and
        return the plan, its data folder resolved but neither read nor filled."""
        from rosetta.runner.guards import (
            MAX_ADDRESS_SPACE,
            check_memory_limit,
            check_model_memory,
            check_report_dir,
            parse_threads,
        )
        from rosetta.runner.profiles import bench_profile, check_batch_size
        from rosetta.runner.rundir import (
            check_results_dir,
            check_run_id,
            default_report_dir,
            default_results_dir,
            new_run_id,
        )
        from rosetta.spec import get_workload, workload_names

        backend_list = _select(opts.backends, backends.names(), "backend")
        workload_list = _select(opts.workloads, workload_names(), "workload")
        if opts.workloads == "all":
            workload_list = _loadable(workload_list)
        prof = bench_profile(opts.profile)
        dtype = _choice("--dtype", opts.dtype, DTYPES)
        device = _choice("--device", opts.device, DEVICES)
        device_here = _device_here(device, opts.tf32)
        declared = {b: backends.constant(b, "OPTIONS", ()) for b in backends.names()}
        framework = options.parse(opts.options, declared)  # each checked by its backend
        seed = _integer("--seed", opts.seed, 0, MAX_SEED)
        batch_sizes = (
            prof.batch_sizes if opts.batch_sizes is None else _batch_list(opts.batch_sizes)
        )
        precisions = prof.precisions if opts.precisions is None else _precisions(opts.precisions)
        threads = (
            prof.threads
            if opts.threads is None
            else parse_threads(opts.threads, opts.oversubscribe)
        )
        for w in workload_list:
            spec = get_workload(w)
            for b in batch_sizes:
                if b is not None:
                    check_batch_size(spec, spec.profile(prof.spec_profile), b)
        # device, dtype and TF32 together (the request every cell will make, less its point)
        Runtime.request("bench", device=device, dtype=dtype, tf32=opts.tf32, seed=seed)
        repeat = prof.repeat if opts.repeat is None else _integer("--repeat", opts.repeat, 1, None)
        skip_points = (
            prof.skip_points
            if opts.batch_sizes is None and opts.precisions is None and opts.threads is None
            else ()
        )  # the profile's grid holds while it chooses every axis; an axis given runs the product
        lanes = tuple(_select(opts.lanes, list(LANES), "lane"))
        functions = len(workload_list) * sum(
            1 for lane in lanes for b in backend_list if _has_lane(b, lane)
        )  # each backend once per lane it has
        per_round = _cells_per_round(functions, batch_sizes, precisions, threads, skip_points)
        _check_size(repeat, per_round, prof, opts.allow_large_run)
        wait_quiet = _seconds("--wait-quiet", opts.wait_quiet, 0.0, MAX_WAIT_QUIET_S)
        timeout = _seconds("--timeout", opts.timeout, MIN_TIMEOUT_S, MAX_TIMEOUT_S)
        sample_every = (
            None
            if opts.sample_every is None
            else _integer("--sample-every", opts.sample_every, 1, MAX_SAMPLE_EVERY)
        )
        memory_mb = None
        if opts.memory_limit_mb is not None:
            memory_mb = _integer(
                "--memory-limit-mb", opts.memory_limit_mb, 64, MAX_ADDRESS_SPACE // 2**20
            )
            check_memory_limit(memory_mb)
        for w in workload_list:
            check_model_memory(get_workload(w), dtype)
        report_dir = (
            None if opts.no_report else check_report_dir(_path(opts.report_dir, "--report-dir")
                                                         or default_report_dir())
        )  # fmt: skip
        executor = _choice("--executor", opts.executor, (*LOCAL_EXECUTORS, "ray"))
        cell_executor = _choice("--ray-cell-executor", opts.ray_cell_executor, LOCAL_EXECUTORS)
        ray = _ray_options(opts, executor)
        if opts.resume and opts.run_id and opts.resume != opts.run_id:
            raise RosettaError("give either --run-id or --resume, not two different ids")
        results_dir = check_results_dir(
            _path(opts.results_dir, "--results-dir") or default_results_dir()
        )
        run_id = check_run_id(opts.resume or opts.run_id or new_run_id())
        resuming = bool(opts.resume) or (results_dir / run_id).is_dir()
        if opts.resume and not (results_dir / run_id).is_dir():
            raise RosettaError(f"no run {run_id!r} in {results_dir} to resume")
        data_dir, data_sources = _planned_data(opts.data_dir)
        template = CellConfig(
            backend="",
            workload="",
            profile=prof.spec_profile,
            data_dir=data_dir,  # resolved once, here: every cell reads this folder
            dtype=dtype,
            device=device,  # a request: each cell resolves ``auto`` first, in its own process
            seed=seed,
            tf32=opts.tf32,
            sample_every=sample_every,  # None: each cell decides from its resolved device
        )
        pins = {"data_dir": opts.data_dir and str(Path(opts.data_dir).absolute())}
        if opts.oversubscribe:
            pins["oversubscribe"] = True
        if opts.gate_every_point:
            pins["gate_every_point"] = True
        return cls(
            tuple(backend_list),
            tuple(workload_list),
            template,
            timeout_s=timeout,
            retry_failed=opts.retry_failed,
            memory_limit_mb=memory_mb,
            executor=cell_executor if executor == "ray" else executor,
            data_sources=data_sources,
            batch_sizes=tuple(batch_sizes),
            precisions=tuple(precisions),
            threads=tuple(threads),
            repeat=repeat,
            timing_steps=prof.timing_steps,
            timing_warmup=prof.timing_warmup,
            skip_points=tuple(skip_points),
            gate_once=not opts.gate_every_point,
            ray=ray,
            bench_profile=opts.profile,
            run_id=run_id,
            results_dir=results_dir,
            resuming=resuming,
            report_dir=report_dir,
            wait_quiet_s=wait_quiet,
            oversubscribe=opts.oversubscribe,
            device_here=device_here,
            pins=pins,
            dry_run=opts.dry_run,
            options=framework,
            lanes=lanes,
        )

    def pinned(self) -> dict:
        """The configuration ``run.json`` stores once (a resume must match it): the template
        less its per-cell fields, the selection, the axes and the extra pins."""
        per_cell = ("backend", "workload", "batch_size", "precision", "round", "gate_from",
                    "data_dir", "options", "lane")  # fmt: skip
        out = {k: v for k, v in self.template.as_dict().items() if k not in per_cell}
        out.update(backends=list(self.backends), workloads=list(self.workloads),
                   bench_profile=self.bench_profile,
                   executor="ray" if self.ray is not None else self.executor,
                   batch_sizes=list(self.batch_sizes), precisions=list(self.precisions),
                   threads=list(self.threads), repeat=self.repeat,
                   skip_points=list(self.skip_points),
                   options={b: dict(v) for b, v in sorted(self.options.items())},
                   lanes=list(self.lanes))  # fmt: skip
        if self.repeat > 1:  # rounds 1.. are timing rounds of this length (a resume must match)
            out["timing"] = {"warmup": self.timing_warmup, "steps": self.timing_steps}
        out.update(self.pins)
        return out

    def banner(self, path: Path) -> str:
        """The start line: the run, the profile, dtype on the device (what ``auto`` means on
        this machine), the axes and where the records go."""
        verb = "resuming" if self.resuming else "run"
        chosen = ", ".join(
            f"{b}.{k}={v}" for b, kv in sorted(self.options.items()) for k, v in sorted(kv.items())
        )
        return (
            f"{verb} {self.run_id}: profile {self.bench_profile}, {self.template.dtype} on "
            f"{self.device_here or self.template.device}, {self.axes_text()}, "
            + (f"options {chosen}, " if chosen else "")
            + (f"lanes {', '.join(self.lanes)}, " if self.lanes != ("fast",) else "")
            + f"{self.estimate_text()}, records in {path}"
        )

    def estimate_text(self) -> str:
        """``about 12 min by the profile's estimate (2-core CPU reference machine)``; the
        ``ci`` profile's figure beside it when another profile runs."""
        def minutes(s: float) -> str:
            return f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"

        text = f"about {minutes(self.estimate_s())} by the profile's estimate (2-core CPU)"
        if self.bench_profile and self.bench_profile != "ci":
            ci = replace(self, bench_profile="ci", repeat=1, batch_sizes=(None,),
                         precisions=("fp32",), threads=(None,), skip_points=())  # fmt: skip
            text += f"; --profile ci: about {minutes(ci.estimate_s())}"
        return text

    def estimate_s(self) -> float:
        """Rough seconds the whole run takes on the 2-core reference machine: the bench
        profile's seconds per training run and per timing round (``rosetta.runner.profiles``)
        times the cells of each kind; a resumed run counts every cell (the estimate of the
        whole, not of what is left)."""
        from rosetta.runner.profiles import bench_profile

        prof = bench_profile(self.bench_profile or "ci")
        functions = len(self.workloads) * sum(
            1 for lane in self.lanes for b in self.backends if _has_lane(b, lane)
        )
        per_round = _cells_per_round(
            functions, self.batch_sizes, self.precisions, self.threads, self.skip_points
        )
        return per_round * (prof.cell_s + max(self.repeat - 1, 0) * prof.timing_cell_s)

    def axes_text(self) -> str:
        """``batch 16,64 x fp32,bf16 x threads 1,all x 2 rounds`` (the profile's batch:
        ``spec``)."""

        def show(values, none):
            return ",".join(none if v is None else str(v) for v in values)

        def point(p: dict) -> str:  # {"precision": "bf16", "threads": 1} -> "bf16 threads 1"
            names = {"batch_size": "batch ", "precision": "", "threads": "threads "}
            return " ".join(f"{names[k]}{'all' if v is None else v}" for k, v in p.items())

        skip = [point(p) for p in self.skip_points]
        skips = f" (without {', '.join(skip)})" if skip else ""
        return (
            f"batch {show(self.batch_sizes, 'spec')} x {show(self.precisions, '')} x "
            f"threads {show(self.threads, 'all')}{skips} x {self.rounds_text()}"
        )

    def rounds_text(self) -> str:
        """``1 round (the training run)`` or ``6 rounds (the training run + 5 timing rounds of
        1 warm-up + 3 timed steps)``."""
        if self.repeat <= 1:
            return "1 round (the training run)"
        n = self.repeat - 1
        return (
            f"{self.repeat} rounds (the training run + {n} timing round{'s' if n > 1 else ''} "
            f"of {self.timing_warmup} warm-up + {self.timing_steps} timed steps)"
        )


# -- the checks, one per kind of option ----------------------------------------------------------


def _has_lane(backend: str, lane: str) -> bool:
    """Whether ``backend`` runs in ``lane``: every backend in "fast", one that declares how to
    run as its framework comes (its package's ``LANES``) in the others."""
    return lane == "fast" or lane in (backends.constant(backend, "LANES") or {})


def _select(arg: str, valid: list[str], what: str) -> list[str]:
    if arg == "all":
        return valid
    chosen = list(dict.fromkeys(s.strip() for s in arg.split(",") if s.strip()))
    bad = [c for c in chosen if c not in valid]
    if bad or not chosen:
        raise RosettaError(
            f"--{what}s: unknown {what} {bad[0] if bad else arg!r}; valid: {', '.join(valid)}"
        )
    return chosen


def _loadable(names: list[str]) -> list[str]:
    """The workloads of ``--workloads all`` whose specs load; a broken spec is one warning line
    and does not stop the others (as in ``rosetta list``)."""
    from rosetta.errors import SpecError
    from rosetta.safetext import plain
    from rosetta.spec import get_workload, models_dir

    good = []
    for name in names:
        try:
            get_workload(name)
            good.append(name)
        except SpecError as exc:
            print(f"rosetta: warning: broken spec skipped: {plain(str(exc))}", file=sys.stderr)
    if not good:
        raise RosettaError(f"no loadable workload spec in {models_dir()}; see the lines above")
    return good


def _choice(option: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise RosettaError(f"{option} {value[:40]!r}: valid: {', '.join(valid)}")
    return value


def _integer(option: str, text: str, low: int, high: int | None) -> int:
    span = f"an integer >= {low}" + (f" and <= {high}" if high is not None else "")
    try:
        v = int(str(text).strip())
    except ValueError:
        bad = f"{option}: expected an integer, got {str(text)[:30]!r}; give {span}"
        raise RosettaError(bad) from None
    if v < low or (high is not None and v > high):
        raise RosettaError(f"{option}: must be {span}, got {str(text)[:30]}")
    return v


def _seconds(option: str, text: str, low: float, high: float) -> float:
    span = f"a number of seconds from {low:g} to {high:g}"
    try:
        v = float(str(text).strip())
    except ValueError:
        raise RosettaError(f"{option}: expected {span}, got {str(text)[:30]!r}") from None
    if not (math.isfinite(v) and low <= v <= high):
        raise RosettaError(f"{option} {str(text)[:30]}: out of bounds; give {span}")
    return v


def _path(text: str | None, option: str) -> Path | None:
    if text is None:
        return None
    if not text.strip():
        raise RosettaError(f"{option}: an empty path; name a folder")
    return Path(text)


def _batch_list(text: str) -> tuple[int, ...]:
    """``--batch-sizes``: a comma list of positive integers (one line naming a bad one)."""
    if not text.strip():
        raise RosettaError(
            "--batch-sizes '': no batch size given; give positive integers, e.g. 1,16,64, or "
            "leave the option out for the profile's"
        )
    out = []
    for item in (t.strip() for t in text.split(",")):
        try:
            v = int(item)
        except ValueError:
            raise RosettaError(
                f"--batch-sizes {item[:30]!r}: not an integer; give positive integers, e.g. 1,16,64"
            ) from None
        if v < 1:
            raise RosettaError(f"--batch-sizes {v}: a batch needs at least 1 sample; e.g. 1,16,64")
        out.append(v)
    return tuple(dict.fromkeys(out))


def _precisions(text: str) -> tuple[str, ...]:
    """``--precisions``: a comma list of known policy names (one line naming a bad one)."""
    names = [t.strip() for t in text.split(",")]
    if not text.strip() or not all(names):
        raise RosettaError(
            f"--precisions {text[:30]!r}: an empty name; give a comma list of "
            f"{', '.join(PRECISIONS)}, or leave the option out for the profile's"
        )
    bad = [n for n in names if n not in PRECISIONS]
    if bad:
        raise RosettaError(
            f"--precisions: unknown precision {bad[0][:30]!r}; valid: {', '.join(PRECISIONS)}"
        )
    return tuple(dict.fromkeys(names))


def _planned_data(data_dir: str | None) -> tuple[str, dict[str, str]]:
    """The data folder a dry run would hand its cells, resolved but neither read nor filled."""
    from rosetta.datasets.paths import resolve_data_dir

    if data_dir is not None and not data_dir.strip():
        raise RosettaError("--data-dir: an empty path; name a folder")
    return str(resolve_data_dir(data_dir)), {}


def _device_here(device: str, tf32: bool) -> str:
    """What ``--device`` means on this machine, for the banner; ``cuda`` (or ``--tf32``) where
    no GPU is visible is refused here, up front, instead of failing every cell."""
    from rosetta.runner.guards import cuda_visible

    if device == "cpu":
        if tf32:
            raise RosettaError("--tf32 applies to CUDA only; drop it or use --device cuda/auto")
        return "cpu"
    visible, what = cuda_visible()
    if tf32 and not visible:
        raise RosettaError(
            f"--tf32 applies to CUDA only, and no CUDA GPU is here ({what}); drop it"
        )
    if device == "cuda":
        if not visible:
            raise RosettaError(f"--device cuda: no CUDA GPU here ({what}); valid here: cpu, auto")
        return f"cuda ({what})"
    if visible:
        return f"cuda where the backend runs on CUDA ({what}; --device auto)"
    return f"cpu (--device auto: {what})"


def _cells_per_round(functions: int, batch_sizes, precisions, threads, skip_points) -> int:
    """Cells of one round: every backend x workload at every point less the skipped ones."""
    from itertools import product

    points = [
        {"batch_size": b, "precision": p, "threads": t}
        for b, p, t in product(batch_sizes, precisions, threads)
    ]
    kept = [pt for pt in points if not any(all(pt[k] == v for k, v in s.items())
                                           for s in skip_points)]  # fmt: skip
    return functions * len(kept)


def _check_size(repeat: int, per_round: int, prof, allow_large: bool) -> None:
    """Bound the run up front: ``--repeat`` and the whole count of cells, and the timing rounds'
    time, each refusal one line with the estimate (the profile's rough seconds per training run
    and per timing round); ``--allow-large-run`` lifts the soft bounds."""
    total = repeat * per_round
    train_s, timing_s = per_round * prof.cell_s, (repeat - 1) * per_round * prof.timing_cell_s
    hours = (train_s + timing_s) / 3600
    runs, rounds = per_round, (repeat - 1) * per_round
    estimate = (
        f"{total:,} cells, about {hours:,.1f} h ({runs:,} training run{'s' * (runs != 1)} at "
        f"~{prof.cell_s:g} s and {rounds:,} timing round{'s' * (rounds != 1)} at "
        f"~{prof.timing_cell_s:g} s a cell, {prof.name})"
    )
    if total > HARD_MAX_CELLS:
        raise RosettaError(
            f"--repeat {repeat}: {estimate}, beyond the hard bound of {HARD_MAX_CELLS:,} cells; "
            f"valid: --repeat 1..{max(1, HARD_MAX_CELLS // max(per_round, 1))}"
        )
    if allow_large:
        return
    if repeat > MAX_REPEAT or total > MAX_CELLS:
        most = max(1, min(MAX_REPEAT, MAX_CELLS // max(per_round, 1)))
        raise RosettaError(
            f"--repeat {repeat}: {estimate}, over the bound of {MAX_REPEAT} rounds and "
            f"{MAX_CELLS:,} cells; valid: --repeat 1..{most} (fewer axes for more), or add "
            "--allow-large-run"
        )
    budget = max(MAX_TIMING_S, train_s)  # the rounds may take as long as the training runs
    if timing_s > budget:
        most = 1 + int(budget // max(per_round * prof.timing_cell_s, 1e-9))
        raise RosettaError(
            f"--repeat {repeat}: {estimate}; the timing rounds alone would run "
            f"{timing_s / 3600:,.1f} h, over the bound of {budget / 3600:,.1f} h; valid: --repeat "
            f"1..{most}, or add --allow-large-run"
        )


def _ray_options(opts: BenchOptions, executor: str):
    """The Ray options of ``--executor ray`` (``None`` for a local run); Ray-only flags given
    without it are one line."""
    per_node = _integer("--cells-per-node", opts.cells_per_node, 1, MAX_CELLS_PER_NODE)
    timeout = _seconds("--ray-timeout", opts.ray_timeout, 1.0, MAX_RAY_TIMEOUT_S)
    if executor != "ray":
        if opts.ray_address or per_node != 1 or opts.ray_timeout != BenchOptions.ray_timeout:
            raise RosettaError(
                "--ray-address, --cells-per-node and --ray-timeout need --executor ray"
            )
        return None
    from rosetta.runner.ray_executor import RayOptions, available

    ok, why = available()
    if not ok:
        raise RosettaError(f"--executor ray: Ray is {why}")
    return RayOptions(address=opts.ray_address, cells_per_node=per_node, timeout_s=timeout)


def _ensure_data(workload_list: list[str], data_dir: str | None) -> tuple[str, dict[str, str]]:
    """Resolve the data folder once (``--data-dir``, else ``$ROSETTA_DATA_DIR``, else the
    package's ``data/``), verify each data set there (synthesising only in the default folder)
    and print its source; returns the folder, absolute, and ``{workload: data source}``."""
    from rosetta.datasets import prepare_data
    from rosetta.datasets.paths import resolve_data_dir
    from rosetta.spec import get_workload

    if data_dir is not None and not data_dir.strip():
        raise RosettaError("--data-dir: an empty path; name a folder")
    names = {w: get_workload(w).dataset.name for w in workload_list}
    sources = prepare_data(list(names.values()), data_dir)
    return str(resolve_data_dir(data_dir)), {w: sources[d] for w, d in names.items()}
