"""The matrix on a Ray cluster: each cell is a Ray task that runs the cell exactly as locally.

The driver (``rosetta bench --executor ray``) stays the one process that owns the run folder, its
lock, ``run.json``, ``index.json`` and every record. Each cell becomes one Ray task which, on
whatever node Ray picks, verifies the cell's data set through the dataset registry (a missing or
different data set is a ``failed`` cell naming the node, never a synthetic fallback), then runs
the cell's usual fresh process (``rosetta.runner.matrix.cell_command``: papermill kernel or the
python path) with the local executor's own code (``matrix._execute``: own session, timeout that
kills the process tree, address-space limit, death with its parent), writing into a temporary
folder of its own. The record (a dict) and the executed notebook (bytes) come back by value and
the driver writes them atomically into the run folder: no shared filesystem is assumed.

**One cell per node, by a custom resource.** Every node advertises ``{"rosetta_cell": 1}`` once
(``ray start --resources '{"rosetta_cell": 1}'``; the local instance gets it from ``ray.init``)
and every cell task asks for ``1 / cells_per_node`` of it, with ``num_cpus=0``. A resource says
exactly what it means ("a node's measuring slot"), holds across heterogeneous nodes whatever
their core count, and needs no bookkeeping in the driver; a placement group (``STRICT_SPREAD``)
would reserve whole nodes for the run's lifetime and still let two of its bundles' tasks share a
node once the group has fewer nodes than cells. ``--cells-per-node N`` asks for ``1/N`` of the
slot, so N cells share a node; each such record is flagged. GPU cells (``--device cuda``, or
``auto`` on a cluster that has GPUs) also ask for ``num_gpus=1``.

**Faults.** A worker process (or its node) that dies mid-cell is ``killed``, naming the node;
a cell past ``--timeout`` is killed on its node (``timeout``), and the driver force-cancels a
task still alive a grace period later; Ctrl-C cancels every outstanding task (the running
cells' processes are killed and recorded ``interrupted``; ``--resume`` completes them, on Ray
or locally). Tasks are never retried by Ray (``max_retries=0``), so no cell is recorded twice.

The driver's ``ROSETTA_*`` environment variables travel with each task (extra backends, spec
folder, data folder), so the nodes run the same configuration.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.papercell import failure_record

RESOURCE = "rosetta_cell"  # each node advertises 1 of it: its one measuring slot
CANCEL_GRACE_S = 60.0  # after --timeout, the task has this long to kill its cell and answer
INTERRUPT_GRACE_S = 5.0  # after Ctrl-C, cells have this long to stop before a forced cancel
POLL_S = 0.5


@dataclass(frozen=True)
class RayOptions:
    """How ``rosetta bench --executor ray`` reaches the cluster and shares its nodes."""

    address: str | None = None  # None: $RAY_ADDRESS, else a local Ray instance started here
    cells_per_node: int = 1  # >1 lets cells share a node (recorded as a flag: noisy timings)
    local_cpus: int | None = None  # cores of a local instance (None: Ray counts them)


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


def connect(options: RayOptions) -> str:
    """Connect to the cluster (or start a local one); returns a one-line description of it.

    Raises ``RosettaError`` (one line) when Ray is missing, the address cannot be reached or the
    cluster advertises no ``rosetta_cell`` slot."""
    ok, why = available()
    if not ok:
        raise RosettaError(f"--executor ray: Ray is {why}")
    import ray

    address = options.address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        else:
            ray.init(
                num_cpus=options.local_cpus,
                resources={RESOURCE: 1},
                include_dashboard=False,
                log_to_driver=False,
                logging_level="ERROR",
            )
    except Exception as exc:  # noqa: BLE001 - Ray raises many types; all mean "no cluster"
        where = address or "a local instance"
        raise RosettaError(
            f"--executor ray: cannot reach Ray at {where} ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); start it with `ray start --head`"
        ) from None
    total = ray.cluster_resources()
    if total.get(RESOURCE, 0) < 1:
        ray.shutdown()
        raise RosettaError(
            f"the Ray cluster at {address} advertises no {RESOURCE!r} slot; start every node "
            f"with: ray start ... --resources '{{\"{RESOURCE}\": 1}}'"
        )
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return (
        f"Ray {ray.__version__} at {address or 'a local instance'}: {len(nodes)} node(s), "
        f"{total.get(RESOURCE, 0):g} cell slot(s), {total.get('GPU', 0):g} GPU(s)"
    )


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


def run_cell_on_node(plan, config: CellConfig, board, cells_per_node: int) -> tuple[dict, bytes]:
    """The Ray task's body: run one cell in a fresh process on this node; returns the record and
    the executed notebook (``b""`` when there is none), both by value."""
    import ray

    from rosetta.runner.matrix import Display, _execute
    from rosetta.runtime import child_env

    facts = node_facts(config.device)
    ray.get(board.started.remote(_key(config), facts))  # known before the cell can die
    tmp = Path(tempfile.mkdtemp(prefix="rosetta-cell-"))
    try:
        local = replace(config, out=str(tmp / Path(config.out).name))
        why = check_worker_data(config)
        if why:
            rec = failure_record(config, "failed", why)
        else:
            status, error = _execute(plan, local, child_env(config.threads), Display(), "")
            path = Path(local.out)
            rec = records.read_record(path) if path.exists() else None
            rec = rec or failure_record(config, status, error)
        notebook = tmp / Path(config.out).with_suffix(".ipynb").name
        nb = notebook.read_bytes() if notebook.exists() else b""
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rec["config"] = config.as_dict()  # the driver's paths, not this node's temporary ones
    rec.setdefault("manifest", {})["node"] = facts
    if rec["status"] != "ok":
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


def _configs(plan, run) -> list[CellConfig]:
    """Every cell of ``plan`` (every point and round) as its config, in the round orders of
    ``run.json``: the same cells as locally, submitted in the order they would run."""
    from rosetta.runner.matrix import _cell_config, round_cells, round_orders

    orders = run.config.get("round_orders")
    if not orders:
        orders = round_orders(plan)
        run.add_to_run_file(round_orders=orders)
    by_key = {records.cell_key(c): c for r in range(plan.repeat) for c in round_cells(plan, r)}
    return [_cell_config(run, by_key[k]) for order in orders for k in order]


def run_matrix_ray(plan, run, display, options: RayOptions) -> dict[str, dict]:
    """``run_matrix`` on Ray: every cell of ``plan`` not yet recorded in ``run``, as Ray tasks;
    returns ``{cell: index entry}``. The driver writes every record and notebook."""
    import ray

    owned = not ray.is_initialized()  # a caller's connection (a benchmark) is reused and kept
    if owned:
        print(connect(options), flush=True)
    try:
        return _drive(plan, run, display, options)
    finally:
        if owned:
            ray.shutdown()


def _drive(plan, run, display, options: RayOptions) -> dict[str, dict]:
    import ray

    from rosetta.runner.matrix import _existing

    index = {_key(c): {"status": "not run", "error": ""} for c in _configs(plan, run)}
    todo: list[CellConfig] = []
    for config in _configs(plan, run):
        key, path, label = _key(config), Path(config.out), _label(config)
        st = backends.status(config.backend)
        why_not = st.reason if not st.usable else config.precision_unsupported()
        if path.exists():
            kept = _existing(plan, run, path, not why_not)
            if kept is not None:
                display.done(label, kept["status"], "already recorded, kept")
                index[key] = kept
                continue
        if why_not:  # the driver's install decides, as locally
            records.write_record(path, failure_record(config, "skipped", why_not))
            display.done(label, "skipped", why_not)
            index[key] = {"status": "skipped", "error": why_not}
            continue
        todo.append(config)
    run.write_index(index)
    if not todo:
        return index
    board = ray.remote(num_cpus=0)(_Board).remote()
    task = ray.remote(run_cell_on_node)
    has_gpu = ray.cluster_resources().get("GPU", 0) > 0
    env = {k: v for k, v in os.environ.items() if k.startswith("ROSETTA_")}
    pending: dict = {}  # ObjectRef -> config
    for config in todo:
        gpus = 1 if config.device == "cuda" or (config.device == "auto" and has_gpu) else 0
        ref = task.options(
            num_cpus=0,
            num_gpus=gpus,
            resources={RESOURCE: 1.0 / options.cells_per_node},
            max_retries=0,
            runtime_env={"env_vars": env},
        ).remote(plan, config, board, options.cells_per_node)
        pending[ref] = config
    started: dict[str, tuple[dict, float]] = {}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            # who runs where, read before collecting: a task that died names its node
            started = _poll(board, started, pending, display, plan.timeout_s)
            for ref in done:
                config = pending.pop(ref)
                index[_key(config)] = _collect(ref, config, started, display)
                run.write_index(index)
    except KeyboardInterrupt:
        _interrupt(pending, started, index, display, board)
        run.write_index(index)
        raise
    finally:
        ray.kill(board)
    run.write_index(index)
    return index


def _label(config: CellConfig) -> str:
    return f"{config.backend} x {config.workload}"


def _poll(board, started: dict, pending: dict, display, timeout_s: float) -> dict:
    """Tell the display which cells run where; force-cancel a task long past its timeout."""
    import ray

    now = ray.get(board.snapshot.remote())
    for ref, config in pending.items():
        key = _key(config)
        if key not in now:
            continue
        facts, t0 = now[key]
        if key not in started:
            display.start(_label(config))
        elapsed = time.time() - t0
        display.tick(_label(config), elapsed)
        if elapsed > timeout_s + CANCEL_GRACE_S:
            ray.cancel(ref, force=True)  # the node's own timeout did not answer: end it
    return now


def _collect(ref, config: CellConfig, started: dict, display) -> dict:
    """Write the finished task's record and notebook into the run folder; its index entry."""
    import ray

    path = Path(config.out)
    host = started.get(_key(config), ({"hostname": "an unknown node"}, 0))[0]["hostname"]
    try:
        rec, nb = ray.get(ref)
    except ray.exceptions.TaskCancelledError:
        rec, nb = _lost(config, "timeout", f"exceeded its timeout and was cancelled on {host}"), b""
    except ray.exceptions.RayTaskError as exc:
        why = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        rec, nb = _lost(config, "failed", f"the Ray task failed on {host}: {why}"), b""
    except ray.exceptions.RayError as exc:  # worker or node died, object lost
        why = f"the Ray worker running the cell on {host} died ({type(exc).__name__})"
        rec, nb = _lost(config, "killed", why), b""
    if nb:
        records.atomic_write_text(path.with_suffix(".ipynb"), nb.decode(), replace=True)
    if not path.exists():
        records.write_record(path, rec)
    rec = records.read_record(path)
    status, error = rec["status"], rec.get("error", "")
    node = rec.get("manifest", {}).get("node", {}).get("hostname", host)
    detail = f"on {node}" + (f": {error}" if error else "")
    if status == "ok":
        c = rec["clocks"]
        eq = "equivalent" if rec["equivalence"]["equivalent"] else "NOT EQUIVALENT"
        detail = f"on {node}: {eq}, step {c['steady']['median']:.3f} s, {rec['wall_s']:.0f} s wall"
    display.done(_label(config), status, detail)
    return {"status": status, "error": error, "flags": rec.get("flags", [])}


def _lost(config: CellConfig, status: str, why: str) -> dict:
    return failure_record(config, status, why)


def _interrupt(pending: dict, started: dict, index: dict, display, board) -> None:
    """Ctrl-C: stop every outstanding task; running cells become ``interrupted`` records, queued
    ones ``interrupted`` in the index; a cell that finished meanwhile is kept."""
    import ray

    try:
        started = ray.get(board.snapshot.remote(), timeout=INTERRUPT_GRACE_S)
    except Exception:  # noqa: BLE001 - the cluster may be going away too
        pass
    for ref in pending:
        ray.cancel(ref, recursive=True)  # KeyboardInterrupt in the task: it kills its cell
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    refs = list(pending)
    while refs and time.monotonic() < deadline:
        done, refs = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
    for ref in refs:
        ray.cancel(ref, force=True)
    for ref, config in pending.items():
        key, path = _key(config), Path(config.out)
        try:
            rec, nb = ray.get(ref, timeout=0)  # finished before the cancel arrived: keep it
        except Exception:  # noqa: BLE001 - cancelled, killed or not done
            rec, nb = None, b""
        if rec is not None and rec["status"] != "interrupted":
            if nb:
                records.atomic_write_text(path.with_suffix(".ipynb"), nb.decode(), replace=True)
            records.write_record(path, rec)
            index[key] = {"status": rec["status"], "error": rec.get("error", "")}
            display.done(_label(config), rec["status"], "finished before the interrupt")
        elif key in started:
            host = started[key][0]["hostname"]
            why = f"interrupted by the user (Ctrl-C) while running on {host}"
            if not path.exists():
                records.write_record(path, failure_record(config, "interrupted", why))
            index[key] = {"status": "interrupted", "error": why}
        else:
            why = "not started: the run was interrupted (Ctrl-C)"
            index[key] = {"status": "interrupted", "error": why}
    print("interrupted: outstanding Ray tasks cancelled", file=sys.stderr, flush=True)
