"""Issue 21, item 2: a full or read-only disk, a permission refusal or a symlink loop is one line
naming the path and the fix; finished records are kept and a resume after freeing space
completes. ENOSPC/EROFS are simulated (``os.fsync``/``open`` raising them): a test cannot fill
or remount a disk portably, and as root ``chmod`` does not make a folder read-only."""

from __future__ import annotations

import builtins
import errno
import json
import os

import pytest

from rosetta.cli import main
from rosetta.errors import RosettaError
from rosetta.runner.rundir import RunDir
from tests.bench_helpers import bench, fault_env

CAUSES = {
    errno.ENOSPC: ("No space left on device", "free space"),
    errno.EROFS: ("Read-only file system", "writable disk"),
    errno.EACCES: ("Permission denied", "make it writable"),
}


def _bench(tmp_path, data, *args: str) -> int:
    return bench(tmp_path, data, "--executor", "python", "--workloads", "gru", *args)


def test_a_results_dir_symlink_loop_is_named_not_taken_for_an_existing_run(tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for target in (loop, loop / "sub"):
        assert main(["bench", "--results-dir", str(target), "--backends", "numpy_ref"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is a symlink loop" in err[0] and str(loop) in err[0], err
        assert "already exists" not in err[0] and "--results-dir" in err[0]


@pytest.mark.parametrize("code", sorted(CAUSES))
def test_the_lock_and_run_folder_refusals_are_one_line(tmp_path, monkeypatch, code):
    real_open = builtins.open

    def refusing(path, *a, **k):
        if str(path).endswith(".lock"):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", refusing)
    cause, fix = CAUSES[code]
    with pytest.raises(
        RosettaError, match=f"{tmp_path / 'r' / '.lock'}: cannot write \\({cause}\\); .*{fix}"
    ):
        RunDir(tmp_path, "r", {"profile": "ci"}, create=True)
    monkeypatch.setattr(builtins, "open", real_open)
    with RunDir(tmp_path, "r", {"profile": "ci"}, create=False):  # once the disk is fixed: resumes
        pass


@pytest.mark.parametrize("code", sorted(CAUSES))
def test_a_record_write_refused_is_one_line_and_leaves_no_partial(tmp_path, monkeypatch, code):
    from rosetta.runner import records

    def refusing(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", refusing)
    path = tmp_path / "run" / "numpy_ref__gru.json"
    rec = records.make_record(backend="numpy_ref", workload="gru", profile="ci", status="failed")
    cause, fix = CAUSES[code]
    with pytest.raises(RosettaError, match=f"{path}: cannot write \\({cause}\\); .*{fix}"):
        records.write_record(path, rec)
    assert list(path.parent.iterdir()) == []  # neither the record nor its .partial


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_a_full_disk_mid_run_keeps_finished_records_and_resume_completes(
    tmp_path, small_data, monkeypatch, capsys
):
    fault_env(monkeypatch, "")
    real_fsync = os.fsync
    full = {"on": True}

    def fsync(fd):  # the disk fills as the index is written after the first cell
        target = os.readlink(f"/proc/self/fd/{fd}")
        if full["on"] and ".index.json." in target:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert _bench(tmp_path, small_data, "--backends", "numpy_ref,fault", "--run-id", "d") == 2
    err = capsys.readouterr().err.strip().splitlines()
    run = tmp_path / "results" / "d"
    assert len(err) == 1, err
    assert f"{run / 'index.json'}: cannot write (No space left on device); free space" in err[0]
    assert "records written so far are kept; resume with --resume d" in err[0]
    assert json.loads((run / "numpy_ref__gru.json").read_text())["status"] == "ok"  # kept
    assert not list(run.glob(".*.partial"))
    full["on"] = False  # space freed
    assert _bench(tmp_path, small_data, "--backends", "numpy_ref,fault", "--resume", "d") == 0
    index = json.loads((run / "index.json").read_text())["cells"]
    assert {k: v["status"] for k, v in index.items()} == {
        "numpy_ref__gru": "ok",
        "fault__gru": "ok",
    }
    assert "already recorded, kept" in capsys.readouterr().out  # the first cell was not rerun


def test_an_oserror_nobody_named_is_still_one_line(tmp_path, monkeypatch, capsys):
    from rosetta.cli import list as list_cmd

    def broken(args):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "x"))

    monkeypatch.setattr(list_cmd, "run", broken)
    parser_args = ["list"]
    import rosetta.cli as cli

    real = cli.build_parser

    def build():
        p = real()
        p._subparsers._group_actions[0].choices["list"].set_defaults(func=broken)
        return p

    monkeypatch.setattr(cli, "build_parser", build)
    assert main(parser_args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rosetta: error: {tmp_path / 'x'}: cannot write (Read-only file system); "
                   "the file system is read-only: choose a folder on a writable disk"]  # fmt: skip
