"""Bad input: one clear line naming the file and the fix; nothing partial left behind."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
from data_helpers import (
    copy_dataset,
    rewrite_cifar_member,
    run_cli,
    synthetic_dir,
    vouch,
    write_npz,
)

from rosetta.datasets import (
    load_cifar10,
    load_imdb,
    synth_cifar10,
    write_synthetic_cifar10,
    write_synthetic_imdb,
)
from rosetta.datasets import paths as paths_mod
from rosetta.datasets.checksums import sidecar_path
from rosetta.datasets.paths import atomic_write, ensure_writable_dir, leftover_temp_files
from rosetta.errors import DataError


def one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg and msg
    return msg


def test_missing_cifar_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path)
    msg = one_line(err)
    assert "cifar-10-python.tar.gz" in msg and str(tmp_path) in msg
    assert "rosetta data synth" in msg and "rosetta data fetch" in msg and "by hand" in msg


def test_missing_imdb_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as err:
        load_imdb(tmp_path)
    msg = one_line(err)
    assert "imdb.npz" in msg and "rosetta data synth" in msg and "rosetta data fetch" in msg


@pytest.mark.parametrize("dataset", ["cifar10", "imdb"])
def test_wrong_checksum_refused(tmp_path, dataset):
    path = copy_dataset(dataset, tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    loader = load_cifar10 if dataset == "cifar10" else load_imdb
    with pytest.raises(DataError) as err:
        loader(tmp_path)
    msg = one_line(err)
    assert path.name in msg and "does not match its synthetic sidecar" in msg
    assert "synth" in msg and "--force" in msg


@pytest.mark.parametrize("dataset", ["cifar10", "imdb"])
def test_file_without_sidecar_refused(tmp_path, dataset):
    path = copy_dataset(dataset, tmp_path)
    sidecar_path(path).unlink()
    loader = load_cifar10 if dataset == "cifar10" else load_imdb
    with pytest.raises(DataError, match="(matches neither|no synthetic sidecar vouches)"):
        loader(tmp_path)


@pytest.mark.parametrize("dataset", ["cifar10", "imdb"])
def test_truncated_archive(tmp_path, dataset):
    path = copy_dataset(dataset, tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    loader = load_cifar10 if dataset == "cifar10" else load_imdb
    with pytest.raises(DataError) as err:  # checksum catches it first
        loader(tmp_path)
    assert path.name in one_line(err)
    vouch(path)  # even if something vouches for the bytes, the format check catches it
    with pytest.raises(DataError) as err:
        loader(tmp_path)
    msg = one_line(err)
    assert path.name in msg and ("truncated" in msg or "not a readable" in msg)


def test_cifar_pickle_with_wrong_keys(tmp_path):
    archive = copy_dataset("cifar10", tmp_path)
    bad = pickle.dumps({b"pixels": np.zeros((4, 3072), np.uint8), b"labels": [0] * 4}, protocol=2)
    rewrite_cifar_member(archive, "test_batch", bad)
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path)
    msg = one_line(err)
    assert "test_batch: missing key(s) ['data']" in msg and "pixels" in msg


def test_cifar_pickle_with_wrong_shape(tmp_path):
    archive = copy_dataset("cifar10", tmp_path)
    bad = pickle.dumps({b"data": np.zeros((4, 1024), np.uint8), b"labels": [0] * 4}, protocol=2)
    rewrite_cifar_member(archive, "data_batch_1", bad)
    with pytest.raises(DataError, match=r"data_batch_1: 'data' has shape \(4, 1024\)"):
        load_cifar10(tmp_path)


def _imdb_arrays():
    with np.load(synthetic_dir("imdb") / "imdb.npz", allow_pickle=True) as z:
        return {k: z[k] for k in ("x_train", "y_train", "x_test", "y_test")}


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda a: a.pop("y_test"), r"missing array\(s\) \['y_test'\]"),
        (lambda a: a.update(x_train=np.zeros((3, 4), np.int64)), "1-D object array"),
        (lambda a: a.update(y_train=a["y_train"] + 5), "labels must be 0 or 1"),
        (lambda a: a.update(y_test=a["y_test"][:10]), "expected 1000 integer labels"),
    ],
)
def test_imdb_npz_with_wrong_arrays(tmp_path, mutate, expected):
    arrays = _imdb_arrays()
    mutate(arrays)
    path = tmp_path / "imdb.npz"
    write_npz(path, arrays)
    vouch(path)
    with pytest.raises(DataError, match=expected) as err:
        load_imdb(tmp_path)
    assert "imdb.npz" in one_line(err)


def test_data_dir_under_a_regular_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError) as err:
        write_synthetic_imdb(blocker / "data", n_train=10, n_test=10)
    msg = one_line(err)
    assert "cannot be created" in msg and "--data-dir" in msg


def test_read_only_data_dir_simulated(tmp_path, monkeypatch):
    """Root ignores chmod, so simulate EROFS at the point where a file gets created."""

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(paths_mod.tempfile, "mkstemp", refuse)
    with pytest.raises(DataError) as err:
        write_synthetic_cifar10(tmp_path, n_train=10, n_test=10)
    msg = one_line(err)
    assert "is not writable (Read-only file system)" in msg and "ROSETTA_DATA_DIR" in msg
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_data_dir_chmod(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(DataError, match="not writable"):
            ensure_writable_dir(ro)
    finally:
        ro.chmod(0o755)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "f.bin"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as fh:
            fh.write(b"partial")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_synth_leaves_nothing_that_looks_valid(tmp_path, monkeypatch):
    copy_dataset("cifar10", tmp_path)  # an older valid dataset is being overwritten
    calls = {"n": 0}
    real = synth_cifar10.dumps_py2

    def flaky(obj):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(obj)

    monkeypatch.setattr(synth_cifar10, "dumps_py2", flaky)
    with pytest.raises(KeyboardInterrupt):
        write_synthetic_cifar10(tmp_path, seed=9, n_train=50, n_test=10)
    assert leftover_temp_files(tmp_path) == []
    # the old archive is intact, but its sidecar was withdrawn first: refused, not misused
    with pytest.raises(DataError, match="no synthetic sidecar vouches for it"):
        load_cifar10(tmp_path)


def test_atomic_write_temp_is_in_same_dir(tmp_path, monkeypatch):
    seen = {}
    real = tempfile.mkstemp

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(paths_mod.tempfile, "mkstemp", spy)
    with atomic_write(tmp_path / "x") as fh:
        fh.write(b"1")
    assert seen["dir"] == tmp_path and (tmp_path / "x").read_bytes() == b"1"


# --- through the CLI -------------------------------------------------------------------


def test_cli_synth_info_and_load(tmp_path, capsys):
    argv = ["data", "synth", "--data-dir", str(tmp_path), "--seed", "1"]
    sizes = [
        "--cifar-train",
        "100",
        "--cifar-test",
        "20",
        "--imdb-train",
        "30",
        "--imdb-test",
        "20",
    ]
    assert run_cli(argv + sizes) == 0
    out = capsys.readouterr().out
    assert "cifar10: wrote synthetic" in out and "imdb: wrote synthetic" in out
    assert run_cli(argv + sizes) == 0  # second time: left unchanged
    assert "left unchanged (use --force" in capsys.readouterr().out
    assert run_cli(["data", "info", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cifar10  synthetic" in out and "train 100, test 20" in out
    assert "imdb     synthetic" in out and "sha256 ok (synthetic sidecar; seed 1)" in out
    assert load_cifar10(tmp_path).x_train.shape == (100, 3, 32, 32)


def test_cli_info_reports_missing_and_invalid(tmp_path, capsys):
    assert run_cli(["data", "info", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cifar10  missing" in out and "imdb     missing" in out
    path = copy_dataset("imdb", tmp_path)
    path.write_bytes(path.read_bytes()[:100])
    assert run_cli(["data", "info", "--data-dir", str(tmp_path)]) == 1
    assert "imdb     invalid" in capsys.readouterr().out


def test_cli_bad_data_dir_is_one_line_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = run_cli(["data", "synth", "--data-dir", str(blocker / "d"), "--dataset", "imdb"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rosetta: error: data directory")


def test_cli_env_var_data_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROSETTA_DATA_DIR", str(tmp_path / "env"))
    assert run_cli(["data", "info"]) == 0
    assert f"data directory: {tmp_path / 'env'}" in capsys.readouterr().out


def test_default_data_dir_is_repo_data(monkeypatch):
    monkeypatch.delenv("ROSETTA_DATA_DIR", raising=False)
    import rosetta
    from rosetta.datasets import default_data_dir

    assert default_data_dir() == paths_mod.Path(rosetta.__file__).resolve().parents[1] / "data"
