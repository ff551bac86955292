"""A run's cache of decoded data cuts (``rosetta.runner.data``): the next cell with the same data
set and cut reads it instead of decoding again; a data file changed during the run, an unreadable
cache file or a cut over the size limit go back to the verified load. Issue 33, item 2: a cache
file whose bytes do not match the digest recorded when it was written is never used: the cell
flags it (one line naming the file) and decodes the cut again; the record names the data file's
checksum and the cut's digest."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace

import numpy as np
import pytest

from rosetta import datasets
from rosetta.cli import main
from rosetta.datasets import registry
from rosetta.errors import DataError
from rosetta.runner import data
from rosetta.spec import get_workload
from tests.bench_helpers import fault_env


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
    assert (a.source, a.checksum, a.cut_digest) == (b.source, b.checksum, b.cut_digest)


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
    assert first.notes == ()
    (cached,) = cache.glob("imdb-*.npz")
    cached.write_bytes(b"not an npz")
    for n in (2, 3):  # refused by every later cell (left as found), decoded again each time
        again = data.load_cell_data(w, prof, imdb_dir, cache)
        _same(first, again)
        assert len(loads) == n
        assert again.notes == (
            f"data cache {cached} does not match its recorded digest (sha256 "
            f"{hashlib.sha256(b'not an npz').hexdigest()[:16]}, recorded "
            f"{json.loads(data.digest_path(cached).read_text())['file_sha256'][:16]}): not "
            "used, the cut was decoded again from the verified data file",
        )
    monkeypatch.setattr(data, "CACHE_MAX_BYTES", 1000)
    other = tmp_path / "other"
    data.load_cell_data(w, prof, imdb_dir, other)
    assert not list(other.glob("*.npz")) and len(loads) == 4


def test_the_cut_digest_is_that_of_the_arrays_decoded_or_cached(imdb_dir, tmp_path, loads):
    w, prof = _gru()
    d = registry.get("imdb").load(imdb_dir, dict(w.dataset.options))
    n, m = prof.train_samples, prof.test_samples
    h = hashlib.sha256()  # the digest computed here, independently of rosetta.runner.data
    for a in (d.x_train[:n], d.y_train[:n], d.x_test[:m], d.y_test[:m]):
        a = np.ascontiguousarray(a)
        h.update(json.dumps([a.dtype.str, list(a.shape)]).encode() + a.tobytes())
    cache = tmp_path / "cache"
    decoded = data.load_cell_data(w, prof, imdb_dir, cache)
    cached = data.load_cell_data(w, prof, imdb_dir, cache)
    assert len(loads) == 2  # this test's own load, then one decode: the second read the cache
    assert decoded.cut_digest == cached.cut_digest == f"sha256:{h.hexdigest()}"


def test_a_cut_without_its_digest_or_a_link_to_a_device_is_not_used(imdb_dir, tmp_path, loads):
    w, prof = _gru()
    cache = tmp_path / "cache"
    first = data.load_cell_data(w, prof, imdb_dir, cache)
    (cached,) = cache.glob("imdb-*.npz")
    data.digest_path(cached).unlink()  # a cut planted with no digest beside it
    again = data.load_cell_data(w, prof, imdb_dir, cache)
    _same(first, again)
    assert again.notes == (
        f"data cache {cached} has no recorded digest: not used, the cut was decoded again from "
        "the verified data file",
    )
    cached.unlink()
    cached.symlink_to("/dev/zero")
    again = data.load_cell_data(w, prof, imdb_dir, cache)
    _same(first, again)
    assert len(loads) == 3 and len(again.notes) == 1 and str(cached) in again.notes[0]


def test_a_poisoned_cut_whose_file_digest_was_rewritten_fails_the_cell(imdb_dir, tmp_path, loads):
    """Issue 50 item 2: labels flipped in the cached cut and the digest file's sha256 rewritten
    to match the new bytes: the arrays' own digest is not the recorded cut's, so the cell fails
    naming the file (before: it trained on flipped labels while its record named the clean
    digest). With the whole digest file rewritten, the cut claims its own (poisoned) digest."""
    import io

    w, prof = _gru()
    cache = tmp_path / "cache"
    clean = data.load_cell_data(w, prof, imdb_dir, cache)
    (cached,) = cache.glob("imdb-*.npz")
    with np.load(cached, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["y_train"] = 1 - arrays["y_train"]  # the same shapes and dtype, other labels
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    raw = buf.getvalue()
    cached.unlink()
    cached.write_bytes(raw)
    digest = json.loads(data.digest_path(cached).read_text())
    digest["file_sha256"] = hashlib.sha256(raw).hexdigest()
    data.digest_path(cached).unlink()
    data.digest_path(cached).write_text(json.dumps(digest))
    with pytest.raises(DataError, match="the cache was altered") as e:
        data.load_cell_data(w, prof, imdb_dir, cache)
    assert str(cached) in str(e.value) and "\n" not in str(e.value)
    digest["cut_digest"] = data.cut_digest(*(arrays[k] for k in data._ARRAYS))
    data.digest_path(cached).unlink()
    data.digest_path(cached).write_text(json.dumps(digest))
    poisoned = data.load_cell_data(w, prof, imdb_dir, cache)
    assert poisoned.cut_digest != clean.cut_digest  # what ran, so data_changes names the cell


@pytest.mark.slow  # two cells in fresh processes: 30-90 s on 2 busy cores
def test_a_cache_replaced_between_rounds_is_flagged_and_not_used(
    tmp_path, small_data, monkeypatch, capsys
):
    """Through ``rosetta bench``: round 0's backend flips the labels of the cached cut (same
    shapes) after the cell loaded it; round 1 (a timing round) must refuse that file, say so in
    one flag, and train on the data file's cut: the same digest as round 0."""
    fault_env(monkeypatch)
    monkeypatch.setenv("ROSETTA_EXTRA_BACKENDS", "poison=tests.poison_backend")
    results = tmp_path / "results"
    monkeypatch.setenv("ROSETTA_POISON_CACHE", str(results / "p" / data.DATA_CACHE))
    code = main(["bench", "--profile", "ci", "--results-dir", str(results), "--data-dir",
                 str(small_data), "--no-report", "--executor", "python", "--backends", "poison",
                 "--workloads", "gru", "--repeat", "2", "--run-id", "p"])  # fmt: skip
    assert code == 0
    summary = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gru ")]
    assert [line.split()[1:3] for line in summary] == [["poison", "ok"], ["poison", "r1"]]
    r0 = json.loads((results / "p" / "poison__gru.json").read_text())
    r1 = json.loads((results / "p" / "poison__gru__r1.json").read_text())
    poisoned = (results / "p" / "poisoned.txt").read_text().split()
    assert len(poisoned) == 1  # round 0 did replace the cached cut
    assert not [f for f in r0["flags"] if "data cache" in f]
    flagged = [f for f in r1["flags"] if "data cache" in f]
    assert len(flagged) == 1 and "does not match its recorded digest" in flagged[0], r1["flags"]
    assert f"{results / 'p' / data.DATA_CACHE}/imdb-" in flagged[0]
    w, prof = _gru()
    d = registry.get("imdb").load(small_data, dict(w.dataset.options))
    n, m = prof.train_samples, prof.test_samples
    truth = data.cut_digest(d.x_train[:n], d.y_train[:n], d.x_test[:m], d.y_test[:m])
    for r in (r0, r1):  # both name the verified data file and the cut they trained on
        assert r["status"] == "ok"
        assert r["manifest"]["data_checksum"] == f"{d.checksum.algorithm}:{d.checksum.digest}"
        assert r["manifest"]["data_cut_digest"] == truth != poisoned[0]
    assert r1["point"]["kind"] == "timing"  # round 1 times steps of the same cut, no losses


def test_cells_that_read_different_cuts_of_one_file_are_named(tmp_path):
    from rosetta.report.load import load_run
    from tests.report_fixtures import CELLS_A, write_run

    run = write_run(tmp_path, "run-a", {k: v for k, v in CELLS_A.items() if k[0] == "gru"})
    cut = "sha256:" + "c" * 64
    for path in run.glob("*__gru.json"):
        rec = json.loads(path.read_text())
        if rec["status"] == "ok":
            rec["manifest"]["data_cut_digest"] = (
                "sha256:" + "d" * 64 if "torch" in path.name else cut
            )
            path.write_text(json.dumps(rec))
    _, problems = load_run(run)
    lines = [p for p in problems if "different cuts" in p]
    assert len(lines) == 1 and "the cells of gru read different cuts of one data file" in lines[0]
    assert "sha256:dddddddddddd: torch" in lines[0] and "numpy_ref, tensorflow" in lines[0]
