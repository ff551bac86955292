"""Issue 21, items 8 and 9 (and 6's ``data accept /dev/zero``): pickle memory bombs are refused
while they unpickle, before they allocate; files carrying Rosetta's synthetic marker are never
accepted as user-provided; data replaced between cells of one run is flagged; a device is not
a file to accept."""

from __future__ import annotations

import _codecs
import io
import json
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from rosetta.cli import main
from rosetta.datasets.safe_pickle import safe_load
from rosetta.errors import DataError
from tests.bench_helpers import ROOT


class _Call:
    """Pickles as ``f(*args)`` (with ``state`` set afterwards, if given)."""

    def __init__(self, f, *args, state=None):
        self.f, self.args, self.state = f, args, state

    def __reduce__(self):
        return (self.f, self.args) if self.state is None else (self.f, self.args, self.state)


def _hex_chain(start: bytes, depth: int) -> bytes:
    obj = start
    for _ in range(depth):
        obj = _Call(_codecs.encode, obj, "hex_codec")
    return pickle.dumps(obj, protocol=2)


def _huge_array(elements: int) -> bytes:
    """An object array whose state declares ``elements`` pointers (and holds none)."""
    from numpy._core import multiarray

    state = (1, (elements,), np.dtype("O"), False, [])
    return pickle.dumps(
        _Call(multiarray._reconstruct, np.ndarray, (0,), b"b", state=state), protocol=2
    )


def _repeated_refs(n: int, size: int) -> bytes:
    s = "a" * size  # pickled once, referenced n times: each reference encoded anew
    return pickle.dumps([_Call(_codecs.encode, s, "latin1") for _ in range(n)], protocol=2)


@pytest.mark.parametrize(
    "payload,why",
    [
        (lambda: _hex_chain(b"x" * 2048, 17), "refusing _codecs.encode with 'hex_codec'"),
        (lambda: _huge_array(6 * 10**9), "would allocate more than"),  # 44.7 GiB of pointers
        (lambda: _repeated_refs(64, 2**20), "would allocate more than"),  # 64 MB from ~1 MB
    ],
)
def test_pickle_memory_bombs_are_refused_while_unpickling(payload, why):
    data = payload()
    assert len(data) < 2 * 2**20  # small files...
    with pytest.raises(DataError) as info:
        safe_load(data, source="bomb.pkl", encoding="latin1")
    msg = str(info.value)
    assert msg.startswith("bomb.pkl: ") and why in msg and "\n" not in msg


def test_real_data_pickles_still_load():
    arr = np.empty(3, dtype=object)
    arr[:] = [[1, 2, 3], [4], [5, 6]]
    back = safe_load(pickle.dumps(arr, protocol=2), source="x", encoding="latin1")
    assert type(back) is np.ndarray and back.tolist() == arr.tolist()
    batch = {b"data": np.arange(3072 * 4, dtype=np.uint8).reshape(4, 3072), b"labels": [1, 2]}
    got = safe_load(pickle.dumps(batch, protocol=2), source="y")
    assert type(got[b"data"]) is np.ndarray and (got[b"data"] == batch[b"data"]).all()
    assert (
        got[b"labels"] == [1, 2] and safe_load(pickle.dumps(b"ab", protocol=2), source="z") == b"ab"
    )


def _bomb_npz(path, pickled: bytes) -> None:
    """An imdb.npz whose x_train member is ``pickled`` behind an object-array header."""
    with zipfile.ZipFile(path, "w") as zf:
        head = io.BytesIO()
        npy_format.write_array_header_1_0(
            head, {"descr": "|O", "fortran_order": False, "shape": (1,)}
        )
        zf.writestr("x_train.npy", head.getvalue() + pickled)
        for name in ("y_train", "x_test", "y_test"):
            buf = io.BytesIO()
            np.save(buf, np.zeros(1, dtype=np.int64))
            zf.writestr(f"{name}.npy", buf.getvalue())


def test_a_4kb_npz_bomb_through_data_accept_stays_small(tmp_path):
    bomb = tmp_path / "imdb.npz"
    _bomb_npz(bomb, _hex_chain(b"x" * 2048, 17))  # 2 KB doubled 17 times: 256 MB, 512 MB total
    assert bomb.stat().st_size < 8192
    script = (
        "import sys; from rosetta.cli import main; "
        f"code = main(['data', 'accept', {str(bomb)!r}, '--data-dir', {str(tmp_path / 'd')!r}]); "
        # VmHWM is this process's own peak: ru_maxrss would carry the forking parent's high-water
        # mark across fork and exec (a large pytest process reads as a large bomb)
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
        "print(int(hwm.split()[1]) // 1024); sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "imdb.npz:x_train.npy: refusing _codecs.encode" in err[0], err
    peak_mb = int(done.stdout.strip())
    assert peak_mb < 400, f"peak RSS {peak_mb} MB: the bomb was allowed to grow"  # ~100 MB baseline


@pytest.mark.parametrize("dataset", ["imdb", "cifar10"])
def test_a_synthetic_file_is_never_accepted_as_user_provided(tmp_path, capsys, dataset):
    from rosetta import datasets

    made = tmp_path / "made"
    if dataset == "imdb":
        path = datasets.write_synthetic_imdb(made, n_train=600, n_test=300)
    else:
        path = datasets.write_synthetic_cifar10(made, n_train=600, n_test=300)
    for side in made.glob("*.rosetta.json"):
        side.unlink()  # the sidecar is gone: only the marker inside says "synthetic"
    code = main(["data", "accept", str(path), "--data-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "synthetic-data marker" in err[0], err
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").rglob("*.rosetta.json"))


def test_a_device_is_not_a_file_to_accept(tmp_path, capsys):
    code = main(["data", "accept", "/dev/zero", "--dataset", "imdb", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        "rosetta: error: /dev/zero: not a regular file or folder (a device, FIFO or socket); "
        "accept the data set's file itself"
    ]


def test_data_replaced_between_cells_is_flagged_in_summary_and_report(tmp_path):
    from report_fixtures import CELLS_A, write_run

    from rosetta.report.load import load_run
    from rosetta.runner.records import data_changes

    run = write_run(tmp_path, "run-a", {k: v for k, v in CELLS_A.items() if k[0] == "gru"})
    assert data_changes([json.loads(p.read_text()) for p in run.glob("*__*.json")]) == []
    torch = run / "torch__gru.json"
    rec = json.loads(torch.read_text())
    rec.setdefault("manifest", {})["data_checksum"] = "sha256:" + "b" * 64
    torch.write_text(json.dumps(rec))
    lines = data_changes([json.loads(p.read_text()) for p in run.glob("*__*.json")])
    assert len(lines) == 1 and "the data of gru changed during the run: 2 checksums" in lines[0]
    assert "numpy_ref, tensorflow" in lines[0] and "sha256:bbbbbbbbbbbb: torch" in lines[0]
    _, problems = load_run(run)
    assert any("the data of gru changed during the run" in p for p in problems)


# -- issue 33, item 10 -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["-1", "2.5", str(2**63)])
def test_data_synth_with_a_bad_seed_is_one_line(tmp_path, capsys, seed):
    with pytest.raises(SystemExit) as info:
        main(["data", "synth", "--dataset", "imdb", "--seed", seed, "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("rosetta: error: argument --seed: ") and "Traceback" not in err[0]
    assert not list(tmp_path.iterdir())  # nothing written


def test_data_info_on_a_file_says_it_is_not_a_folder(tmp_path, capsys):
    afile = tmp_path / "passwd"
    afile.write_text("root:x:0:0::/root:/bin/sh\n")
    code = main(["data", "info", "--data-dir", str(afile)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        f"rosetta: error: --data-dir {afile} is not a folder (it is a file); name the folder "
        "that holds the data sets (or leave --data-dir out for the default)"
    ]
    code = main(["data", "info", "--data-dir", str(tmp_path / "absent")])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0] == f"data directory: {tmp_path / 'absent'} (does not exist)"
