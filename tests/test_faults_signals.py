"""Issue 21, item 1: SIGTERM and SIGHUP end ``rosetta bench`` like Ctrl-C (the running cell and
every cell not yet started recorded ``interrupted``, the index written, one line), and
``--resume`` completes the run. Real processes, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.bench_helpers import ROOT, fault_env
from tests.test_bench import _cells_running


def _bench_cmd(tmp_path, data, run_id: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rosetta.cli", "bench", "--profile", "ci", "--backends",
            "fault,numpy_ref", "--workloads", "gru", "--executor", "python", "--no-report",
            "--results-dir", str(tmp_path / "results"), "--data-dir", str(data), *extra,
            run_id]  # fmt: skip


# both the slow tier's (14 s each; one handler): the quick tier's Ctrl-C test
# (test_bench.py::test_interrupt_keeps_records_marks_index_and_resume_completes) takes its path
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_records_every_cell_and_resume_completes(tmp_path, small_data, monkeypatch, sig):
    fault_env(monkeypatch, "hang")  # the fault cell hangs until the signal comes
    run_id = f"sig-{sig.name}-{time.monotonic_ns()}"
    proc = subprocess.Popen(_bench_cmd(tmp_path, small_data, run_id, "--run-id"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _cells_running(run_id) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _cells_running(run_id), "the hanging cell never started"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = err.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, err)
    assert len(lines) == 1 and f"interrupted ({sig.name})" in lines[0], lines
    assert f"--resume {run_id}" in lines[0]
    assert not _cells_running(run_id), "the interrupted cell outlived bench"
    run = tmp_path / "results" / run_id
    fault = json.loads((run / "fault__gru.json").read_text())
    assert fault["status"] == "interrupted" and sig.name in fault["error"], fault["error"]
    never = json.loads((run / "numpy_ref__gru.json").read_text())  # never started: a record too
    assert never["status"] == "interrupted" and never["error"].startswith("not started"), never
    index = json.loads((run / "index.json").read_text())["cells"]
    assert {k: v["status"] for k, v in index.items()} == {
        "fault__gru": "interrupted",
        "numpy_ref__gru": "interrupted",
    }
    monkeypatch.setenv("ROSETTA_FAULT", "")  # the fault is gone: the resume completes
    done = subprocess.run(_bench_cmd(tmp_path, small_data, run_id, "--resume"), cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for cell in ("fault__gru", "numpy_ref__gru"):
        assert json.loads((run / f"{cell}.json").read_text())["status"] == "ok"
    assert len(list((run / "attempts").glob("*.interrupted.*.json"))) == 2  # old records kept
