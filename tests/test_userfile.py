"""A file written at a path the user names (``rosetta export --onnx``): absent, or a regular file
with ``--force``; a device, FIFO, socket, folder or symlink refused in one line and left as it
was. Special files are made in a temporary folder (a FIFO) or mocked (a character device): no
test writes near a real device node."""

from __future__ import annotations

import os
import stat

import pytest

from rosetta import userfile
from rosetta.cli import main
from rosetta.errors import RosettaError


def test_absent_then_exists_then_force(tmp_path):
    path = tmp_path / "out.bin"
    userfile.write_user_file(path, b"one", "--out", force=False)
    assert path.read_bytes() == b"one"
    with pytest.raises(RosettaError, match=r"--out .*out.bin: exists; add --force") as e:
        userfile.write_user_file(path, b"two", "--out", force=False)
    assert "\n" not in str(e.value) and path.read_bytes() == b"one"
    userfile.write_user_file(path, b"two", "--out", force=True)
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]  # no temporary left


def test_a_fifo_a_folder_and_a_symlink_are_refused_even_with_force(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    target = tmp_path / "target.bin"
    target.write_bytes(b"keep")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    for path, says in ((fifo, "is a FIFO"), (tmp_path, "is a folder"), (link, "is a symlink")):
        with pytest.raises(RosettaError, match=says) as e:
            userfile.write_user_file(path, b"x", "--out", force=True)
        assert "\n" not in str(e.value)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert target.read_bytes() == b"keep"


def test_a_character_device_is_refused(tmp_path, monkeypatch):
    """What turned /dev/full into a plain file: the device is mocked at a path in tmp_path."""
    path = tmp_path / "full"
    real = os.lstat

    def lstat(p, *a, **k):
        if str(p) == str(path):
            return os.stat_result((stat.S_IFCHR | 0o666, 0, 0, 1, 0, 0, 0, 0, 0, 0))
        return real(p, *a, **k)

    monkeypatch.setattr(userfile.os, "lstat", lstat)
    with pytest.raises(RosettaError, match="is a character device, not a regular file"):
        userfile.write_user_file(path, b"x", "--onnx", force=True)
    assert not path.exists()  # nothing was written in its place


def test_export_refuses_a_fifo_and_an_existing_file_without_force(tmp_path, capsys):
    pytest.importorskip("onnx")
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    assert main(["export", "gru", "--onnx", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a FIFO" in err and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    path = tmp_path / "gru.onnx"
    path.write_bytes(b"mine")
    assert main(["export", "gru", "--onnx", str(path)]) == 2
    assert "exists; add --force" in capsys.readouterr().err and path.read_bytes() == b"mine"
    assert main(["export", "gru", "--onnx", str(path), "--force"]) == 0
    assert path.read_bytes()[:4] != b"mine" and capsys.readouterr().out.startswith("wrote ")


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_the_report_and_its_csv_never_write_through_a_link_or_into_a_fifo(tmp_path, capsys):
    """The report rewrites its own ``index.html`` and ``rosetta.csv`` (by design, no --force),
    but a symlink or a FIFO put in their place is refused in one line and left as it was."""
    pytest.importorskip("pandas")
    from report_fixtures import CELLS_A, write_run

    write_run(tmp_path / "results", "r", CELLS_A)
    out = tmp_path / "out"
    argv = ["report", "--results-dir", str(tmp_path / "results"), "--out-dir", str(out), "r"]
    assert main([*argv, "--export", "csv"]) == 0
    page, csv = out / "r" / "index.html", out / "r" / "rosetta.csv"
    assert page.is_file() and csv.is_file()
    assert main(argv) == 0  # rewritten in place
    target = tmp_path / "elsewhere.html"
    target.write_text("keep")
    page.unlink()
    page.symlink_to(target)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the report" in err and "is a symlink" in err and target.read_text() == "keep"
    page.unlink()
    csv.unlink()
    os.mkfifo(csv)
    assert main([*argv, "--export", "csv"]) == 2  # refused, not blocked on the FIFO
    assert "--export csv" in capsys.readouterr().err and stat.S_ISFIFO(os.lstat(csv).st_mode)
