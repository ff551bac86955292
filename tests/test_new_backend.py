"""A backend is its folder: ``tests/toy_backend/`` (one package, nothing outside it names it) is
registered by ``ROSETTA_EXTRA_BACKENDS`` alone and is then found everywhere a built-in backend is:
``rosetta list``, the conformance suite (its ops by probe, its gaps declared), ``rosetta code``,
its notebook, a bench run (its cell gated and recorded) and the report (its colour, its column
of the Rosetta page). The ADDING_A_BACKEND.md promise, checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from rosetta.spec import models_dir
from tests.bench_helpers import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The toy registered, and the MLP workload beside the shipped ones."""
    models = tmp_path_factory.mktemp("models")
    for spec in models_dir().glob("*.yaml"):
        shutil.copy(spec, models)
    shutil.copy(ROOT / "tests" / "workloads" / "mlp.yaml", models)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "ROSETTA_EXTRA_BACKENDS": "toy=tests.toy_backend",
            "PYTHONPATH": path, "ROSETTA_MODELS": str(models)}  # fmt: skip


def _run(env, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)  # fmt: skip


def test_the_toy_is_listed_and_writes_its_source(env):
    listing = _run(env, "-m", "rosetta.cli", "list")
    assert listing.returncode == 0 and "toy" in listing.stdout, listing.stderr
    code = _run(env, "-m", "rosetta.cli", "code", "mlp", "--backend", "toy")
    assert code.returncode == 0, code.stderr
    compile(code.stdout, "mlp_toy.py", "exec")  # a Python file
    assert "fc1" in code.stdout
    cnn = _run(env, "-m", "rosetta.cli", "code", "cnn", "--backend", "toy")
    assert cnn.returncode != 0 and "conv2d" in cnn.stderr  # a declared gap: one line, no file


def test_the_toy_runs_the_conformance_suite_by_op(env):
    done = _run(env, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "", "-n", "0",
                "tests/conformance/test_ops.py", "-k", "toy", "-rs")  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-3000:]
    assert "7 passed" in out  # its gaps declared, and the probes of its four ops (flatten 1,
    # dense 3, relu 1, dropout 1... counted below)
    assert "a toy backend: it lowers only the MLP's ops" in out  # each declared op: a skip


def test_the_toy_has_a_notebook(env):
    got = _run(env, "-c", "from rosetta.runner.notebook import make_notebook; "
               "import json; print(json.dumps(make_notebook('toy')))")  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert "backend = 'toy'" in got.stdout


def test_the_toy_is_benched_and_reported(env, tmp_path, small_data):
    results, report = tmp_path / "results", tmp_path / "report"
    done = _run(env, "-m", "rosetta.cli", "bench", "--profile", "ci", "--workloads", "mlp",
                "--backends", "numpy_ref,toy", "--executor", "python", "--run-id", "toy",
                "--results-dir", str(results), "--report-dir", str(report),
                "--data-dir", str(small_data), "--threads", "1", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rec = json.loads((results / "toy" / "toy__mlp__t1.json").read_text())
    assert rec["status"] == "ok" and rec["equivalence"]["equivalent"], rec.get("error")
    page = (report / "toy" / "index.html").read_text()
    assert "toy" in page and "#123456" in page  # its cell, in its own colour
    rosetta = (report / "toy" / "rosetta.html").read_text()
    assert "Toy" in rosetta  # its column of the Rosetta page, by its PAGE_NAME


def test_two_lanes_run_each_framework_as_it_comes_beside_the_fast_path(tmp_path, small_data):
    """``--lanes default,fast``: torch runs twice (eager, its plain default; and the fast path),
    each cell gated and recorded with the options in effect; numpy_ref, which declares no lanes,
    once; the report's lanes table sets the two side by side with their cold starts."""
    results, report = tmp_path / "results", tmp_path / "report"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = _run(env, "-m", "rosetta.cli", "bench", "--profile", "ci", "--workloads", "gru",
                "--backends", "numpy_ref,torch", "--lanes", "default,fast", "--executor",
                "python", "--run-id", "lanes", "--results-dir", str(results), "--report-dir",
                str(report), "--data-dir", str(small_data), "--threads", "1",
                "--option", "torch.compile=on", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = results / "lanes"
    assert sorted(p.stem for p in run.glob("*__gru*.json")) == [
        "numpy_ref__gru__t1", "torch__gru__t1", "torch__gru__t1-default"]  # fmt: skip
    fast = json.loads((run / "torch__gru__t1.json").read_text())
    plain = json.loads((run / "torch__gru__t1-default.json").read_text())
    assert fast["manifest"]["runtime"]["options"] == {"compile": "on"}  # as asked
    assert plain["manifest"]["runtime"]["options"] == {"compile": "off"}  # the lane's: eager
    assert plain["point"]["lane"] == "default" and fast["point"]["lane"] == "fast"
    for rec in (fast, plain):
        assert rec["status"] == "ok" and rec["equivalence"]["equivalent"]
    page = (report / "lanes" / "index.html").read_text()
    assert 'id="lanes-table"' in page and "compile=off" in page
