"""Bounded archives: sizes and counts are checked from headers before a member is read.

The archives here are real compression bombs made on the fly (megabytes of zeros compress to
kilobytes); nothing large is committed. ``tracemalloc`` shows the refusal allocates nothing
near what the archive claims (Python-level allocations: where tarfile/zipfile buffers live).
"""

from __future__ import annotations

import io
import tarfile
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest
from data_helpers import file_member, tar_bytes, vouch, write_npz

from rosetta.datasets import load_cifar10, load_imdb, safe_extract
from rosetta.datasets.cifar10 import MAX_BATCH_BYTES
from rosetta.datasets.safe_npz import DEFAULT_LIMITS as NPZ_LIMITS
from rosetta.datasets.safe_npz import read_npz
from rosetta.datasets.tarsafe import TarLimits
from rosetta.errors import DataError

BOMB_BYTES = 200 * 2**20  # what the bombs expand to; their files are a few hundred kB
PEAK_LIMIT = 40 * 2**20  # the refusal must allocate far less than the bomb (5x margin)


class _Zeros(io.RawIOBase):
    """A readable stream of ``n`` zero bytes (so the bomb is never in memory either)."""

    def __init__(self, n: int):
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


def cifar_bomb(path, member="cifar-10-batches-py/data_batch_1", size=BOMB_BYTES):
    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        info = file_member(member)
        info.size = size
        tf.addfile(info, io.BufferedReader(_Zeros(size), 1 << 20))
    return path


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_cifar_gzip_bomb_is_refused_from_its_header(tmp_path):
    archive = cifar_bomb(tmp_path / "cifar-10-python.tar.gz")
    assert archive.stat().st_size < 2**20  # under a megabyte on disk
    vouch(archive)  # the attacker also hands over a sidecar: the checksum is no defence

    def load():
        with pytest.raises(DataError) as err:
            load_cifar10(tmp_path)
        msg = str(err.value)
        assert f"declares {BOMB_BYTES:,} bytes, more than the {MAX_BATCH_BYTES:,}" in msg
        assert "data_batch_1" in msg and "\n" not in msg

    assert _peak(load) < PEAK_LIMIT


def test_small_members_have_small_bounds(tmp_path):
    archive = cifar_bomb(
        tmp_path / "cifar-10-python.tar.gz", "cifar-10-batches-py/batches.meta", 2 * 2**20
    )
    vouch(archive)
    with pytest.raises(DataError, match="batches.meta' declares 2,097,152 bytes"):
        load_cifar10(tmp_path)


def test_too_many_members(tmp_path):
    archive = tmp_path / "cifar-10-python.tar.gz"
    archive.write_bytes(
        tar_bytes([(file_member(f"cifar-10-batches-py/f{i}"), b"x") for i in range(20)])
    )
    vouch(archive)
    with pytest.raises(DataError, match="more than 16 members"):
        load_cifar10(tmp_path)


def test_duplicate_member_names(tmp_path):
    archive = tmp_path / "cifar-10-python.tar.gz"
    member = "cifar-10-batches-py/data_batch_1"
    archive.write_bytes(tar_bytes([(file_member(member), b"a"), (file_member(member), b"b")]))
    vouch(archive)
    with pytest.raises(DataError, match="duplicate member name 'cifar-10-batches-py/data_batch_1'"):
        load_cifar10(tmp_path)
    with pytest.raises(DataError, match="duplicate member name"):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out" / "cifar-10-batches-py").exists()


def test_total_decompressed_bytes_are_bounded(tmp_path):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_bytes([(file_member(f"d/f{i}"), bytes(100)) for i in range(3)]))
    limits = TarLimits(max_member_bytes=100, max_total_bytes=250)
    with pytest.raises(DataError, match="members total more than 250 bytes uncompressed"):
        safe_extract(archive, tmp_path / "out", limits)
    assert safe_extract(archive, tmp_path / "ok", TarLimits(max_total_bytes=300))  # same: fits


def _npz_bomb(path, size=BOMB_BYTES):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<i8", "fortran_order": False, "shape": (size // 8,)}
        )
        with zf.open("x_train.npy", "w", force_zip64=True) as fh:
            fh.write(header.getvalue())
            src = _Zeros(size)
            while chunk := src.read(1 << 20):
                fh.write(chunk)
    return path


def test_npz_bomb_is_refused_from_the_zip_directory(tmp_path):
    path = _npz_bomb(tmp_path / "imdb.npz")
    assert path.stat().st_size < 2**20
    vouch(path)

    def load():
        with pytest.raises(DataError) as err:
            load_imdb(tmp_path)
        msg = str(err.value)
        assert "member 'x_train.npy' declares" in msg
        assert f"more than {NPZ_LIMITS.max_member_bytes:,}" in msg

    assert _peak(load) < PEAK_LIMIT


def test_npy_header_claiming_more_than_the_member_holds(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<i8", "fortran_order": False, "shape": (10**12,)}
    )
    path = tmp_path / "x.npz"
    write_npz(path, {}, raw={"y_train": header.getvalue() + bytes(64)})
    with pytest.raises(DataError, match="header claims 8,000,000,000,000 bytes"):
        read_npz(path, ("y_train",), fix="fix it")


def test_npz_duplicate_member_names(tmp_path):
    path = tmp_path / "x.npz"
    with zipfile.ZipFile(path, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("y_train.npy", b"a")
        zf.writestr("y_train.npy", b"b")
    with pytest.raises(DataError, match="duplicate member name 'y_train.npy'"):
        read_npz(path, ("y_train",), fix="fix it")


def test_zeros_stream_is_what_it_says():
    """The bombs' source: really ``n`` zero bytes, so the sizes above are the real ones."""
    data = io.BufferedReader(_Zeros(3 * 2**20 + 5), 1 << 20).read()
    assert len(data) == 3 * 2**20 + 5 and not any(data[::4096])
    assert len(zlib.compress(data, 1)) < len(data) // 100


def test_tar_compression_ratio_is_bounded(tmp_path):
    """Within every size bound, yet 2 MiB of zeros from a few kB: refused as a bomb."""
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = file_member("d/zeros")
        info.size = 2 * 2**20
        tf.addfile(info, io.BufferedReader(_Zeros(info.size), 1 << 20))
    with pytest.raises(DataError, match="members expand more than 20 times its size"):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out" / "d").exists()


def test_npz_compression_ratio_is_bounded(tmp_path):
    path = tmp_path / "x.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("y_train.npy", bytes(2 * 2**20))
    with pytest.raises(DataError, match=r"member 'y_train.npy' expands \d+ times \(more than 16"):
        read_npz(path, ("y_train",), fix="fix it")
