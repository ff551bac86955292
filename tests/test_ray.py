"""``rosetta bench --executor ray`` on a real local Ray cluster: a head and a second node (two
raylets on 127.0.0.1, each advertising one ``rosetta_cell`` slot), no mocks.

The quick test compares a Ray run's records with a local run's (same schema); the fault tests
(slow) kill the Ray worker running a cell, hang a cell past its timeout, and Ctrl-C the driver.
The cluster is shut down whatever happens (fixture with ``finally``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.bench_helpers import ROOT, fault_env
from tests.test_bench import _cells_running, bench, cell_record

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read at import: loopback only
pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    """A head node and one more node on 127.0.0.1 (Ray's loopback mode), 1 CPU and one cell slot
    each; yields the head's address."""
    saved = {k: os.environ.get(k) for k in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "PYTHONPATH")}
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every address stays on 127.0.0.1
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), saved["PYTHONPATH"] or ""])
    from ray.cluster_utils import Cluster

    slot = {"num_cpus": 1, "resources": {"rosetta_cell": 1}}
    c = Cluster(initialize_head=True, head_node_args={**slot, "include_dashboard": False})
    try:
        c.add_node(**slot)
        c.wait_for_nodes()
        assert c.address.startswith("127.0.0.1:"), c.address
        yield c.address
    finally:
        c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ray_args(address: str, *more: str) -> list[str]:
    return ["--executor", "ray", "--ray-address", address, "--ray-cell-executor", "python", *more]


# the slow tier's, for the quick tier's 6 minutes (issue 28): a Ray cluster, as the other Ray tests
@pytest.mark.slow
def test_a_ray_run_records_like_a_local_run(cluster, tmp_path, small_data, capsys):
    cells = ["--backends", "numpy_ref", "--workloads", "gru"]
    assert bench(tmp_path, small_data, *cells, "--executor", "python", "--run-id", "loc") == 0
    assert bench(tmp_path, small_data, *cells, *ray_args(cluster), "--run-id", "ray") == 0
    out = capsys.readouterr().out
    assert "2 node(s), 2 cell slot(s)" in out and f"on {socket.gethostname()}" in out
    local, remote = (cell_record(tmp_path, r, "numpy_ref", "gru") for r in ("loc", "ray"))
    assert remote["status"] == "ok" and remote["equivalence"]["equivalent"]
    assert sorted(remote) == sorted(local)  # the same schema as a local run
    assert set(remote["manifest"]) == set(local["manifest"])  # both name their machine
    node = remote["manifest"]["node"]
    # the Ray executor extends the local node facts with its own (node id, ip, worker)
    assert set(node) - set(local["manifest"]["node"]) == {"ip", "ray_node_id", "worker_pid"}
    assert node["hostname"] == socket.gethostname() and node["ip"] == "127.0.0.1"
    assert node["worker_pid"] != os.getpid() and node["cpu_count"] == os.cpu_count()
    assert remote["config"]["out"] == str(tmp_path / "results" / "ray" / "numpy_ref__gru.json")
    assert not any("shared node" in f for f in remote["flags"])  # one cell per node
    # the same data, weights and seed on the same machine: the same first loss (1e-9 relative:
    # only the BLAS threads' summation order may differ between the two processes)
    first = local["metrics"]["loss_first"]
    assert remote["metrics"]["loss_first"] == pytest.approx(first, rel=1e-9)
    run = tmp_path / "results" / "ray"
    assert not list(run.glob(".*partial")) and not list(run.glob("*.ipynb"))  # python executor
    index = json.loads((run / "index.json").read_text())["cells"]
    assert index["numpy_ref__gru"]["status"] == "ok"


@pytest.mark.parametrize("flag", [("--cells-per-node", "2"), ("--ray-timeout", "5")])
def test_ray_flags_need_the_ray_executor(tmp_path, small_data, capsys, flag):
    code = bench(tmp_path, small_data, *flag, "--executor", "python")
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith("--cells-per-node and --ray-timeout need --executor ray")


@pytest.mark.slow
def test_papermill_cells_on_two_nodes_bring_back_notebooks(
    cluster, tmp_path, small_data, monkeypatch, capsys
):
    fault_env(monkeypatch, "raise")
    cells = ["--backends", "numpy_ref,fault", "--workloads", "gru"]
    args = ["--executor", "ray", "--ray-address", cluster, "--cells-per-node", "2"]
    assert bench(tmp_path, small_data, *cells, *args, "--run-id", "nb") == 1
    run = tmp_path / "results" / "nb"
    ok, bad = (cell_record(tmp_path, "nb", b, "gru") for b in ("numpy_ref", "fault"))
    assert ok["status"] == "ok" and ok["executor"] == "papermill"
    executed = json.loads((run / ok["notebook"]).read_text())
    assert any(c.get("outputs") for c in executed["cells"])  # executed on a node, shipped back
    assert any("shared node: up to 2 cells" in f for f in ok["flags"])
    assert bad["status"] == "failed" and "planted failure" in bad["error"]
    assert f"(node {socket.gethostname()})" in bad["error"]
    assert (run / "fault__gru.ipynb").is_file()  # the partial notebook, as locally


@pytest.mark.slow
def test_a_killed_ray_worker_is_a_killed_cell_naming_its_node(
    cluster, tmp_path, small_data, monkeypatch
):
    fault_env(monkeypatch, "hang")
    run_id = f"kw-{os.getpid()}"
    killed: list[int] = []

    def kill_the_worker() -> None:  # the Ray worker is the cell process's parent
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for pid in _cell_pids(run_id):
                ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
                os.kill(ppid, signal.SIGKILL)
                killed.append(ppid)
            time.sleep(0.2)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    code = bench(tmp_path, small_data, "--backends", "fault", "--workloads", "gru",
                 *ray_args(cluster), "--run-id", run_id, "--timeout", "300")  # fmt: skip
    killer.join()
    assert killed and code == 1
    rec = cell_record(tmp_path, run_id, "fault", "gru")
    assert rec["status"] == "killed", rec["error"]
    assert f"on {socket.gethostname()} died" in rec["error"]
    _assert_gone(run_id)


@pytest.mark.slow
def test_a_hung_cell_on_ray_times_out_and_leaves_no_process(
    cluster, tmp_path, small_data, monkeypatch
):
    fault_env(monkeypatch, "hang")
    code = bench(tmp_path, small_data, "--backends", "fault", "--workloads", "gru",
                 *ray_args(cluster), "--run-id", "to", "--timeout", "5")  # fmt: skip
    assert code == 1
    rec = cell_record(tmp_path, "to", "fault", "gru")
    assert rec["status"] == "timeout" and "5 s timeout" in rec["error"]
    _assert_gone("to")


@pytest.mark.slow
def test_ctrl_c_on_the_driver_interrupts_and_resume_completes(
    cluster, tmp_path, small_data, monkeypatch
):
    fault_env(monkeypatch, "hang")
    run_id = f"ci-{os.getpid()}"
    cmd = [sys.executable, "-m", "rosetta.cli", "bench", "--profile", "ci", "--backends",
           "numpy_ref,fault", "--workloads", "gru", "--run-id", run_id, "--no-report",
           "--results-dir", str(tmp_path / "results"), "--data-dir", str(small_data),
           *ray_args(cluster)]  # fmt: skip
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _cell_pids(run_id, "fault") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _cell_pids(run_id, "fault"), "the fault cell never started"
        driver.send_signal(signal.SIGINT)
        _, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 2 and f"--resume {run_id}" in err, err
    rec = cell_record(tmp_path, run_id, "fault", "gru")
    assert rec["status"] == "interrupted" and "Ctrl-C" in rec["error"]
    _assert_gone(run_id)
    index = json.loads((tmp_path / "results" / run_id / "index.json").read_text())["cells"]
    assert index["fault__gru"]["status"] == "interrupted"
    before = cell_record(tmp_path, run_id, "numpy_ref", "gru") if index[
        "numpy_ref__gru"]["status"] == "ok" else None  # fmt: skip
    monkeypatch.setenv("ROSETTA_FAULT", "")  # fixed: resume completes it (on Ray: the run's pin)
    args = ["--backends", "numpy_ref,fault", "--workloads", "gru", *ray_args(cluster)]
    assert bench(tmp_path, small_data, *args, "--resume", run_id) == 0
    assert cell_record(tmp_path, run_id, "fault", "gru")["status"] == "ok"
    if before is not None:  # a cell that finished before Ctrl-C is kept, not run twice
        assert cell_record(tmp_path, run_id, "numpy_ref", "gru") == before
    attempts = tmp_path / "results" / run_id / "attempts"
    assert [p.name.split(".")[1] for p in attempts.glob("fault__gru.*.json")] == ["interrupted"]


@pytest.mark.slow
def test_ray_gates_once_measures_latency_once_and_resolves_auto_on_the_node(
    cluster, tmp_path, small_data
):
    args = ["--backends", "numpy_ref", "--workloads", "cnn", "--batch-sizes", "16,32",
            "--device", "auto", *ray_args(cluster), "--run-id", "once"]  # fmt: skip
    assert bench(tmp_path, small_data, *args) == 0
    first, later = (cell_record(tmp_path, "once", "numpy_ref", f"cnn__b{b}") for b in (16, 32))
    # the first cell of the function ran before the other was submitted: its verdict is reused
    assert first["equivalence"]["reused_from"] == ""
    assert later["equivalence"]["reused_from"] == "numpy_ref__cnn__b16"
    assert not any(f.startswith("gated in this cell") for f in later["flags"])
    # latency once per function and thread count: the first batch size measures it
    assert "latency" in first["metrics"] and "latency" not in later["metrics"]
    for rec in (first, later):  # auto, resolved by the cell on its node (numpy_ref: the CPU)
        assert rec["config"]["device"] == "auto"
        assert rec["manifest"]["runtime"]["device"] == "cpu"  # resolved on the node, stored once
        assert "device" not in rec["manifest"]  # (the runtime is the one place it is recorded)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_a_ray_run_leaves_a_record_for_every_cell(
    cluster, tmp_path, small_data, monkeypatch, sig
):
    fault_env(monkeypatch, "hang")
    run_id = f"rs-{sig.name}-{os.getpid()}"
    # fault t1 hangs on a node; fault t2 waits for t1's verdict (never submitted); numpy_ref runs
    cmd = [sys.executable, "-m", "rosetta.cli", "bench", "--profile", "ci", "--backends",
           "fault,numpy_ref", "--workloads", "gru", "--threads", "1,2", "--oversubscribe",
           "--run-id", run_id, "--no-report", "--results-dir", str(tmp_path / "results"),
           "--data-dir", str(small_data), *ray_args(cluster)]  # fmt: skip
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not _cell_pids(run_id, "fault") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _cell_pids(run_id, "fault"), "the fault cell never started"
        driver.send_signal(sig)
        _, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    named = "Ctrl-C" if sig == signal.SIGINT else sig.name
    lines = err.strip().splitlines()
    assert driver.returncode == 2 and len(lines) == 1, err  # one line: no Ray stack dump
    assert f"interrupted ({named})" in lines[0] and f"--resume {run_id}" in lines[0]
    run = tmp_path / "results" / run_id
    index = json.loads((run / "index.json").read_text())["cells"]
    assert len(index) == 4
    for key, entry in index.items():  # every cell has its record, named by the right signal
        rec = json.loads((run / f"{key}.json").read_text())
        assert rec["status"] == entry["status"], key
        if rec["status"] == "interrupted":
            assert named in rec["error"] and (sig == signal.SIGINT or "Ctrl-C" not in rec["error"])
    running = json.loads((run / "fault__gru__t1.json").read_text())
    assert running["status"] == "interrupted" and "while running on" in running["error"]
    queued = json.loads((run / "fault__gru__t2.json").read_text())
    assert queued["status"] == "interrupted" and queued["error"].startswith("not started")
    _assert_gone(run_id)


def test_an_unreachable_ray_address_fails_in_bounded_time_with_one_line(
    tmp_path, small_data, capsys
):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    code = bench(tmp_path, small_data, "--backends", "numpy_ref", "--workloads", "gru",
                 "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--ray-timeout", "5",
                 "--run-id", "gone")  # fmt: skip
    took = time.monotonic() - t0
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"cannot reach Ray at 127.0.0.1:{port}" in err[0], err
    assert "--ray-timeout" in err[0] and took < 60, took
    index = json.loads((tmp_path / "results" / "gone" / "index.json").read_text())["cells"]
    assert index == {"numpy_ref__gru": {"status": "not run", "error": ""}}  # resumable


def _cell_pids(run_id: str, backend: str = "") -> list[int]:
    """Live cell processes of ``run_id`` (optionally of one backend)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        mine = f'"run_id": "{run_id}"' in cmd and f'"backend": "{backend}' in cmd
        if mine and "rosetta.runner" in cmd and state != "Z":
            found.append(int(pid))
    return found


def _assert_gone(run_id: str) -> None:
    deadline = time.monotonic() + 15
    while _cells_running(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _cells_running(run_id), "a cell process outlived its cell"


def test_list_shows_whether_ray_is_available(capsys, monkeypatch):
    from importlib.metadata import version

    from rosetta.cli import main

    assert main(["list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("ray "))
    assert line.split() == ["ray", "ready", "ray", version("ray")]
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: import fails
    assert main(["list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("ray "))
    assert "unavailable" in line and "pip install 'rosetta[ray]'" in line
