"""``rosetta bench`` as a product: faults isolated and recorded, resume, locks, bad options,
exit status, records that survive, and the papermill-executed notebooks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rosetta.cli import main
from rosetta.runner import records
from tests.bench_helpers import bench, fault_env


def cell_record(tmp_path, run_id, backend, workload) -> dict:
    return json.loads((tmp_path / "results" / run_id / f"{backend}__{workload}.json").read_text())


@pytest.mark.parametrize(
    "fault,status,reason",
    [
        ("raise", "failed", "RuntimeError: planted failure inside the framework"),
        ("segfault", "killed", "killed by SIGSEGV"),
        # quick-tier budget (stop 58): two more ways to die in the slow tier
        pytest.param("exit0", "failed", "exited with status 0", marks=pytest.mark.slow),
        pytest.param("oom", "failed", "MemoryError", marks=pytest.mark.slow),
    ],
)
def test_a_failing_cell_is_recorded_and_the_matrix_goes_on(
    tmp_path, small_data, monkeypatch, capsys, fault, status, reason
):
    fault_env(monkeypatch, fault)
    code = bench(tmp_path, small_data, "--backends", "fault,numpy_ref", "--workloads", "gru",
                 "--run-id", "f", "--executor", "python", "--memory-limit-mb", "4096")  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1 and "1 of 2 cells did not succeed: fault__gru " + status in out
    rec = cell_record(tmp_path, "f", "fault", "gru")
    assert rec["status"] == status and reason in rec["error"], rec["error"]
    assert rec["manifest"]["cpu_count"] and rec["config"]["workload"] == "gru"  # always a manifest
    assert rec["manifest"]["data_source"] == "synthetic"  # and the data it was to run on
    assert cell_record(tmp_path, "f", "numpy_ref", "gru")["status"] == "ok"  # the matrix went on
    index = json.loads((tmp_path / "results" / "f" / "index.json").read_text())["cells"]
    assert index["fault__gru"]["status"] == status and index["numpy_ref__gru"]["status"] == "ok"


def test_a_hanging_cell_times_out_and_leaves_no_process(tmp_path, small_data, monkeypatch, capsys):
    fault_env(monkeypatch, "hang")
    code = bench(tmp_path, small_data, "--backends", "fault", "--workloads", "gru", "--run-id",
                 "h", "--executor", "python", "--timeout", "5")  # fmt: skip
    assert code == 1
    rec = cell_record(tmp_path, "h", "fault", "gru")
    assert rec["status"] == "timeout" and "5 s timeout" in rec["error"]
    assert not _cells_running("h")


def _cells_running(run_id: str) -> list[str]:
    """Command lines of live cell processes of ``run_id`` (read from /proc, never truncated)."""
    found = []
    for proc in os.listdir("/proc"):
        if not proc.isdigit():
            continue
        try:
            with open(f"/proc/{proc}/cmdline", "rb") as fh:
                cmd = fh.read().decode(errors="replace").replace("\0", " ")
            with open(f"/proc/{proc}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f'"run_id": "{run_id}"' in cmd and state != "Z":  # a zombie is dead already
            found.append(cmd)
    return found


# the slow tier's (the quick tier's 6 minutes, issue 28): a kill of the driver; Ctrl-C is quick
@pytest.mark.slow
def test_a_killed_bench_takes_its_cell_along(tmp_path, small_data, monkeypatch):
    fault_env(monkeypatch, "hang")
    run_id = f"orphan-{os.getpid()}-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "rosetta.cli", "bench", "--profile", "ci", "--backends", "fault",
           "--workloads", "gru", "--run-id", run_id, "--executor", "python", "--no-report",
           "--results-dir", str(tmp_path / "results"), "--data-dir", str(small_data)]  # fmt: skip
    parent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not _cells_running(run_id) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _cells_running(run_id), "the cell never started"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while _cells_running(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _cells_running(run_id), "an orphan cell outlived its killed parent"


# quick-tier budget (stop 58): papermill runs in the slow tier's profile and sweep tests too
@pytest.mark.slow
def test_notebook_cells_papermill_ok_and_failed(tmp_path, small_data, monkeypatch, capsys):
    fault_env(monkeypatch, "raise")
    code = bench(tmp_path, small_data, "--backends", "numpy_ref,fault", "--workloads", "gru",
                 "--run-id", "nb")  # fmt: skip
    assert code == 1
    run = tmp_path / "results" / "nb"
    ok = cell_record(tmp_path, "nb", "numpy_ref", "gru")
    assert ok["status"] == "ok" and ok["executor"] == "papermill"
    assert ok["notebook"] == "numpy_ref__gru.ipynb" and (run / ok["notebook"]).is_file()
    assert ok["papermill_overhead_s"] >= 0 and ok["equivalence"]["equivalent"]
    executed = json.loads((run / "numpy_ref__gru.ipynb").read_text())
    outputs = "".join(
        "".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", [])
    )
    assert "equivalent: True" in outputs and "test accuracy" in outputs
    bad = cell_record(tmp_path, "nb", "fault", "gru")
    assert bad["status"] == "failed"
    assert bad["error"] == "RuntimeError: planted failure inside the framework"
    assert (run / "fault__gru.ipynb").is_file()  # the partial notebook is kept
    assert not list(run.glob(".*.pending.json"))


def test_a_crashing_kernel_is_killed_with_its_partial_notebook(tmp_path, small_data, monkeypatch):
    fault_env(monkeypatch, "segfault")
    code = bench(tmp_path, small_data, "--backends", "fault", "--workloads", "gru", "--run-id", "k")
    assert code == 1
    rec = cell_record(tmp_path, "k", "fault", "gru")
    assert rec["status"] == "killed" and "kernel died" in rec["error"]
    assert rec["manifest"]["data_source"] == "synthetic"
    assert (tmp_path / "results" / "k" / "fault__gru.ipynb").is_file()


def test_resume_keeps_records_refuses_other_settings_and_retries_failed(
    tmp_path, small_data, monkeypatch, capsys
):
    fault_env(monkeypatch, "raise")
    args = ["--backends", "numpy_ref,fault", "--workloads", "gru", "--executor", "python"]
    assert bench(tmp_path, small_data, *args, "--run-id", "r") == 1
    run = tmp_path / "results" / "r"
    before = {p.name: p.read_text() for p in run.glob("*.json") if p.name != "index.json"}
    # resuming runs nothing: ok kept, failed kept without --retry-failed
    assert bench(tmp_path, small_data, *args, "--resume", "r") == 1
    after = {p.name: p.read_text() for p in run.glob("*.json") if p.name != "index.json"}
    assert after == before
    # another profile, seed or dtype on the same run is refused with one line
    capsys.readouterr()
    assert main(["bench", "--resume", "r", "--profile", "smoke", "--results-dir",
                 str(tmp_path / "results"), "--data-dir", str(small_data), *args]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "was made with profile='ci', not 'smoke'" in err and "\n" not in err
    # --retry-failed reruns the failed cell (now fixed); the old record is kept under attempts/
    monkeypatch.setenv("ROSETTA_FAULT", "")
    assert bench(tmp_path, small_data, *args, "--resume", "r", "--retry-failed") == 0
    assert cell_record(tmp_path, "r", "fault", "gru")["status"] == "ok"
    assert [p.name.split(".")[1] for p in (run / "attempts").glob("*.json")] == ["failed"]
    assert (run / "numpy_ref__gru.json").read_text() == before["numpy_ref__gru.json"]


def test_a_corrupt_record_is_reported_set_aside_and_the_rest_summarised(
    tmp_path, small_data, capsys
):
    args = ["--backends", "numpy_ref", "--workloads", "gru", "--executor", "python"]
    assert bench(tmp_path, small_data, *args, "--run-id", "c") == 0
    path = tmp_path / "results" / "c" / "numpy_ref__gru.json"
    path.write_text(path.read_text()[:100])  # truncated
    errors: list[str] = []
    assert records.read_records(path.parent, errors) == []
    assert len(errors) == 1 and str(path) in errors[0] and "move it aside" in errors[0]
    capsys.readouterr()
    assert bench(tmp_path, small_data, *args, "--resume", "c") == 0
    captured = capsys.readouterr()
    assert "unreadable record" in captured.err and "moved to attempts/" in captured.err
    assert "gru       numpy_ref   ok" in captured.out
    assert cell_record(tmp_path, "c", "numpy_ref", "gru")["status"] == "ok"


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_interrupt_keeps_records_marks_index_and_resume_completes(
    tmp_path, small_data, monkeypatch, capsys
):
    real_wait = subprocess.Popen.wait
    calls = {"n": 0}

    def wait(self, timeout=None):  # Ctrl-C arrives once, while the cnn cell runs
        if self.args[:3] == [sys.executable, "-m", "rosetta.runner.cell"]:
            if "cnn" in self.args[-1] and not calls["n"]:
                calls["n"] += 1
                raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    args = ["--backends", "numpy_ref", "--workloads", "gru,cnn", "--executor", "python"]
    assert bench(tmp_path, small_data, *args, "--run-id", "i") == 2
    err = capsys.readouterr().err
    assert (
        "interrupted (Ctrl-C); the records written so far are kept" in err and "--resume i" in err
    )
    run = tmp_path / "results" / "i"
    assert cell_record(tmp_path, "i", "numpy_ref", "gru")["status"] == "ok"
    assert cell_record(tmp_path, "i", "numpy_ref", "cnn")["status"] == "interrupted"
    index = json.loads((run / "index.json").read_text())["cells"]
    assert index["numpy_ref__cnn"]["status"] == "interrupted"
    monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
    assert bench(tmp_path, small_data, *args, "--resume", "i") == 0
    assert cell_record(tmp_path, "i", "numpy_ref", "cnn")["status"] == "ok"


def test_two_runs_never_share_a_folder(tmp_path, small_data, capsys):
    from rosetta.runner.rundir import RunDir, new_run_id

    # same second, different ids: 32 random bits, so 200 ids collide with p ~ 5e-6
    assert len({new_run_id() for _ in range(200)}) == 200
    results = tmp_path / "results"
    results.mkdir()
    with RunDir(results, "busy", {"profile": "ci"}, create=True):
        code = bench(tmp_path, small_data, "--backends", "numpy_ref", "--workloads", "gru",
                     "--resume", "busy")  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert code == 2 and "is in use by another rosetta bench (pid " in err
        with pytest.raises(Exception, match="already exists"):
            RunDir(results, "busy", {"profile": "ci"}, create=True)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--timeout", "0"], "--timeout 0: out of bounds; give a number of seconds from 1 to"),
        (["--timeout", "nan"], "--timeout nan: out of bounds"),
        (["--timeout", "-5"], "--timeout -5: out of bounds"),
        (["--threads", "-3"], "--threads: must be an integer >= 1 and <= 1024, got -3"),
        (["--seed", "-1"], "--seed: must be an integer >= 0 and <= 4294967295, got -1"),
        (["--device", "tpu"], "--device 'tpu': valid: cpu, cuda, auto"),
        (["--run-id", "../x"], "run id '../x' is not a plain name"),
        (["--run-id", "/abs"], "run id '/abs' is not a plain name"),
        (["--resume", "nope"], "no run 'nope'"),
        (["--backends", "mxnet"], "unknown backend 'mxnet'; valid: numpy_ref, torch"),
        (["--workloads", "lstm"], "unknown workload 'lstm'; valid: cnn, decoder, gru, resnet50"),
        (["--profile", "huge"], "unknown profile 'huge'; valid: ci, smoke, full"),
    ],
)
def test_bad_options_are_one_line_and_run_nothing(tmp_path, capsys, args, message):
    code = main(["bench", "--results-dir", str(tmp_path / "results"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_an_unusable_results_dir_is_found_before_anything_runs(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["bench", "--results-dir", str(blocker), "--backends", "numpy_ref"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a file, not a folder" in err and "--results-dir" in err


def test_auto_is_the_default_device_and_cuda_where_none_is_one_line(
    tmp_path, small_data, capsys, monkeypatch
):
    from rosetta.runner import guards

    monkeypatch.setattr(guards, "cuda_visible", lambda: (False, "no NVIDIA driver (test)"))
    args = ["--backends", "numpy_ref", "--workloads", "gru", "--executor", "python"]
    assert bench(tmp_path, small_data, *args, "--run-id", "d") == 0  # no --device: auto
    out = capsys.readouterr().out
    assert "float32 on cpu (--device auto: no NVIDIA driver (test))" in out  # the banner
    rec = cell_record(tmp_path, "d", "numpy_ref", "gru")
    assert rec["manifest"]["runtime"]["device"] == "cpu" and rec["config"]["device"] == "auto"
    assert bench(tmp_path, small_data, *args, "--run-id", "d2", "--device", "cuda") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rosetta: error: --device cuda: no CUDA GPU here (no NVIDIA driver (test)); "
                   "valid here: cpu, auto"]  # fmt: skip
    assert not (tmp_path / "results" / "d2").exists()


def test_a_cell_imports_the_drivers_rosetta_whatever_its_working_directory(
    tmp_path, small_data, monkeypatch, capsys
):
    """Started in a folder that holds another checkout (a ``rosetta/`` package that fails
    loudly when imported, and an empty ``data/``), every cell still imports the driver's
    ``rosetta`` and reads the data folder the driver resolved (here from $ROSETTA_DATA_DIR)."""
    decoy = tmp_path / "other-checkout"
    (decoy / "rosetta").mkdir(parents=True)
    (decoy / "data").mkdir()
    marker = tmp_path / "decoy-imported"
    (decoy / "rosetta" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit('decoy rosetta imported')\n"
    )
    monkeypatch.chdir(decoy)
    monkeypatch.setenv("ROSETTA_DATA_DIR", str(small_data))
    code = main(["bench", "--profile", "ci", "--results-dir", str(tmp_path / "results"),
                 "--no-report", "--backends", "numpy_ref", "--workloads", "gru",
                 "--executor", "python", "--run-id", "cwd"])  # fmt: skip
    rec = cell_record(tmp_path, "cwd", "numpy_ref", "gru")
    assert not marker.exists(), "a cell imported the working directory's rosetta"
    assert code == 0 and rec["status"] == "ok", rec.get("error")
    assert rec["config"]["data_dir"] == str(small_data.absolute())  # the driver's, as a value


def test_records_are_strict_json_written_once(tmp_path):
    path = records.record_path(tmp_path, "r1", "numpy_ref", "gru")
    rec = records.make_record(backend="numpy_ref", workload="gru", profile="ci", status="skipped")
    records.write_record(path, rec)
    with pytest.raises(Exception, match="append-only"):
        records.write_record(path, {**rec, "status": "failed"})
    assert records.read_record(path) == rec
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    with pytest.raises(ValueError):
        records.write_record(tmp_path / "nan.json", {**rec, "x": float("nan")})
    assert not (tmp_path / "nan.json").exists()
    (tmp_path / "v9.json").write_text(json.dumps({**rec, "schema_version": 9}))
    with pytest.raises(Exception, match="schema_version 9, this rosetta reads 3 .and 1, 2."):
        records.read_record(tmp_path / "v9.json")


def test_an_older_record_is_read_through_the_one_migration(tmp_path):
    """A schema-2 record (no spec facts, the cold start one total, flags as prose) reads as a
    current one: spec facts from the spec (marked derived), the cold start's parts, flag codes."""
    cfg = {"workload": "gru", "profile": "ci", "batch_size": None, "precision": "fp32"}
    old = {
        "schema_version": 2, "backend": "numpy_ref", "workload": "gru", "profile": "ci",
        "status": "skipped", "config": cfg,
        "clocks": {"import_s": 0.5, "import_build_s": 2.0, "cold_start_s": 2.25},
        "flags": ["steady-state spread (IQR/median) 40% > 25%: uneven", "something else"],
    }  # fmt: skip
    (tmp_path / "v2.json").write_text(json.dumps(old))
    rec = records.read_record(tmp_path / "v2.json")
    assert rec["schema_version"] == records.SCHEMA_VERSION and rec["migrated_from"] == 2
    assert rec["clocks"]["first_step_s"] == 0.25 and rec["clocks"]["build_s"] == 1.5
    assert rec["flag_codes"] == ["noisy", "other"]
    spec = rec["spec"]
    assert spec["task"] == "train" and spec["batch_size"] == spec["profile_batch"] == 64
    assert spec["flops_per_sample"] > 0 and "derived" in spec
    current = records.make_record(backend="numpy_ref", workload="gru", profile="ci",
                                  status="skipped", config=cfg)  # fmt: skip
    assert current["spec"] == {k: v for k, v in spec.items() if k != "derived"}


def test_notebooks_are_committed_without_outputs_and_up_to_date():
    import nbformat

    from rosetta import backends
    from rosetta.runner.notebook import make_notebook, notebooks_dir

    for name in backends.names():
        path = notebooks_dir() / f"{name}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        for c in nb.cells:
            if c.cell_type == "code":
                assert c.outputs == [] and c.execution_count is None, f"{path} has outputs"
        assert nb == make_notebook(name), f"{path} is stale: rerun scripts/make_notebooks.py"
        assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)


def test_summary_shows_the_data_source_and_records_load(tmp_path, small_data, capsys):
    from rosetta.cli.bench import summary

    args = ["--backends", "numpy_ref", "--workloads", "cnn", "--executor", "python"]
    assert bench(tmp_path, small_data, *args, "--run-id", "s") == 0
    rec = cell_record(tmp_path, "s", "numpy_ref", "cnn")
    assert rec["manifest"]["data_source"] == "synthetic"
    assert rec["load"]["before"]["load_avg"] is not None
    text = summary([rec])
    assert "synthetic" in text and "numpy_ref" in text
    assert os.path.exists(tmp_path / "results" / "s" / "summary.csv")


def test_a_profile_larger_than_the_data_is_flagged_and_no_test_batch_refused(tmp_path):
    from rosetta import datasets
    from rosetta.errors import RosettaError
    from rosetta.runner.cell import run_cell
    from rosetta.runner.config import CellConfig

    short = tmp_path / "short"
    datasets.write_synthetic_imdb(short, n_train=200, n_test=100)  # ci asks 256 / 128
    rec = run_cell(CellConfig("numpy_ref", "gru", "ci", data_dir=str(short)))
    assert rec["status"] == "ok" and rec["metrics"]["steps"] == 200 // 64
    assert rec["flags"][:2] == [
        "profile not met: 200 train samples of the 256 that profile 'ci' asks for",
        "profile not met: 100 test samples of the 128 that profile 'ci' asks for",
    ]
    tiny = tmp_path / "tiny"
    datasets.write_synthetic_imdb(tiny, n_train=200, n_test=40)  # not one test batch of 64
    with pytest.raises(RosettaError, match="only 40 test samples, fewer than one batch of 64"):
        run_cell(CellConfig("numpy_ref", "gru", "ci", data_dir=str(tiny)))


# the slow tier's (the quick tier's 6 minutes, issue 28): notebooks run in the quick e2e run
@pytest.mark.slow
def test_a_notebook_runs_all_with_its_defaults(tmp_path):
    """What a person gets from *Run all*: no injected parameters, the ci profile, a record."""
    import papermill as pm

    from rosetta.runner.notebook import notebooks_dir

    out = tmp_path / "ran.ipynb"
    pm.execute_notebook(str(notebooks_dir() / "numpy_ref.ipynb"), str(out), kernel_name="python3",
                        progress_bar=False, cwd=str(tmp_path))  # fmt: skip
    ran = json.loads(out.read_text())
    text = "".join("".join(o.get("text", "")) for c in ran["cells"] for o in c.get("outputs", []))
    assert "cell      numpy_ref x cnn, profile ci" in text
    assert "equivalent: True" in text and '"status": "ok"' in text


def test_dry_run_plans_and_makes_nothing(tmp_path, capsys):
    """``--dry-run`` checks every option and prints each round's cells and the estimate, and
    neither makes data nor creates the results folder (scripts/gpu_check.sh --dry-run uses it)."""
    results, data = tmp_path / "results", tmp_path / "absent-data"
    argv = ["bench", "--dry-run", "--profile", "smoke", "--results-dir", str(results),
            "--data-dir", str(data), "--backends", "numpy_ref,torch", "--workloads", "gru,cnn",
            "--repeat", "2", "--run-id", "plan"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("dry run (nothing runs): run plan: profile smoke")
    assert "round 0 (training run, 4 cells): numpy_ref x gru, torch x gru, numpy_ref x cnn" in out
    assert "round 1 (timing round, 4 cells): numpy_ref x gru [r1]" in out
    # the estimate: 4 training runs at ~40 s and 4 timing cells at ~8 s (profiles.py), and ci's
    assert "about 3 min by the profile's estimate (2-core CPU); --profile ci: about 48 s" in out
    assert not results.exists() and not data.exists()
    # a refused option is refused in a dry run too (one line, exit 2)
    assert main([*argv[:-2], "--run-id", "plan2", "--repeat", "0"]) == 2
    assert not results.exists()
