"""The matrix: every (workload, backend) cell in its own process, each leaving exactly one record.

The matrix owns the run: the cells and their order (``round_orders``, stored in ``run.json``;
round 0 is every cell's training run, later rounds are timing rounds: ``round_kind``),
what is kept or skipped, which gate verdict a cell may reuse, which cell measures batch-1 latency,
the index and every record. An executor (:mod:`rosetta.runner.executors`: a local process, the
papermill kernel, or :mod:`rosetta.runner.ray_executor`) only transports a cell and returns its
record. A cell that crashes, hangs past its timeout, is killed by the OS, or whose backend is not
installed still gets a record (``failed``, ``timeout``, ``killed``, ``skipped``) with a one-line
reason; Ctrl-C, SIGTERM and SIGHUP record the running cells (``interrupted`` by what stopped
them) and every cell not yet started (one pass, one manifest) and write the index.

Resuming runs only what is missing (and ``interrupted`` cells); ``retry_failed`` also reruns
failed, timed-out and killed cells, whose old records move to ``attempts/``. A kept record must be
the cell's own: its key and configuration match the run's pins, or it moves to ``attempts/`` and
the cell runs again.

The gate runs once per function and run: a cell whose ``CellConfig.gate_identity`` already
passed in this run (another batch size, thread count or round of the same backend, workload,
dtype and precision) reuses that verdict, and its record names the cell it came from
(``equivalence.reused_from``); ``Plan.gate_once=False`` (``--gate-every-point``) gates every cell.
The verdict is bound to its source: the driver reads the source record once, keeps its sha256 in
the index (``sha256``), and hands the cell the path *and* the digest; a source whose bytes no
longer match (rewritten mid-run or before ``--resume``) is not reused: the cell gates itself and
says so in a flag. While the first cell of a function runs, the other cells of that function
wait (an executor with several slots runs other functions meanwhile). Batch-1 latency is
measured once per function and thread count (``latency_cells``), on every executor.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import sys
from contextlib import ExitStack
from dataclasses import fields, replace
from pathlib import Path

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.data import DATA_CACHE
from rosetta.runner.executors import EXECUTORS, CellProcess, Executor, Finished, LocalExecutor
from rosetta.runner.manifest import environment
from rosetta.runner.papercell import failure_record
from rosetta.runner.plan import Plan
from rosetta.runner.ray_executor import RayExecutor
from rosetta.runner.rundir import RunDir
from rosetta.runner.signals import describe, ignore_signals, interrupt_on_signals

__all__ = ["EXECUTORS", "Display", "Plan", "cell_label", "latency_cells", "round_cells",
           "round_kind", "round_orders", "run_matrix"]  # fmt: skip

POLL_S = 0.5
#: configuration fields a kept record must share with the cell it is kept for (the rest is
#: bookkeeping: where the record goes, which verdict it reused, whether it timed latency)
KEPT_FIELDS = ("backend", "workload", "profile", "run_id", "data_dir", "dtype", "device", "seed",
               "threads", "precision", "tf32", "sample_every", "batch_size", "round",
               "options", "lane", "kind",
               "timing_steps", "timing_warmup")  # fmt: skip
_CONFIG_DEFAULTS = {f.name: f.default for f in fields(CellConfig)}


class Display:
    """What the matrix tells the user; ``rosetta.runner.progress`` has the rich one."""

    def start(self, label: str) -> None:  # a cell begins
        pass

    def tick(self, label: str, elapsed_s: float) -> None:  # about twice a second while it runs
        pass

    def done(self, label: str, status: str, detail: str) -> None:  # a cell ended (or was kept)
        print(f"  {label}: {status}" + (f" ({detail})" if detail else ""), flush=True)


def round_cells(plan: Plan, round_: int = 0) -> list[CellConfig]:
    """The cells of one round in declared order: workload, backend, then the axes (batch size,
    precision, threads), less the points that match one of ``plan.skip_points`` (each a dict of
    axis values: ``{"precision": "bf16", "threads": 1}``); ``out`` and ``run_id`` are filled in
    by :func:`run_matrix`."""
    cells = [
        replace(
            plan.template,
            backend=b,
            workload=w,
            batch_size=bs,
            precision=prec,
            threads=t,
            round=round_,
            **round_kind(plan, round_),
            data_source=(plan.data_sources or {}).get(w, ""),
            options=options,
            lane=lane,
        )
        for w in plan.workloads
        for b in plan.backends
        for lane in plan.lanes
        if (options := plan.lane_options(b, lane)) is not None
        for bs in plan.batch_sizes
        for prec in plan.precisions
        for t in plan.threads
    ]
    return [c for c in cells if not any(skipped(c, point) for point in plan.skip_points)]


def round_kind(plan: Plan, round_: int) -> dict:
    """What round ``round_`` measures: round 0 is every cell's training run, the later rounds
    are timing rounds of the plan's length (``CellConfig`` kind, timing_steps, timing_warmup)."""
    if round_ == 0:
        return {"kind": "training"}
    return {"kind": "timing", "timing_steps": plan.timing_steps,
            "timing_warmup": plan.timing_warmup}  # fmt: skip


def skipped(config: CellConfig, point: dict) -> bool:
    """Whether ``config`` is the point ``point`` names (every axis value it gives matches)."""
    axes = {"batch_size": config.batch_size, "precision": config.precision,
            "threads": config.threads}  # fmt: skip
    return all(axes[k] == v for k, v in point.items())


def round_orders(plan: Plan) -> list[list[str]]:
    """The cell keys of every round in the order they run. One round keeps the declared order;
    with ``repeat > 1`` each round is shuffled by its own generator, seeded from the run's seed
    and the round number, so that drift of the machine over the run hits every backend alike
    and the order is reproducible from ``run.json``."""
    orders = []
    for r in range(plan.repeat):
        keys = [records.cell_key(c) for c in round_cells(plan, r)]
        if plan.repeat > 1:
            random.Random(f"rosetta-rounds:{plan.template.seed}:{r}").shuffle(keys)
        orders.append(keys)
    return orders


def cell_label(config: CellConfig) -> str:
    """How the display names a cell: ``backend x workload`` and its point when off default."""
    key = records.cell_key(config)
    base = f"{config.backend} x {config.workload}"
    suffix = key.split("__", 2)[2] if key.count("__") >= 2 else ""
    return f"{base} [{suffix}]" if suffix else base


def run_matrix(
    plan: Plan, run: RunDir, display: Display | None = None, before_first=None
) -> dict[str, dict]:
    """Run every cell of ``plan`` not yet recorded in ``run``, round by round, each round in the
    order recorded in ``run.json`` (``round_orders``); returns ``{cell key: index entry}``.
    ``before_first()`` is called once, just before the first cell that really runs (the quiet
    machine check), and not at all when every cell is already recorded."""
    return _Matrix(plan, run, display or Display(), before_first).run()


def make_executor(plan: Plan, display) -> Executor:
    """The executor ``plan`` asks for: local processes, or tasks on a Ray cluster."""
    how = CellProcess(plan.executor, plan.timeout_s, plan.memory_limit_mb)
    if plan.ray is not None:
        return RayExecutor(how, plan.ray, display)
    return LocalExecutor(how, display)


class _CellDisplay:
    """The executor's view of the display: cells by config, not by label."""

    def __init__(self, display: Display):
        self.display = display

    def start(self, config: CellConfig) -> None:
        self.display.start(cell_label(config))

    def tick(self, config: CellConfig, elapsed_s: float) -> None:
        self.display.tick(cell_label(config), elapsed_s)


class _Matrix:
    """One ``run_matrix`` call: its queue, the cells in flight, the verdicts, the index."""

    def __init__(self, plan: Plan, run: RunDir, display: Display, before_first):
        self.plan, self.run_dir, self.display = plan, run, display
        self.hooks = [before_first] if before_first else []
        self.orders = run.round_orders(round_orders(plan))
        cells = (c for r in range(plan.repeat) for c in round_cells(plan, r))
        self.by_key = {records.cell_key(c): c for c in cells}
        self.keys = [k for order in self.orders for k in order]
        self.before = run.read_index()  # the digests of the records as an earlier bench read them
        self.index: dict[str, dict] = {k: {"status": "not run", "error": ""} for k in self.keys}
        self.latency = latency_cells(self.orders, self.by_key)
        self.sources: dict[tuple, tuple[str, str]] = {}  # gate identity -> (record, its sha256)
        self.held: dict[tuple, str] = {}  # gate identity -> its first cell, in flight
        self.in_flight: dict[str, CellConfig] = {}

    def run(self) -> dict[str, dict]:
        run = self.run_dir
        try:
            with ExitStack() as stack:
                executor = stack.enter_context(make_executor(self.plan, _CellDisplay(self.display)))
                try:
                    with interrupt_on_signals():  # after the executor: Ray installs its own
                        self._loop(executor)
                except KeyboardInterrupt as exc:
                    with ignore_signals():  # a second signal must not cut the records short
                        finished, unstarted = executor.interrupt(describe(exc))
                        for done in finished:
                            self._finish(done)
                        for config in unstarted:
                            self.in_flight.pop(records.cell_key(config), None)
                    raise
        except KeyboardInterrupt as exc:
            with ignore_signals():
                self._record_not_started(describe(exc))
                run.write_index(self.index)
            raise
        except RosettaError:  # no cluster, a full disk: the index still names every cell
            with contextlib.suppress(RosettaError):
                run.write_index(self.index)
            raise
        finally:
            shutil.rmtree(run.path / DATA_CACHE, ignore_errors=True)  # decoded data: run-long
        run.write_index(self.index)
        return self.index

    def _loop(self, executor: Executor) -> None:
        queue = list(self.keys)
        while queue or self.in_flight:
            queue = self._dispatch(queue, executor)
            if self.in_flight:
                for done in executor.wait(POLL_S):
                    self._finish(done)

    def _dispatch(self, queue: list[str], executor: Executor) -> list[str]:
        """Settle or submit the cells of ``queue`` that may go now, in order; the rest stays.
        A cell waits while the first cell of its function is in flight (it may reuse that
        verdict); a cell to run waits for a free slot, and so does every cell after it."""
        left = []
        for i, key in enumerate(queue):
            if executor.slots is not None and len(self.in_flight) >= executor.slots:
                return left + queue[i:]  # kept cells too wait their turn: the order is the run's
            config = self._config(key)
            ident = config.gate_identity()
            if self.plan.gate_once and ident in self.held:
                left.append(key)
                continue
            entry = self._settle(config)
            if entry is not None:
                self._learn(key, config, entry)
                continue
            while self.hooks:  # the hooks due before the first cell that runs
                self.hooks.pop()()
            executor.submit(config)
            self.in_flight[key] = config
            if self.plan.gate_once and ident not in self.sources:
                self.held[ident] = key
        return left

    def _config(self, key: str) -> CellConfig:
        """The cell ``key`` as it runs now: its record path, its latency duty, its gate source."""
        config = replace(cell_config(self.run_dir, self.by_key[key]), latency=key in self.latency)
        source = self.sources.get(config.gate_identity()) if self.plan.gate_once else None
        if source:
            config = replace(config, gate_from=source[0], gate_sha256=source[1])
        return config

    def _settle(self, config: CellConfig) -> dict | None:
        """The index entry of a cell that does not run (kept, or skipped here), else ``None``."""
        label, path = cell_label(config), Path(config.out)
        st = backends.status(config.backend)
        why_not = st.reason if not st.usable else config.unsupported()
        if path.exists():
            kept = self._existing(config, not why_not)
            if kept is not None:
                self.display.done(label, kept["status"], "already recorded, kept")
                return kept
        if why_not:
            records.write_record(path, failure_record(config, "skipped", why_not))
            self.display.done(label, "skipped", why_not)
            return {"status": "skipped", "error": why_not, "sha256": _digest(path)}
        return None

    def _existing(self, config: CellConfig, usable: bool) -> dict | None:
        """The index entry of a kept record, or ``None`` after setting it aside to run again."""
        run, path, key = self.run_dir, Path(config.out), records.cell_key(config)
        try:
            rec = records.read_record(path)
        except RosettaError as exc:
            run.set_aside(path, "corrupt")
            print(f"  note: {exc}; moved to attempts/, running the cell again", file=sys.stderr)
            return None
        foreign = _not_this_cell(rec, config)
        if foreign:
            run.set_aside(path, "mismatch")
            print(f"  note: {path} is not this run's {key} ({foreign}); moved to attempts/, "
                  "running the cell again", file=sys.stderr)  # fmt: skip
            return None
        status = rec["status"]
        rerun = status == "interrupted" or (status in records.RETRYABLE and self.plan.retry_failed)
        rerun = rerun or (status == "skipped" and usable)  # installed since: measure it now
        if rerun:
            run.set_aside(path, status)
            return None
        # the digest the run took when it wrote (or first read) the record: a record whose bytes
        # are not those is not this run's verdict (an edited "equivalent": true): set aside, its
        # cell runs again. One the index does not hold (the index write failed, a full disk) is
        # kept with no digest: its verdict is never reused as another cell's gate
        sha = self.before.get(key, {}).get("sha256", "")
        sha = sha if isinstance(sha, str) else ""
        now = _digest(path)
        if sha and now != sha:
            run.set_aside(path, "edited")
            print(f"  note: {path} is changed since the run wrote it (sha256 {now[:12]}, "
                  f"indexed {sha[:12]}); moved to attempts/, running the cell again",
                  file=sys.stderr)  # fmt: skip
            return None
        return _entry(rec, sha)

    def _finish(self, done: Finished) -> None:
        """A cell ended: its record written (if its process wrote none), read, digested, shown."""
        config = done.config
        key, path = records.cell_key(config), Path(config.out)
        self.in_flight.pop(key, None)
        if not path.exists():
            records.write_record(path, done.record)
        sha = _digest(path)
        try:
            rec = records.read_record(path)
        except RosettaError as exc:  # a broken record: failed here, set aside on resume
            rec = failure_record(config, "failed", str(exc))
        entry = _entry(rec, sha)
        status, error = entry["status"], entry["error"]
        detail = error
        if status == "ok":
            c = rec["clocks"]
            eq = "equivalent" if entry["equivalent"] else "NOT EQUIVALENT"
            if config.kind == "timing":
                eq = f"timing round, {eq}"
            if rec["equivalence"].get("reused_from"):
                eq += f" (gate of {rec['equivalence']['reused_from']})"
            detail = f"{eq}, step {c['steady']['median']:.3f} s, {rec.get('wall_s', 0):.0f} s wall"
        if done.where:
            detail = f"on {done.where}" + (f": {detail}" if detail else "")
        self.display.done(cell_label(config), status, detail)
        self._learn(key, config, entry)

    def _learn(self, key: str, config: CellConfig, entry: dict) -> None:
        """Index a settled cell; a passing gate read with its digest becomes its function's
        source; the function's other cells may go."""
        self.index[key] = entry
        self.run_dir.write_index(self.index)
        ident = config.gate_identity()
        if self.held.get(ident) == key:
            del self.held[ident]
        if (self.plan.gate_once and ident not in self.sources and entry.get("equivalent")
                and entry.get("sha256")):  # fmt: skip
            self.sources[ident] = (config.out, entry["sha256"])

    def _record_not_started(self, why: str) -> None:
        """After an interruption every cell that never started gets an ``interrupted`` record (a
        resume runs it), so that no cell of the run exists only in ``index.json``: one pass, one
        manifest shared by every record, one directory sync at the end (a manifest and an fsync
        per record made 300 cells take 17 s). A record lost to a crash just after is a cell
        without a record: a resume runs it all the same."""
        env = environment("cpu")
        resume = f"--resume {self.run_dir.run_id} runs it"
        error = f"not started: the run was interrupted ({why}); {resume}"
        wrote = False
        for key, entry in self.index.items():
            if entry["status"] != "not run" or key not in self.by_key:
                continue
            config = cell_config(self.run_dir, self.by_key[key])
            path = Path(config.out)
            if path.exists():  # a cell that was running: its record says why
                try:
                    rec = records.read_record(path)
                    entry.update(status=rec["status"], error=rec.get("error", ""))
                    continue
                except RosettaError:
                    pass
            entry.update(status="interrupted", error=error)
            if not path.exists():
                rec = failure_record(config, "interrupted", error, environment=env)
                _write_unsynced(path, records.dumps(rec))
                wrote = True
        if wrote:
            _sync_dir(self.run_dir.path)


def cell_config(run: RunDir, config: CellConfig) -> CellConfig:
    """A cell of the plan with its run and record path filled in."""
    return replace(
        config,
        run_id=run.run_id,
        out=str(records.record_path_for(run.path.parent, run.run_id, config)),
    )


def latency_cells(orders: list[list[str]], by_key: dict[str, CellConfig]) -> set[str]:
    """The cells that measure batch-1 latency: in round 0, the first to run of each function
    (``CellConfig.gate_identity``) and thread count. Latency at batch 1 does not depend on the
    timed batch size, so the other batch sizes of that function and thread count skip the loop
    (in a compiling backend it costs a compile of its own as well)."""
    seen, chosen = set(), set()
    for key in (k for order in orders for k in order):
        c = by_key[key]
        point = (c.gate_identity(), c.threads)
        if c.round == 0 and point not in seen:
            seen.add(point)
            chosen.add(key)
    return chosen


def _entry(rec: dict, sha256: str) -> dict:
    """A record's index entry: status, error, flags, verdict, and its digest as the run read it."""
    entry = {"status": rec["status"], "error": rec.get("error", ""), "flags": rec.get("flags", []),
             "sha256": sha256}  # fmt: skip
    if rec["status"] == "ok":
        entry["equivalent"] = bool(rec["equivalence"]["equivalent"])
    return entry


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _not_this_cell(rec: dict, config: CellConfig) -> str:
    """Why a kept record was not made for the cell ``config`` of this run ("" when it was)."""
    made = rec.get("config")
    if not isinstance(made, dict):
        return "it carries no cell configuration"
    want = config.as_dict()
    for field in ("backend", "workload", "profile"):
        if rec.get(field) != want[field]:
            return f"it names {field} {str(rec.get(field))[:40]!r}, not {want[field]!r}"
    for field in KEPT_FIELDS:  # a field newer than the record: the default it ran under
        have = made.get(field, _CONFIG_DEFAULTS.get(field))
        if have != want[field]:
            return f"it was made with {field}={str(have)[:40]!r}, not {want[field]!r}"
    return ""


def _write_unsynced(path: Path, text: str) -> None:
    """Write a new record without an fsync of its own (the caller syncs the folder once);
    atomic and append-only all the same (a temporary file, then a hard link)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as exc:
        raise records.disk_error(path, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
