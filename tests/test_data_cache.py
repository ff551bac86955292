"""A run's cache of decoded data cuts (``rosetta.runner.data``): the next cell with the same data
set and cut reads it instead of decoding again; a data file changed during the run, an unreadable
cache file or a cut over the size limit go back to the verified load."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

from rosetta import datasets
from rosetta.datasets import registry
from rosetta.errors import DataError
from rosetta.runner import data
from rosetta.spec import get_workload


@pytest.fixture
def imdb_dir(tmp_path):
    d = tmp_path / "data"
    datasets.write_synthetic_imdb(d, n_train=600, n_test=300)
    return d


@pytest.fixture
def loads(monkeypatch):
    """Count the verified loads (decodes) of IMDB."""
    real_get, calls = registry.get, []
    entry = real_get("imdb")

    def counted(root, options):
        calls.append(root)
        return entry.load(root, options)

    counting = replace(entry, load=counted)
    monkeypatch.setattr(
        registry, "get", lambda name: counting if name == "imdb" else real_get(name)
    )
    return calls


def _gru():
    w = get_workload("gru")
    return w, w.profile("ci")


def _same(a: data.CellData, b: data.CellData) -> None:
    for k in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)
        assert getattr(a, k).dtype == getattr(b, k).dtype, k
    assert (a.source, a.checksum) == (b.source, b.checksum)


def test_the_second_cell_reads_the_cut_the_first_decoded(imdb_dir, tmp_path, loads):
    w, prof = _gru()
    cache = tmp_path / "run" / data.DATA_CACHE
    first = data.load_cell_data(w, prof, imdb_dir, cache)
    second = data.load_cell_data(w, prof, imdb_dir, cache)
    assert len(loads) == 1 and len(list(cache.glob("imdb-*.npz"))) == 1
    _same(first, second)
    _same(first, data.load_cell_data(w, prof, imdb_dir))  # no cache: the same arrays
    assert len(loads) == 2
    assert len(first.y_train) == prof.train_samples and first.source == "synthetic"


def test_a_data_file_replaced_during_the_run_is_verified_again(imdb_dir, tmp_path, loads):
    w, prof = _gru()
    cache = tmp_path / "cache"
    data.load_cell_data(w, prof, imdb_dir, cache)
    archive = imdb_dir / "imdb.npz"
    archive.write_bytes(archive.read_bytes()[:1000])  # truncated: its checksum fails
    os.utime(archive, ns=(1, 1))
    with pytest.raises(DataError):
        data.load_cell_data(w, prof, imdb_dir, cache)
    assert len(loads) == 2  # decoded again, not served from the cache


def test_an_unreadable_cache_file_or_a_large_cut_decodes_again(
    imdb_dir, tmp_path, loads, monkeypatch
):
    w, prof = _gru()
    cache = tmp_path / "cache"
    first = data.load_cell_data(w, prof, imdb_dir, cache)
    (cached,) = cache.glob("imdb-*.npz")
    cached.write_bytes(b"not an npz")
    _same(first, data.load_cell_data(w, prof, imdb_dir, cache))
    assert len(loads) == 2
    _same(first, data.load_cell_data(w, prof, imdb_dir, cache))  # rewritten by that load
    assert len(loads) == 2
    monkeypatch.setattr(data, "CACHE_MAX_BYTES", 1000)
    other = tmp_path / "other"
    data.load_cell_data(w, prof, imdb_dir, other)
    assert not list(other.glob("*.npz")) and len(loads) == 3
