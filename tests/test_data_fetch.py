"""fetch: checksum-verified atomic download; offline failure explains the manual route."""

from __future__ import annotations

import io
import urllib.error

import pytest
from data_helpers import run_cli, synthetic_dir

from rosetta.datasets import download, fetch
from rosetta.datasets.checksums import RemoteFile, file_digest, sidecar_path
from rosetta.datasets.paths import leftover_temp_files
from rosetta.errors import DataError


def local_remote(digest: str | None = None) -> tuple[RemoteFile, str]:
    src = synthetic_dir("imdb") / "imdb.npz"
    remote = RemoteFile("imdb.npz", src.as_uri(), "sha256", digest or file_digest(src, "sha256"))
    return remote, src.as_uri()


def test_fetch_file_url_verifies_and_writes(tmp_path):
    remote, _ = local_remote()
    err = io.StringIO()
    path = fetch(remote, tmp_path, stream=err)
    assert path == tmp_path / "imdb.npz"
    assert file_digest(path, "sha256") == remote.digest
    assert "downloading imdb.npz" in err.getvalue() and "done" in err.getvalue()
    assert leftover_temp_files(tmp_path) == []
    # already present and verified: no second download
    calls = []
    assert fetch(remote, tmp_path, opener=lambda *a, **k: calls.append(a)) == path
    assert calls == []


def test_fetch_wrong_checksum_leaves_nothing(tmp_path):
    remote, _ = local_remote(digest="0" * 64)
    with pytest.raises(DataError) as err:
        fetch(remote, tmp_path, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "expected " + "0" * 64 in msg and "nothing was written" in msg
    assert list(tmp_path.iterdir()) == []


def test_fetch_unreachable_url_is_offline_message(tmp_path):
    remote, _ = local_remote()
    with pytest.raises(DataError) as err:
        fetch(remote, tmp_path, url="http://127.0.0.1:9/imdb.npz", timeout=5, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "offline" in msg
    assert "place imdb.npz" in msg and str(tmp_path) in msg and "rosetta data synth" in msg
    assert list(tmp_path.iterdir()) == []


def test_fetch_monkeypatched_opener_failure(tmp_path):
    def no_network(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    remote, _ = local_remote()
    with pytest.raises(DataError, match="name resolution.*offline; place imdb.npz"):
        fetch(remote, tmp_path, opener=no_network)


def test_fetch_connection_lost_midway(tmp_path):
    class Broken(io.BytesIO):
        headers = {"Content-Length": "1000"}

        def read(self, n=-1):
            if self.tell() >= 100:
                raise ConnectionResetError("reset by peer")
            return super().read(min(n, 100))

    remote, _ = local_remote()
    with pytest.raises(DataError, match="connection lost"):
        fetch(remote, tmp_path, opener=lambda *a, **k: Broken(b"x" * 1000), progress=False)
    assert list(tmp_path.iterdir()) == []


def test_fetch_refuses_to_clobber_synthetic_without_force(tmp_path):
    remote, _ = local_remote()
    src = synthetic_dir("imdb") / "imdb.npz"
    (tmp_path / "imdb.npz").write_bytes(src.read_bytes())
    sidecar_path(tmp_path / "imdb.npz").write_bytes(sidecar_path(src).read_bytes())
    with pytest.raises(DataError, match="synthetic file is present; re-run with --force"):
        fetch(remote, tmp_path)
    fetch(remote, tmp_path, force=True, progress=False)  # official replaces synthetic
    assert not sidecar_path(tmp_path / "imdb.npz").exists()


def test_cli_fetch_offline_exit_2(tmp_path, monkeypatch, capsys):
    bad = RemoteFile("imdb.npz", "http://127.0.0.1:9/imdb.npz", "sha256", "0" * 64)
    monkeypatch.setitem(download.REMOTES, "imdb", bad)
    code = run_cli(["data", "fetch", "--dataset", "imdb", "--data-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rosetta: error: cannot download")
    assert "offline" in err[0] and "place imdb.npz" in err[0]


def test_cli_fetch_file_url_with_extract(tmp_path, monkeypatch, capsys):
    src = synthetic_dir("cifar10") / "cifar-10-python.tar.gz"
    remote = RemoteFile(src.name, src.as_uri(), "md5", file_digest(src, "md5"))
    monkeypatch.setitem(download.REMOTES, "cifar10", remote)
    # pretend the test file is the official one, for the archive and folder checks too
    from rosetta.datasets import cifar10 as cifar_mod

    monkeypatch.setattr(cifar_mod, "CIFAR10_ARCHIVE", remote)
    monkeypatch.setattr(cifar_mod, "verify_cifar10_folder", lambda folder: None)
    code = run_cli(
        ["data", "fetch", "--dataset", "cifar10", "--extract", "--data-dir", str(tmp_path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "verified" in out and "extracted to" in out
    assert (tmp_path / "cifar-10-batches-py" / "data_batch_1").is_file()
