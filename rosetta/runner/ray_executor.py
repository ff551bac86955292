"""The matrix's cells on a Ray cluster: an executor that transports each cell as a Ray task.

The driver (``rosetta bench --executor ray``) stays the one process that owns the run folder, its
lock, ``run.json``, ``index.json`` and every record; the matrix (:mod:`rosetta.runner.matrix`)
decides what runs, keeps, skips, which verdict a cell reuses and which cell times latency, as for
every executor. :class:`RayExecutor` only submits each cell as one Ray task which, on whatever
node Ray picks, verifies the cell's data set through the dataset registry (a missing or
different data set is a ``failed`` cell naming the node, never a synthetic fallback), then runs
the cell's usual fresh process with the local executor's own code
(:class:`rosetta.runner.executors.Running`: own session, timeout that kills the process tree,
address-space limit, death with its parent), writing into a temporary folder of its own. The
record (a dict) and the executed notebook (bytes) come back by value and the driver writes them
into the run folder: no shared filesystem is assumed. A cell that reuses a verdict gets its
source record's bytes by value too (checked against the digest the driver read).

**One cell per node, by a custom resource.** Every node advertises ``{"rosetta_cell": 1}`` once
(``ray start --resources '{"rosetta_cell": 1}'``; the local instance gets it from ``ray.init``)
and every cell task asks for ``1 / cells_per_node`` of it, with ``num_cpus=0``. A resource says
exactly what it means ("a node's measuring slot"), holds across heterogeneous nodes whatever
their core count, and needs no bookkeeping in the driver. ``--cells-per-node N`` asks for ``1/N``
of the slot, so N cells share a node; each such record is flagged.

**Devices.** ``--device cuda`` cells ask Ray for a GPU. ``auto`` is resolved on the node that
runs the cell, by the cell itself as locally: the task asks for no GPU and leaves the node's GPUs
visible to it (the slot gives the cell the node), so the cell's backend finds CUDA there or not;
the record names the device in effect (``manifest.device``; a cell that died before resolving
it: the node's answer, a GPU it can see and a backend that runs CUDA).

**Faults.** A worker process (or its node) that dies mid-cell is ``killed``, naming the node;
a cell past ``--timeout`` is killed on its node (``timeout``), and the driver force-cancels a
task still alive a grace period later. Ctrl-C, SIGTERM and SIGHUP cancel every outstanding task:
the cells that had started are recorded ``interrupted`` by that signal, the others go back to
the matrix, which records them with every cell not yet submitted. Ray installs its own SIGTERM
handler in ``ray.init`` (it prints a stack dump and exits): the handlers in place before are put
back at once. An unreachable cluster fails within ``--ray-timeout`` seconds with one line. Tasks
are never retried by Ray (``max_retries=0``), so no cell is recorded twice.

The driver's ``ROSETTA_*`` environment variables travel with each task (extra backends, spec
folder, data folder), so the nodes run the same configuration.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.executors import CellProcess, Finished, run_one
from rosetta.runner.papercell import failure_record
from rosetta.runner.signals import SIGNALS, Interrupted

RESOURCE = "rosetta_cell"  # each node advertises 1 of it: its one measuring slot
CANCEL_GRACE_S = 60.0  # after --timeout, the task has this long to kill its cell and answer
INTERRUPT_GRACE_S = 5.0  # after Ctrl-C, cells have this long to stop before a forced cancel
CONNECT_TIMEOUT_S = 30.0  # --ray-timeout's default
POLL_S = 0.5


@dataclass(frozen=True)
class RayOptions:
    """How ``rosetta bench --executor ray`` reaches the cluster and shares its nodes."""

    address: str | None = None  # None: $RAY_ADDRESS, else a local Ray instance started here
    cells_per_node: int = 1  # >1 lets cells share a node (recorded as a flag: noisy timings)
    local_cpus: int | None = None  # cores of a local instance (None: Ray counts them)
    timeout_s: float = CONNECT_TIMEOUT_S  # reaching the cluster takes at most this long


def available() -> tuple[bool, str]:
    """Whether Ray is installed here, and its version or why not (``rosetta list``); looks the
    package up without importing it (importing Ray takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    try:
        if find_spec("ray") is None:
            raise PackageNotFoundError("ray")
        return True, version("ray")
    except (PackageNotFoundError, ValueError):
        return False, "not installed; pip install 'rosetta[ray]'"


class _TooLong(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float):
    """Raise :class:`_TooLong` in this (main) thread after ``seconds`` (SIGALRM)."""

    def expire(signum, frame):
        raise _TooLong

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _probe(address: str, timeout_s: float) -> str:
    """Why ``address`` (``host:port`` or ``ray://host:port``) takes no TCP connection within
    ``timeout_s``, or ``""`` when it does (or is no host:port: Ray resolves it)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return ""
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return ""
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


def connect(options: RayOptions) -> str:
    """Connect to the cluster (or start a local one) within ``options.timeout_s``; returns a
    one-line description of it. The signal handlers in place before are put back afterwards (Ray
    installs its own). Raises ``RosettaError`` (one line) when Ray is missing, the address cannot
    be reached in time or the cluster advertises no ``rosetta_cell`` slot."""
    ok, why = available()
    if not ok:
        raise RosettaError(f"--executor ray: Ray is {why}")
    handlers = {s: signal.getsignal(s) for s in SIGNALS}
    address = options.address or os.environ.get("RAY_ADDRESS") or None
    where = address or "a local instance"
    fix = f"start it with `ray start --head`, or raise --ray-timeout ({options.timeout_s:g} s)"
    t0 = time.monotonic()
    problem = _probe(address, options.timeout_s) if address else ""
    if problem:
        raise RosettaError(f"--executor ray: cannot reach Ray at {where} ({problem}); {fix}")
    import ray

    try:
        with _deadline(max(options.timeout_s - (time.monotonic() - t0), 0.1)):
            if address:
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            else:
                ray.init(num_cpus=options.local_cpus, resources={RESOURCE: 1},
                         include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR")  # fmt: skip
    except KeyboardInterrupt:  # a signal while connecting: every cell gets its record
        _shutdown()
        raise
    except SystemExit as exc:  # SIGTERM to Ray's handler, set while ray.init runs
        _shutdown()
        if exc.code != signal.SIGTERM:
            raise
        raise Interrupted("SIGTERM") from None
    except _TooLong:
        _shutdown()
        raise RosettaError(
            f"--executor ray: no answer from Ray at {where} within {options.timeout_s:g} s; {fix}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - Ray raises many types; all mean "no cluster"
        _shutdown()
        raise RosettaError(
            f"--executor ray: cannot reach Ray at {where} ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); {fix}"
        ) from None
    finally:
        _restore(handlers)  # Ray's SIGTERM handler prints a stack dump: ours record the cells
    total = ray.cluster_resources()
    if total.get(RESOURCE, 0) < 1:
        _shutdown()
        raise RosettaError(
            f"the Ray cluster at {where} advertises no {RESOURCE!r} slot; start every node "
            f"with: ray start ... --resources '{{\"{RESOURCE}\": 1}}'"
        )
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return (
        f"Ray {ray.__version__} at {where}: {len(nodes)} node(s), "
        f"{total.get(RESOURCE, 0):g} cell slot(s), {total.get('GPU', 0):g} GPU(s)"
    )


def _restore(handlers: dict) -> None:
    for s, h in handlers.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)


def _shutdown() -> None:
    import ray

    handlers = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        with _deadline(10.0):
            ray.shutdown()
    except Exception:  # noqa: BLE001 - a half-made connection: nothing more to release
        pass
    finally:
        _restore(handlers)


# -- on the worker ---------------------------------------------------------------------------------
def node_facts(device: str = "cpu") -> dict:
    """This node's manifest: hostname, Ray node, CPU, GPU (when a GPU cell runs), load."""
    import ray

    from rosetta.runner import manifest

    facts = manifest.node_facts(device)
    facts.update(
        ip=ray.util.get_node_ip_address(),
        ray_node_id=ray.get_runtime_context().get_node_id(),
        worker_pid=os.getpid(),
    )
    return facts


def check_worker_data(config: CellConfig) -> str:
    """Verify the cell's data set on this node through the registry (checksums, as locally);
    returns "" when it is there and the same kind the driver verified, else the one-line why.
    Never writes synthetic data: a node without the data set fails the cell."""
    from rosetta.datasets import registry, resolve_data_dir
    from rosetta.spec import get_workload

    name = get_workload(config.workload).dataset.name
    entry = registry.get(name)
    if entry.generated:
        return ""
    folder = resolve_data_dir(config.data_dir)
    path = entry.present(folder)
    if path is None:
        return (
            f"no {entry.title} in {folder} on this node; put the data at the same path on every "
            f"node, or run `rosetta data ...` on each node"
        )
    try:
        source = entry.verify(path).source
    except RosettaError as exc:
        return f"{entry.title} on this node fails verification: {exc}"
    if config.data_source and source != config.data_source:
        return (
            f"this node has {source} {entry.title} in {folder}, the driver verified "
            f"{config.data_source}; give every node the same data set"
        )
    return ""


def node_device(config: CellConfig) -> str:
    """The device a cell resolves to on this node, for a record the cell could not write:
    ``auto`` is CUDA where this node shows a GPU and the backend runs CUDA."""
    if config.device != "auto":
        return config.device
    from rosetta import backends
    from rosetta.runner import manifest

    try:
        import importlib

        devices = importlib.import_module(backends.info(config.backend).module_name).DEVICES
    except Exception:  # noqa: BLE001 - an unknown backend runs nowhere on CUDA
        devices = ("cpu",)
    return "cuda" if "cuda" in devices and manifest.gpu_info().get("gpus") else "cpu"


def run_cell_on_node(
    how: CellProcess, config: CellConfig, board, cells_per_node: int, gate_source: bytes
) -> tuple[dict, bytes]:
    """The Ray task's body: run one cell in a fresh process on this node; returns the record and
    the executed notebook (``b""`` when there is none), both by value."""
    import ray

    from rosetta.runtime import child_env

    facts = node_facts(config.device)
    ray.get(board.started.remote(_key(config), facts))  # known before the cell can die
    tmp = Path(tempfile.mkdtemp(prefix="rosetta-cell-"))
    try:
        local = replace(config, out=str(tmp / Path(config.out).name))
        if config.gate_from:  # the verdict's source, by value, under the digest the driver read
            source = tmp / f"gate-source-{Path(config.gate_from).name}"
            source.write_bytes(gate_source)
            local = replace(local, gate_from=str(source))
        why = check_worker_data(config)
        if why:
            rec = failure_record(config, "failed", why)
        else:
            rec = run_one(how, local, child_env(config.threads))
        notebook = tmp / Path(config.out).with_suffix(".ipynb").name
        nb = notebook.read_bytes() if notebook.exists() else b""
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rec["config"] = config.as_dict()  # the driver's paths, not this node's temporary ones
    man = rec.setdefault("manifest", {})
    man["node"] = facts
    if rec["status"] != "ok":  # an ok cell names what it resolved (manifest.runtime.device)
        man.setdefault("device", node_device(config))
        rec["error"] = f"{rec.get('error', '')} (node {facts['hostname']})"
    if cells_per_node > 1:
        rec.setdefault("flags", []).append(
            f"shared node: up to {cells_per_node} cells ran at once on {facts['hostname']} "
            f"(--cells-per-node {cells_per_node}); timings may be noisy"
        )
    return rec, nb


class _Board:
    """A tiny actor: which cell started on which node, and when (the driver polls it)."""

    def __init__(self) -> None:
        self.cells: dict[str, tuple[dict, float]] = {}

    def started(self, key: str, facts: dict) -> None:
        self.cells[key] = (facts, time.time())

    def snapshot(self) -> dict:
        return dict(self.cells)


# -- on the driver ---------------------------------------------------------------------------------
def _key(config: CellConfig) -> str:
    return records.cell_key(config)


class RayExecutor:
    """Cells as Ray tasks, as many at once as the cluster's cell slots take (the matrix submits
    every cell it may; Ray queues them)."""

    slots = None

    def __init__(self, how: CellProcess, options: RayOptions, display=None):
        self.how, self.options, self.display = how, options, display
        self.pending: dict = {}  # ObjectRef -> config
        self.started: dict[str, tuple[dict, float]] = {}
        self.owned = False
        self.board = self.task = None

    def __enter__(self) -> RayExecutor:
        import ray

        self.owned = not ray.is_initialized()  # a caller's connection (a benchmark) is kept
        if self.owned:
            print(connect(self.options), flush=True)
        self.board = ray.remote(num_cpus=0)(_Board).remote()
        self.task = ray.remote(run_cell_on_node)
        self.env = {k: v for k, v in os.environ.items() if k.startswith("ROSETTA_")}
        return self

    def __exit__(self, *exc) -> None:
        import ray

        for ref in self.pending:  # an error in the matrix: nothing left running
            ray.cancel(ref, force=True)
        with contextlib.suppress(Exception):
            ray.kill(self.board)
        if self.owned:
            _shutdown()

    def submit(self, config: CellConfig) -> None:
        env = dict(self.env)
        gpus = 1 if config.device == "cuda" else 0
        if config.device == "auto":  # resolved on the node: its GPUs stay visible to the cell
            env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
        source = Path(config.gate_from).read_bytes() if config.gate_from else b""
        ref = self.task.options(
            num_cpus=0,
            num_gpus=gpus,
            resources={RESOURCE: 1.0 / self.options.cells_per_node},
            max_retries=0,
            runtime_env={"env_vars": env},
        ).remote(self.how, config, self.board, self.options.cells_per_node, source)
        self.pending[ref] = config

    def wait(self, timeout_s: float) -> list[Finished]:
        import ray

        done, _ = ray.wait(list(self.pending), num_returns=1, timeout=timeout_s)
        if done:  # and whatever else is ready by now
            done, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        self._poll()  # who runs where, read before collecting: a task that died names its node
        return [self._collect(ref, self.pending.pop(ref)) for ref in done]

    def _poll(self) -> None:
        """Tell the display which cells run where; force-cancel a task long past its timeout."""
        import ray

        now = ray.get(self.board.snapshot.remote())
        for ref, config in self.pending.items():
            key = _key(config)
            if key not in now:
                continue
            facts, t0 = now[key]
            if self.display and key not in self.started:
                self.display.start(config)
            elapsed = time.time() - t0
            if self.display:
                self.display.tick(config, elapsed)
            if elapsed > self.how.timeout_s + CANCEL_GRACE_S:
                ray.cancel(ref, force=True)  # the node's own timeout did not answer: end it
        self.started = now

    def _host(self, config: CellConfig) -> str:
        return self.started.get(_key(config), ({"hostname": "an unknown node"}, 0))[0]["hostname"]

    def _collect(self, ref, config: CellConfig) -> Finished:
        """The finished task's record (its notebook written into the run folder)."""
        import ray

        host = self._host(config)
        try:
            rec, nb = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            why = f"exceeded its timeout and was cancelled on {host}"
            rec, nb = failure_record(config, "timeout", why), b""
        except ray.exceptions.RayTaskError as exc:
            why = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            rec, nb = failure_record(config, "failed", f"the Ray task failed on {host}: {why}"), b""
        except ray.exceptions.RayError as exc:  # worker or node died, object lost
            why = f"the Ray worker running the cell on {host} died ({type(exc).__name__})"
            rec, nb = failure_record(config, "killed", why), b""
        if nb:
            path = Path(config.out).with_suffix(".ipynb")
            records.atomic_write_text(path, nb.decode(), replace=True)
        node = rec.get("manifest", {}).get("node", {}).get("hostname", host)
        return Finished(config, rec, node)

    def interrupt(self, why: str) -> tuple[list[Finished], list[CellConfig]]:
        """Stop every outstanding task: a cell that finished meanwhile is kept, one that had
        started is ``interrupted`` by ``why``, the others go back unstarted."""
        import ray

        with contextlib.suppress(Exception):  # the cluster may be going away too
            self.started = ray.get(self.board.snapshot.remote(), timeout=INTERRUPT_GRACE_S)
        for ref in self.pending:
            ray.cancel(ref, recursive=True)  # KeyboardInterrupt in the task: it kills its cell
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        refs = list(self.pending)
        while refs and time.monotonic() < deadline:
            _, refs = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
        for ref in refs:
            ray.cancel(ref, force=True)
        finished, unstarted = [], []
        for ref, config in self.pending.items():
            key = _key(config)
            try:
                rec, nb = ray.get(ref, timeout=0)  # finished before the cancel arrived: keep it
            except Exception:  # noqa: BLE001 - cancelled, killed or not done
                rec, nb = None, b""
            if rec is not None and rec["status"] != "interrupted":
                if nb:
                    path = Path(config.out).with_suffix(".ipynb")
                    records.atomic_write_text(path, nb.decode(), replace=True)
                finished.append(Finished(config, rec, self._host(config)))
            elif key in self.started:
                host = self.started[key][0]["hostname"]
                error = f"interrupted by {why} while running on {host}{self.how.notebook_note}"
                finished.append(Finished(config, failure_record(config, "interrupted", error),
                                         host))  # fmt: skip
            else:
                unstarted.append(config)
        self.pending.clear()
        return finished, unstarted
