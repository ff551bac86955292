"""Hostile files: pickles that run code, tarballs that write outside the data directory."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from data_helpers import (
    EvilOpen,
    copy_dataset,
    evil_pickle,
    file_member,
    object_npy_with_payload,
    rewrite_cifar_member,
    synthetic_dir,
    tar_bytes,
    vouch,
    write_npz,
)

from rosetta.datasets import load_cifar10, load_imdb, safe_extract
from rosetta.datasets.safe_pickle import safe_load
from rosetta.datasets.tarsafe import check_member
from rosetta.errors import DataError


def test_evil_payload_is_live(tmp_path):
    """Positive control: plain pickle really would run the payload."""
    marker = tmp_path / "pwned"
    pickle.loads(pickle.dumps(EvilOpen(marker))).close()
    assert marker.exists()


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_safe_load_refuses_os_system(tmp_path, protocol):
    marker = tmp_path / "pwned"
    with pytest.raises(DataError, match=r"evil\.pkl: refusing to unpickle (posix|os|nt)\.system"):
        safe_load(evil_pickle(marker, protocol), source=tmp_path / "evil.pkl")
    assert not marker.exists()


def test_safe_load_refuses_builtins_open(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(DataError, match=r"refusing to unpickle (io|builtins)\.open"):
        safe_load(pickle.dumps(EvilOpen(marker)), source="x.pkl")
    assert not marker.exists()


def test_safe_load_accepts_numpy_arrays_and_plain_data():
    obj = {b"a": np.arange(6, dtype=np.uint8).reshape(2, 3), b"b": [1, 2.5, b"x", "y", None]}
    for protocol in (2, 4):
        got = safe_load(pickle.dumps(obj, protocol=protocol), source="ok.pkl")
        np.testing.assert_array_equal(got[b"a"], obj[b"a"])
        assert got[b"b"] == obj[b"b"]


def test_garbage_pickle_is_a_data_error():
    with pytest.raises(DataError, match="junk.pkl: not a valid pickle"):
        safe_load(b"\x80\x02}q\x00(X\x01", source="junk.pkl")


def test_cifar_member_with_malicious_pickle_is_refused(tmp_path):
    archive = copy_dataset("cifar10", tmp_path)
    marker = tmp_path / "pwned"
    rewrite_cifar_member(archive, "data_batch_2", evil_pickle(marker))  # checksum vouched for
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path)
    assert "data_batch_2: refusing to unpickle" in str(err.value)
    assert "\n" not in str(err.value)
    assert not marker.exists()


def test_imdb_object_array_with_malicious_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    ok = np.load(synthetic_dir("imdb") / "imdb.npz", allow_pickle=True)
    arrays = {k: ok[k] for k in ("y_train", "x_test", "y_test")}
    path = tmp_path / "imdb.npz"
    write_npz(path, arrays, raw={"x_train": object_npy_with_payload(evil_pickle(marker, 4))})
    vouch(path)
    with pytest.raises(DataError, match=r"imdb.npz:x_train.npy: refusing to unpickle"):
        load_imdb(tmp_path)
    assert not marker.exists()


def test_imdb_loader_never_uses_allow_pickle(monkeypatch):
    """The loader must not hand files to np.load(allow_pickle=True)."""
    real_load = np.load

    def guarded(*args, **kwargs):
        assert not kwargs.get("allow_pickle"), "np.load(allow_pickle=True) called"
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", guarded)
    data = load_imdb(synthetic_dir("imdb"))
    assert data.x_train.shape[1] == 150


def _sym(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _dev(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    return info


HOSTILE = {
    "dotdot": [(file_member("cifar-10-batches-py/../../evil"), b"x")],
    "absolute": [(file_member("/tmp/rosetta-evil-abs"), b"x")],
    "symlink": [
        (_sym("cifar-10-batches-py/link", "../../"), None),
        (file_member("cifar-10-batches-py/link/evil"), b"x"),
    ],
    "hardlink": [(_sym("cifar-10-batches-py/hard", "/etc/passwd", tarfile.LNKTYPE), None)],
    "device": [(_dev("cifar-10-batches-py/null"), None)],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_safe_extract_refuses_hostile_tarballs(tmp_path, kind):
    outside = tmp_path / "outside"
    dest = outside / "data" / "dest"
    dest.mkdir(parents=True)
    archive = tmp_path / "evil.tar.gz"
    benign = [(file_member("cifar-10-batches-py/readme.html"), b"hello")]
    archive.write_bytes(tar_bytes(benign + HOSTILE[kind]))
    before = {p for p in tmp_path.rglob("*")}
    with pytest.raises(DataError, match="evil.tar.gz: unsafe archive") as err:
        safe_extract(archive, dest)
    assert "\n" not in str(err.value)
    assert {p for p in tmp_path.rglob("*")} == before  # nothing written anywhere
    assert not os.path.lexists("/tmp/rosetta-evil-abs")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_cifar_loader_refuses_hostile_tarballs(tmp_path, kind):
    archive = tmp_path / "cifar-10-python.tar.gz"
    archive.write_bytes(tar_bytes(HOSTILE[kind]))
    vouch(archive)
    with pytest.raises(DataError, match="unsafe archive"):
        load_cifar10(tmp_path)


def test_safe_extract_extracts_benign_archive(tmp_path):
    archive = tmp_path / "ok.tar.gz"
    archive.write_bytes(tar_bytes([(file_member("d/sub/a.txt"), b"abc")]))
    written = safe_extract(archive, tmp_path / "out")
    assert written == [(tmp_path / "out" / "d" / "sub" / "a.txt").resolve()]
    assert written[0].read_bytes() == b"abc"


def test_safe_extract_does_not_follow_existing_symlink_in_dest(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (dest / "d").symlink_to(tmp_path / "elsewhere")
    archive = tmp_path / "ok.tar.gz"
    archive.write_bytes(tar_bytes([(file_member("d/a.txt"), b"abc")]))
    with pytest.raises(DataError, match="outside"):
        safe_extract(archive, dest)
    assert not (tmp_path / "elsewhere" / "a.txt").exists()


@pytest.mark.parametrize(
    "name", ["../x", "a/../../x", "/abs", "C:/win", "a\\..\\x", "a/../b/../../x"]
)
def test_check_member_rejects_unsafe_names(name):
    with pytest.raises(DataError):
        check_member(file_member(name), "t.tar")


def test_datasets_import_no_framework_and_no_pillow():
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import rosetta.datasets, rosetta.cli.data\n"
        "from rosetta.datasets import random_image_batch, iterate_batches\n"
        "import numpy as np\n"
        "random_image_batch(0, size=8); list(iterate_batches(np.zeros(4), np.zeros(4), 2))\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "std = set(sys.stdlib_module_names)\n"
        "print(','.join(sorted(m for m in new if m not in std and not m.startswith('_'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # cython_runtime is registered by NumPy's compiled extensions (numpy.random)
    assert set(out.stdout.strip().split(",")) <= {"rosetta", "numpy", "cython_runtime"}, out.stdout
