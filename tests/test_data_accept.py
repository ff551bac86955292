"""``rosetta data accept``: a user's own copy, checked by its contents, runs as user-provided.

The copies are the small synthetic data sets re-packed the way a mirror would (Python 3
pickles with str keys, another compression), so their bytes match no checksum Rosetta knows.
The official counts are patched down to the small sizes (the checks read them at call time);
everything else is the real code path, CLI included.
"""

from __future__ import annotations

import io
import pickle
import re
import shutil
import tarfile
import zipfile

import numpy as np
import pytest
from data_helpers import run_cli, synthetic_dir

from rosetta.datasets import cifar10, imdb, load_cifar10, load_imdb, prepare_data
from rosetta.datasets.checksums import read_sidecar
from rosetta.errors import DataError

SMALL = {"n_train": 500, "n_test": 100}


def cli_error(argv: list[str], capsys) -> str:
    """Run the CLI expecting a user error: exit status 2 and one line on stderr."""
    capsys.readouterr()
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rosetta: error: ")
    return err


@pytest.fixture
def small_official(monkeypatch):
    """Pretend the official data sets have the small synthetic sizes."""
    monkeypatch.setattr(cifar10, "OFFICIAL_SIZES", {"train": 500, "test": 100})
    monkeypatch.setattr(cifar10, "BATCH_IMAGES", 100)
    monkeypatch.setattr(imdb, "OFFICIAL_SIZES", {"train": 60, "test": 40})


def _str_keys(obj):
    if isinstance(obj, dict):
        return {(k.decode() if isinstance(k, bytes) else k): _str_keys(v) for k, v in obj.items()}
    return obj


def repacked_cifar(dest, mutate=None):
    """The small synthetic CIFAR-10 re-pickled (protocol 4, str keys) and re-compressed."""
    src = synthetic_dir("cifar10", **SMALL) / "cifar-10-python.tar.gz"
    out = io.BytesIO()
    with tarfile.open(src) as tin, tarfile.open(fileobj=out, mode="w:bz2") as tout:
        for m in tin.getmembers():
            if not m.isreg():
                tout.addfile(m)
                continue
            data = tin.extractfile(m).read()
            if not m.name.endswith("readme.html"):
                obj = _str_keys(pickle.loads(data, encoding="bytes"))  # our own trusted file
                if isinstance(obj, dict):  # a user's copy of the real set has no synthetic marker
                    obj.pop("rosetta_synthetic", None)
                if mutate:
                    mutate(m.name.rsplit("/", 1)[-1], obj)
                data = pickle.dumps(obj, protocol=4)
            m.size = len(data)
            tout.addfile(m, io.BytesIO(data))
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "cifar-10-python.tar.gz"
    path.write_bytes(out.getvalue())
    return path


def test_repacked_cifar_is_refused_until_accepted_then_runs_as_user_provided(
    tmp_path, small_official, capsys
):
    mirror = repacked_cifar(tmp_path / "mirror")
    data_dir = tmp_path / "data"
    shutil.copy(mirror, tmp_path / "mirror-copy.tar.gz")
    data_dir.mkdir()
    shutil.copy(mirror, data_dir / mirror.name)
    with pytest.raises(DataError, match="rosetta data accept PATH"):
        load_cifar10(data_dir)  # unknown bytes: refused, and the fix is named
    (data_dir / mirror.name).unlink()

    assert run_cli(["data", "accept", str(mirror), "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "accepted as user-provided" in out and "train: 500 samples, 10 classes of 50" in out
    side = read_sidecar(data_dir / mirror.name)
    assert side["source"] == "user-provided" and side["synthetic"] is False
    assert side["accepted_from"] == str(mirror) and len(side["members"]) == 7

    got = load_cifar10(data_dir)
    ref = load_cifar10(synthetic_dir("cifar10", **SMALL))
    assert got.source == "user-provided" and got.checksum.source == "user-provided"
    np.testing.assert_array_equal(got.x_train, ref.x_train)  # str keys read like bytes keys
    np.testing.assert_array_equal(got.y_test, ref.y_test)
    assert got.label_names == ref.label_names

    assert prepare_data(["cifar10"], data_dir, say=print) == {"cifar10": "user-provided"}
    assert "data: cifar10 user-provided" in capsys.readouterr().out
    assert run_cli(["data", "info", "--data-dir", str(data_dir)]) == 0
    assert "user-provided" in capsys.readouterr().out

    raw = bytearray((data_dir / mirror.name).read_bytes())
    raw[-100] ^= 1  # a changed byte after acceptance is refused like any other
    (data_dir / mirror.name).write_bytes(bytes(raw))
    with pytest.raises(DataError, match="does not match its user-provided sidecar"):
        load_cifar10(data_dir)


def test_accepted_folder_runs_as_user_provided(tmp_path, small_official):
    mirror = repacked_cifar(tmp_path / "mirror")
    data_dir = tmp_path / "data"
    with tarfile.open(mirror) as tf:
        tf.extractall(data_dir, filter="data")
    folder = data_dir / "cifar-10-batches-py"
    with pytest.raises(DataError, match="matches neither"):
        load_cifar10(data_dir)
    assert run_cli(["data", "accept", str(folder)]) == 0
    assert load_cifar10(data_dir).source == "user-provided"


def _imbalance(name, obj):
    if name == "data_batch_2":
        obj["labels"] = [0] * len(obj["labels"])


def _short(name, obj):
    if name == "test_batch":
        obj["data"], obj["labels"] = obj["data"][:90], obj["labels"][:90]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_imbalance, r"train labels per class \[140, 40, "),
        (_short, "test_batch holds 90 images, the official batches hold 100"),
    ],
)
def test_a_copy_that_is_not_the_data_set_is_refused(
    tmp_path, small_official, mutate, expected, capsys
):
    mirror = repacked_cifar(tmp_path / "mirror", mutate)
    err = cli_error(["data", "accept", str(mirror), "--data-dir", str(tmp_path / "data")], capsys)
    assert re.search(expected, err) and "nothing was accepted" in err
    assert not (tmp_path / "data").exists()


def test_counts_must_be_the_official_ones(tmp_path, capsys):
    mirror = repacked_cifar(tmp_path / "mirror")  # 500 + 100 images, official 50000 + 10000
    err = cli_error(["data", "accept", str(mirror), "--data-dir", str(tmp_path / "data")], capsys)
    assert "data_batch_1 holds 100 images, the official batches hold 10000" in err


def test_repacked_imdb_is_accepted_as_user_provided(tmp_path, small_official, capsys):
    src = synthetic_dir("imdb", n_train=60, n_test=40) / "imdb.npz"
    mirror = tmp_path / "mirror" / "imdb_mirror.npz"
    mirror.parent.mkdir()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(mirror, "w", zipfile.ZIP_STORED) as zout:
        for name in ("x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"):
            zout.writestr(name, zin.read(name))  # no synthetic marker, other compression
    data_dir = tmp_path / "data"
    assert run_cli(["data", "accept", str(mirror), "--data-dir", str(data_dir)]) == 0
    assert "imdb: " in capsys.readouterr().out
    got, ref = load_imdb(data_dir), load_imdb(src.parent)
    assert got.source == "user-provided" and ref.source == "synthetic"
    np.testing.assert_array_equal(got.x_train, ref.x_train)


def test_unknown_kind_of_file_names_the_option(tmp_path, capsys):
    path = tmp_path / "cifar.zip"
    path.write_bytes(b"PK")
    assert "pass --dataset {cifar10,imdb}" in cli_error(["data", "accept", str(path)], capsys)


def test_meta_keys_as_str_or_bytes_are_one_format(tmp_path):
    ref = load_cifar10(synthetic_dir("cifar10", **SMALL))
    names, _ = cifar10._meta({"label_names": [n.encode() for n in ref.label_names]}, "x")
    names_b, _ = cifar10._meta({b"label_names": list(ref.label_names)}, "x")
    assert names == names_b == ref.label_names
