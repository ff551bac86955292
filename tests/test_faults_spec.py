"""Issue 21, item 7: spec limits hold everywhere. ``image_size`` in a profile meets the
activation bound, a model too large for this machine's memory is refused up front (``list`` and
``bench``), and a spec with non-printable bytes is one line that stops neither ``list`` nor
``bench`` over the other specs."""

from __future__ import annotations

import re
import shutil

import pytest

from rosetta.cli import main
from rosetta.errors import SpecError
from rosetta.runtime import usable_cores
from rosetta.spec import load_workload, models_dir
from rosetta.spec.limits import machine_memory_bytes, model_bytes


@pytest.fixture
def specs(tmp_path, monkeypatch):
    folder = tmp_path / "specs"
    shutil.copytree(models_dir(), folder)
    monkeypatch.setenv("ROSETTA_MODELS", str(folder))
    return folder


def test_image_size_meets_the_activation_bound(specs):
    path = specs / "resnet50.yaml"
    text = path.read_text()
    assert load_workload(path).profile("ci").image_size  # the real spec uses image_size
    path.write_text(re.sub(r"image_size: \d+", "image_size: 100000", text, count=1))
    with pytest.raises(SpecError) as info:
        load_workload(path)
    msg = str(info.value)
    assert "profiles.ci.image_size" in msg and "limit max_values" in msg and "\n" not in msg
    path.write_text(re.sub(r"image_size: \d+", "image_size: 4000", text, count=1))
    with pytest.raises(SpecError, match=r"layers.*limit max_values.*image_size = 4000"):
        load_workload(path)  # the input fits (48 M values), an activation inside does not


def test_a_model_too_large_for_the_memory_is_refused_by_list_and_bench(specs, capsys, tmp_path):
    path = specs / "gru.yaml"
    path.write_text(path.read_text().replace("units: 100,", "units: 25000,", 1))
    w = load_workload(path)  # within max_params (2e9): the spec itself is valid
    assert 1.8e9 < w.num_params < 2e9
    memory = machine_memory_bytes()
    if memory is None or model_bytes(w.num_params, "float32") <= memory:
        pytest.skip("this machine holds a 1.9e9-parameter model")
    assert main(["list"]) == 1
    captured = capsys.readouterr()
    assert re.search(r"gru\s+BROKEN", captured.out)
    assert "'gru' has 1,8" in captured.err and "more than this machine's" in captured.err
    code = main(["bench", "--workloads", "gru", "--backends", "numpy_ref", "--results-dir",
                 str(tmp_path / "results")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "more than this machine's" in err[0]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("junk", [b"\x00", b"\x1b[31m\x07", b"\xff\xfe"])
def test_a_spec_with_non_printable_bytes_is_one_line_and_stops_nothing(
    specs, tmp_path, capsys, junk
):
    (specs / "bad.yaml").write_bytes(b"name: bad" + junk + b"\ntask: train\n")
    assert main(["list"]) == 1
    captured = capsys.readouterr()
    assert re.search(r"cnn\s+train", captured.out) and re.search(r"gru\s+train", captured.out)
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "bad.yaml: not a text spec: byte 9 is 0x" in err[0], err
    assert "\x1b" not in captured.err and "\x00" not in captured.err
    code = main(["bench", "--backends", "numpy_ref", "--threads", str(usable_cores() + 1),
                 "--results-dir", str(tmp_path / "results")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "broken spec skipped" in err[0] and "bad.yaml" in err[0]
    assert "usable cores" in err[-1]  # bench went on to its next check over the other specs
