"""Issue 21, items 5, 6 and 10, and issue 33, items 5 and 10: option extremes refused with one line
naming the option and its valid values before anything runs (each through ``rosetta bench``), the
whole selection pinned in ``run.json``, argparse errors in one line with a hint."""

from __future__ import annotations

import json

import pytest

from rosetta.cli import main
from rosetta.runtime import usable_cores


def _bench(tmp_path, *args: str) -> None:
    """``rosetta bench`` with ``args``; checks that it refused (status 2) and wrote nothing."""
    try:
        code = main(["bench", "--results-dir", str(tmp_path / "results"), *args])
    except SystemExit as exc:  # argparse refusals exit from inside the parser
        code = exc.code
    assert code == 2
    results = tmp_path / "results"
    assert not results.exists() or not any(results.iterdir()), "a refused run left files"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--threads", str(usable_cores() + 1)], "usable cores of this machine"),
        (["--threads", "4096"], "--threads: must be an integer >= 1 and <= 1024, got 4096"),
        (["--threads", "1e23"], "--threads: expected an integer, got '1e23'"),
        (["--threads", "1" + "0" * 23], "must be an integer >= 1 and <= 1024"),
        (["--seed", "1e30"], "--seed: expected an integer, got '1e30'"),
        (["--seed", str(2**32)], "--seed: must be an integer >= 0 and <= 4294967295"),
        (["--memory-limit-mb", str(2**40)], "must be an integer >= 64 and <= 134217728"),
        (["--results-dir", ""], "--results-dir: an empty path"),
        (["--report-dir", ""], "--report-dir: an empty path"),
        (["--nonsense"], "unrecognized arguments: --nonsense"),
        (["--executor", "slurm"], "--executor 'slurm': valid: papermill, python, ray"),
        # issue 33, item 10: bounds of their own, documented in the option's help and README
        (["--wait-quiet", "1e9"], "--wait-quiet 1e9: out of bounds; give a number of seconds "
         "from 0 to 3600"),
        (["--timeout", "1e-300"], "--timeout 1e-300: out of bounds; give a number of seconds "
         "from 1 to 604800"),
        (["--sample-every", "1e23"], "--sample-every: expected an integer, got '1e23'; give an "
         "integer >= 1 and <= 10000"),
        (["--sample-every", "1" + "0" * 23], "--sample-every: must be an integer >= 1 and <= "
         "10000"),
        (["--batch-sizes", ""], "--batch-sizes '': no batch size given"),
        (["--precisions", ""], "--precisions '': an empty name; give a comma list of fp32, bf16, "
         "fp16"),
        (["--torch-compile", "maybe"], "option torch.compile: 'maybe' is not one of default, on, "
         "off"),
        (["--paddle-static", "maybe"], "option paddle.static: 'maybe' is not one of default, on"),
        (["--keras-step", "fit"], "option keras_jax.step: 'fit' is not one of default, keras, "
         "custom"),
        (["--option", "torch.fuse=yes"], "backend 'torch' has no option 'fuse' (its options: "
         "compile)"),
        (["--option", "torch.compile"], "--option 'torch.compile': expected BACKEND.NAME=VALUE"),
        (["--option", "chainer.xla=on"], "backend 'chainer' has no option 'xla' (its options: "
         "none)"),
        (["--lanes", "fastest"], "--lanes: unknown lane 'fastest'; valid: fast, default"),
        (["--dtype", "float16"], "--dtype 'float16': valid: float32, float64"),
        # issue 33, item 5: the run's size bounded up front, with a time estimate
        (["--repeat", "100000"], "--repeat 100000: 100,000 cells, about 138.9 h (1 training run "
         "at ~12 s and 99,999 timing rounds at ~5 s a cell, ci), over the bound of 100 rounds and "
         "2,000 cells; valid: --repeat 1..100"),
        (["--repeat", "100000000", "--allow-large-run"], "--repeat 100000000: 100,000,000 cells"
         ", about 138,888.9 h (1 training run at ~12 s and 99,999,999 timing rounds at ~5 s a "
         "cell, ci), beyond the hard bound of 1,000,000 cells"),
        # the override lifts the bound: the next check (the quiet wait) is the one that speaks
        (["--repeat", "101", "--allow-large-run", "--wait-quiet", "-1"], "--wait-quiet -1: out"),
    ],
)  # fmt: skip
def test_option_extremes_are_one_line(tmp_path, capsys, args, message):
    _bench(tmp_path, "--profile", "ci", "--backends", "numpy_ref", "--workloads", "gru", *args)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rosetta: error: ") and message in err[0], err
    if err[0].startswith("rosetta: error: argument") or "unrecognized" in err[0]:
        assert "--help`" in err[0] and "usage:" not in err[0]  # the hint, not the usage block


def test_a_memory_cap_above_the_hard_limit_is_refused_up_front(monkeypatch):
    import resource

    from rosetta.errors import RosettaError
    from rosetta.runner import guards

    monkeypatch.setattr(resource, "getrlimit", lambda what: (2**30, 2**30))  # a 1 GiB hard cap
    with pytest.raises(RosettaError, match=r"beyond the address space .*\(1024 MB\)"):
        guards.check_memory_limit(2048)
    guards.check_memory_limit(512)  # below it: fine


def test_a_report_dir_naming_a_file_is_refused_before_the_run(tmp_path, capsys):
    blocker = tmp_path / "report.html"
    blocker.write_text("x")
    _bench(tmp_path, "--backends", "numpy_ref", "--workloads", "gru", "--report-dir", str(blocker))
    err = capsys.readouterr().err.strip()
    assert f"report directory {blocker} is a file" in err


def test_report_dir_env_is_honoured(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "envfile"
    blocker.write_text("x")
    monkeypatch.setenv("ROSETTA_REPORT_DIR", str(blocker))
    _bench(tmp_path, "--backends", "numpy_ref", "--workloads", "gru")
    assert f"report directory {blocker} is a file" in capsys.readouterr().err


def test_a_missing_models_folder_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROSETTA_MODELS", str(tmp_path / "nowhere"))
    _bench(tmp_path, "--backends", "numpy_ref", "--workloads", "gru")
    err = capsys.readouterr().err.strip()
    assert "ROSETTA_MODELS" in err and "is not a folder" in err and "valid: " not in err


def test_the_cell_count_bound_counts_every_axis(tmp_path, capsys):
    _bench(tmp_path, "--profile", "ci", "--backends", "numpy_ref", "--workloads", "gru",
           "--batch-sizes", ",".join(str(b) for b in range(1, 41)), "--repeat", "60")  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "--repeat 60: 2,400 cells" in err and "valid: --repeat 1..50" in err, err


def test_cuda_where_none_is_visible_is_refused_up_front(tmp_path, capsys, monkeypatch):
    from rosetta.runner import guards

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hides every GPU, on any machine
    _bench(tmp_path, "--backends", "numpy_ref", "--workloads", "gru", "--device", "cuda")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rosetta: error: --device cuda: no CUDA GPU here (CUDA_VISIBLE_DEVICES='' "
                   "hides every GPU); valid here: cpu, auto"]  # fmt: skip
    assert guards.cuda_visible()[0] is False


def test_an_extra_backend_cannot_replace_a_built_in(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROSETTA_EXTRA_BACKENDS", "numpy_ref=tests.fault_backend")
    _bench(tmp_path, "--backends", "numpy_ref", "--workloads", "gru")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'numpy_ref' is a built-in backend and cannot be replaced" in err[0]
    assert "built-in: numpy_ref, torch" in err[0]


def test_an_extra_module_that_is_no_backend_is_not_ready(tmp_path, small_data, capsys, monkeypatch):
    monkeypatch.setenv("ROSETTA_EXTRA_BACKENDS", "x=os")
    assert main(["list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["x"]]
    assert listed and "module os is not a rosetta backend" in listed[0], listed
    code = main(["bench", "--profile", "ci", "--results-dir", str(tmp_path / "results"),
                 "--data-dir", str(small_data), "--no-report", "--executor", "python",
                 "--backends", "x", "--workloads", "gru", "--run-id", "x"])  # fmt: skip
    rec = json.loads((tmp_path / "results" / "x" / "x__gru.json").read_text())
    assert code == 0 and rec["status"] == "skipped"  # never run as if it were one
    assert "module os is not a rosetta backend (it lacks NAME" in rec["error"]


def test_threads_above_the_cores_need_oversubscribe_and_are_recorded(tmp_path):
    from rosetta.runner.guards import check_threads
    from rosetta.runner.rundir import RunDir

    check_threads(usable_cores() + 1, oversubscribe=True)  # allowed when asked for
    pinned = {"profile": "ci", "threads": usable_cores() + 1, "oversubscribe": True}
    with RunDir(tmp_path, "o", pinned, create=True):
        pass
    stored = json.loads((tmp_path / "o" / "run.json").read_text())["config"]
    assert stored["oversubscribe"] is True


@pytest.mark.parametrize(
    "key,value",
    [("backends", ["numpy_ref", "fault"]), ("workloads", ["gru", "cnn"]), ("executor", "python")],
)
def test_resume_pins_the_whole_selection(tmp_path, key, value):
    from rosetta.errors import RosettaError
    from rosetta.runner.rundir import RunDir

    first = {"profile": "ci", "backends": ["numpy_ref"], "workloads": ["gru"],
             "executor": "papermill"}  # fmt: skip
    with RunDir(tmp_path, "p", first, create=True):
        pass
    with pytest.raises(RosettaError, match=f"run 'p' was made with {key}="):
        RunDir(tmp_path, "p", {**first, key: value}, create=False)
    with RunDir(tmp_path, "p", dict(first), create=False):  # the same selection resumes
        pass
