"""Issue 21, items 5, 6 and 10: option extremes refused with one line before anything runs, the
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
        (["--threads", "4096"], "must be an integer <= 1024, got 4096"),
        (["--threads", "1e23"], "expected an integer, got '1e23'"),
        (["--threads", "1" + "0" * 23], "must be an integer <= 1024"),
        (["--seed", "1e30"], "expected an integer, got '1e30'"),
        (["--seed", str(2**32)], "must be an integer <= 4294967295"),
        (["--memory-limit-mb", str(2**40)], "must be an integer <= 134217728"),
        (["--results-dir", ""], "argument --results-dir: an empty path"),
        (["--report-dir", ""], "argument --report-dir: an empty path"),
        (["--nonsense"], "unrecognized arguments: --nonsense"),
        (["--executor", "slurm"], "invalid choice: 'slurm'"),
    ],
)
def test_option_extremes_are_one_line(tmp_path, capsys, args, message):
    _bench(tmp_path, "--backends", "numpy_ref", "--workloads", "gru", *args)
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
