"""Issue 33, item 7: records are read safely. A record symlinked to ``/dev/zero`` and a FIFO
named ``*.json`` are each refused in one line naming the file (never read until memory runs
out, never waited on), through ``rosetta report`` and ``rosetta bench --resume``; the other
records are still reported, the cell runs again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rosetta.errors import RosettaError
from rosetta.runner import records, safefile
from tests.bench_helpers import ROOT

HANG = 120  # seconds: a FIFO read or a /dev/zero read would pass this, a refusal takes ~none


def _rosetta(*argv: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "rosetta.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=HANG)  # fmt: skip


def test_the_reader_refuses_devices_fifos_and_files_over_the_bound(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": 1}')
    assert safefile.read_text(ok, 100) == '{"a": 1}'
    for path, why in ((fifo, "a FIFO"), (link, "a character device"), (big, "larger than 100")):
        with pytest.raises(safefile.NotARegularFile, match=why):
            safefile.read_bytes(path, 100)
        if path == big:
            continue  # a record's own bound is 50 MB
        with pytest.raises(RosettaError, match=f"^{path}: .*{why}") as info:
            records.read_record(path)
        assert "\n" not in str(info.value)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_report_refuses_a_dev_zero_link_and_a_fifo_in_one_line_each(tmp_path):
    pytest.importorskip("pandas")
    from report_fixtures import CELLS_A, write_run

    gru = {k: v for k, v in CELLS_A.items() if k[0] == "gru"}
    run = write_run(tmp_path / "results", "run-a", gru)
    zero, fifo = run / "torch__gru.json", run / "tensorflow__gru.json"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    fifo.unlink()
    os.mkfifo(fifo)
    (run / "run.json").unlink()
    os.mkfifo(run / "run.json")
    out = tmp_path / "report"
    done = _rosetta("report", "--results-dir", str(tmp_path / "results"), "--out-dir", str(out),
                    "run-a")  # fmt: skip
    assert done.returncode == 0, done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 3 and "Traceback" not in done.stderr, err
    assert sum(str(zero) in line and "a character device" in line for line in err) == 1, err
    assert sum(str(fifo) in line and "a FIFO" in line for line in err) == 1, err
    assert sum(f"{run / 'run.json'}:" in line and "a FIFO" in line for line in err) == 1, err
    html = (out / "run-a" / "index.html").read_text()
    assert "86.1%" in html  # numpy_ref's accuracy: the readable records are reported


@pytest.mark.slow  # two bench runs of one cell in fresh processes: ~30-50 s on 2 busy cores
def test_resume_sets_a_fifo_record_aside_and_reads_no_device(tmp_path, small_data):
    results = tmp_path / "results"
    argv = ["bench", "--profile", "ci", "--results-dir", str(results), "--data-dir",
            str(small_data), "--no-report", "--executor", "python", "--backends", "numpy_ref",
            "--workloads", "gru"]  # fmt: skip
    first = _rosetta(*argv, "--run-id", "c")
    assert first.returncode == 0, first.stderr
    path = results / "c" / "numpy_ref__gru.json"
    path.unlink()
    os.mkfifo(path)  # the cell's own record: a FIFO
    stray = results / "c" / "stray__gru.json"
    stray.symlink_to("/dev/zero")  # a stray record the run's summary reads
    done = _rosetta(*argv, "--resume", "c")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    notes = [line for line in done.stderr.splitlines() if str(path) in line]
    assert len(notes) == 1 and "a FIFO" in notes[0] and "attempts/" in notes[0], done.stderr
    strays = [line for line in (done.stdout + done.stderr).splitlines() if str(stray) in line]
    assert len(strays) == 1 and "a character device" in strays[0], done.stdout + done.stderr
    rec = json.loads(path.read_text())  # measured again: a regular file now
    assert rec["status"] == "ok" and rec["clocks"]["steady"]["median"] > 0
    assert list((results / "c" / "attempts").glob("numpy_ref__gru.corrupt.*.json"))


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_resume_refuses_a_run_file_that_is_a_fifo_or_a_device_in_one_line(tmp_path, kind):
    """``run.json`` is read like a record: a FIFO is not waited on, ``/dev/zero`` not read."""
    run = tmp_path / "results" / "r"
    run.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(run / "run.json")
    else:
        (run / "run.json").symlink_to("/dev/zero")
    done = _rosetta("bench", "--resume", "r", "--results-dir", str(tmp_path / "results"),
                    "--profile", "ci", "--backends", "numpy_ref", "--workloads", "gru",
                    "--executor", "python", "--no-report")  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "run.json" in lines[0] and "not a regular file" in lines[0], lines[0]
