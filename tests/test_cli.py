"""The ``rosetta`` command: ``list`` output, errors as one line with a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rosetta import backends
from rosetta.cli import main
from rosetta.spec import models_dir


def test_list_shows_workloads_and_every_backend(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("cnn", "gru", "resnet50"):
        assert f"  {name} " in out
    for name in backends.names():
        assert f"  {name} " in out
    assert "numpy_ref   ready" in out


def test_list_details_prints_counts_from_the_spec(capsys):
    assert main(["list", "--details"]) == 0
    out = capsys.readouterr().out
    assert "parameters 3,441,592" in out
    assert "parameters 23,508,032 (+ 53,120 buffer values)" in out
    assert "parameters 3,818,302" in out
    assert "GFLOPs/sample" in out


def test_backend_status_reports_missing_framework_with_the_fix(monkeypatch):
    monkeypatch.setattr(backends, "_version", lambda dist: "" if dist == "torch" else "1.0")
    st = backends.status("torch")
    assert not st.usable and st.reason == "torch is not installed (pip install 'rosetta[torch]')"


def test_unknown_backend_lists_valid_ones():
    from rosetta.errors import BackendError

    with pytest.raises(
        BackendError, match="unknown backend 'mxnet'; valid backends: numpy_ref, torch"
    ):
        backends.load("mxnet")


def test_backend_without_lowering_is_unavailable_not_a_crash(monkeypatch):
    import importlib.util

    from rosetta.errors import BackendError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda n, *a: None if n == "rosetta.backends.jax" else real(n, *a),
    )
    monkeypatch.setattr(backends, "_version", lambda dist: "1.0")
    assert "not implemented" in backends.status("jax").reason
    with pytest.raises(BackendError, match="backend 'jax' is not usable here"):
        backends.load("jax")
    assert backends.load("numpy_ref").NAME == "numpy_ref"


def test_malformed_spec_is_one_line_on_stderr_with_exit_2(tmp_path):
    (tmp_path / "cnn.yaml").write_text("name: cnn\ntask: train\n")
    out = subprocess.run(
        [sys.executable, "-m", "rosetta.cli", "list", "--spec", str(tmp_path / "cnn.yaml")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("rosetta: error: ") and "cnn.yaml: field 'dataset'" in lines[0]
    # ``python -m rosetta`` is the same command line
    out = subprocess.run(
        [sys.executable, "-m", "rosetta", "list", "--bogus"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr


def test_list_reports_a_broken_spec_and_lists_the_good_ones(tmp_path, monkeypatch, capsys):
    """ROSETTA_MODELS with two good specs and a broken one between them (alphabetically)."""
    for name in ("cnn", "gru"):
        (tmp_path / f"{name}.yaml").write_text((models_dir() / f"{name}.yaml").read_text())
    (tmp_path / "different.yaml").write_text("name: different\ntask: train\n")
    monkeypatch.setenv("ROSETTA_MODELS", str(tmp_path))
    assert main(["list"]) == 1
    out, err = capsys.readouterr()
    assert "  cnn " in out and "  gru " in out and "different  BROKEN" in out
    assert err.count("\n") == 1 and "different.yaml: field 'dataset'" in err


def test_list_spec_describes_a_users_own_file(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text((models_dir() / "cnn.yaml").read_text().replace("name: cnn", "name: mine"))
    assert main(["list", "--spec", str(path)]) == 0
    out = capsys.readouterr().out
    assert "valid" in out and "  mine " in out and "parameters 3,441,592" in out


def test_output_into_a_closed_pipe_is_quiet():
    """``rosetta list --details | head -1``: the reader leaves; no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rosetta.cli", "list", "--details"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait() == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err and err == ""


def test_env_prints_the_manifest_as_json(capsys):
    import json

    import numpy as np

    assert main(["env"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["numpy"] == np.__version__ and env["cpu_count"] >= 1
    assert set(env["backends"]) == set(backends.names())
    assert env["backends"]["numpy_ref"] == {"numpy": np.__version__}
