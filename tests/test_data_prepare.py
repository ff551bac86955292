"""No silent data shortfalls: what a run uses is said, and only the default dir is auto-filled.

Also: stale temporary files of an interrupted write are removed by the next write, and the
hints of ``rosetta data info`` spell out ``--data-dir`` when it is not the default.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
from data_helpers import copy_dataset, run_cli

from rosetta.datasets import paths, prepare, registry, write_synthetic_imdb
from rosetta.datasets.paths import TEMP_PREFIX, atomic_write_bytes, leftover_temp_files
from rosetta.errors import DataError
from rosetta.runner.data import load_cell_data
from rosetta.spec import get_workload


@pytest.fixture
def fake_repo(tmp_path, monkeypatch):
    """Make ``tmp_path/repo`` the repo root (so its ``data/`` is the default data dir) and make
    IMDB synthesis small."""
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setattr(paths, "repo_root", lambda: root)
    monkeypatch.setattr(prepare, "repo_root", lambda: root)
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    entry = registry.get("imdb")
    small = dataclasses.replace(
        entry, synthesize=lambda d, **kw: write_synthetic_imdb(d, n_train=64, n_test=64)
    )
    monkeypatch.setitem(registry.REGISTRY, "imdb", small)
    return root


def test_mistyped_data_dir_is_an_error_and_creates_nothing(tmp_path, fake_repo):
    typo = tmp_path / "dtaa"
    with pytest.raises(DataError) as err:
        prepare.prepare_data(["imdb"], typo)
    msg = str(err.value)
    assert f"no IMDB in {typo} (named by --data-dir" in msg
    assert "`rosetta data synth --dataset imdb` (synthetic)" not in msg  # the hint names the dir
    assert f"rosetta data synth --data-dir {typo} --dataset imdb" in msg
    assert not typo.exists()


def test_bench_with_a_mistyped_data_dir_stops_before_running(tmp_path, fake_repo, capsys):
    typo = tmp_path / "dtaa"
    args = ["bench", "--backends", "numpy_ref", "--workloads", "gru", "--data-dir", str(typo)]
    assert run_cli([*args, "--results-dir", str(tmp_path / "results")]) == 2
    assert "no IMDB in" in capsys.readouterr().err
    assert not typo.exists() and not (tmp_path / "results").exists()


def test_env_var_data_dir_is_explicit_too(tmp_path, fake_repo, monkeypatch):
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "env"))
    with pytest.raises(DataError, match=r"named by \$ROSETTA_DATA_DIR"):
        prepare.prepare_data(["imdb"], None)


def test_only_the_default_data_dir_is_filled_automatically(fake_repo, capsys):
    sources = prepare.prepare_data(["imdb", "random_images"], None)
    assert sources == {"imdb": "synthetic", "random_images": "generated"}
    out = capsys.readouterr().out
    assert "writing the synthetic one" in out
    assert "data: imdb synthetic (" in out and "data: random_images generated" in out
    assert (fake_repo / "data" / "imdb.npz").is_file()
    # named explicitly, the default dir is still the default dir
    assert prepare.prepare_data(["imdb"], fake_repo / "data") == {"imdb": "synthetic"}


def test_every_cell_says_which_source_ran(tmp_path):
    copy_dataset("imdb", tmp_path)
    w = get_workload("gru")
    assert load_cell_data(w, w.profile("ci"), tmp_path).source == "synthetic"
    rn = get_workload("resnet50")
    assert load_cell_data(rn, rn.profile("ci"), tmp_path).source == "generated"


def test_a_killed_writer_leaves_a_temp_that_the_next_write_removes(tmp_path):
    code = (
        "import os, signal, sys\n"
        "from rosetta.datasets.paths import atomic_write\n"
        "with atomic_write(sys.argv[1]) as fh:\n"
        "    fh.write(b'x' * 100000); fh.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    target = tmp_path / "imdb.npz"
    proc = subprocess.run([sys.executable, "-c", code, str(target)], env=os.environ.copy())
    assert proc.returncode == -9
    (left,) = leftover_temp_files(tmp_path)  # what a killed `synth` leaves behind
    assert not target.exists() and left.stat().st_size == 100000
    assert run_cli(["data", "info", "--data-dir", str(tmp_path)]) == 0
    atomic_write_bytes(tmp_path / "other.bin", b"y")  # any next write into the directory
    assert leftover_temp_files(tmp_path) == []


def test_temps_of_a_live_writer_are_kept(tmp_path):
    mine = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-imdb.npz.abc"
    mine.write_bytes(b"in progress")
    legacy = tmp_path / f"{TEMP_PREFIX}imdb.npz.abc"  # older name, no process id: stale
    legacy.write_bytes(b"old")
    assert paths.remove_stale_temps(tmp_path) == [legacy]
    assert mine.exists()


def test_info_hints_name_the_data_dir(tmp_path, fake_repo, capsys):
    assert run_cli(["data", "info", "--data-dir", str(tmp_path / "elsewhere")]) == 0
    out = capsys.readouterr().out
    assert f"rosetta data synth --data-dir {tmp_path / 'elsewhere'} --dataset cifar10" in out
    assert run_cli(["data", "info"]) == 0  # the default dir: commands work as written
    out = capsys.readouterr().out
    assert "`rosetta data synth --dataset cifar10`" in out and "--data-dir" not in out
