"""ADDING_A_WORKLOAD.md's promise and the ``ci`` profile's, proven in one run: a fourth workload
is one YAML file, and ``rosetta bench --profile ci`` runs every installed backend's notebook.

``tests/workloads/mlp.yaml`` (an MLP on the CIFAR-10 data) is copied beside the real specs into a
temporary folder named by ``ROSETTA_MODELS``; then, without touching any Python file, ``rosetta
bench --profile ci`` runs it on every installed backend, each cell a papermill-executed notebook
(the default executor) in a process of its own, with the machine's real peaks: every backend
lowers it, passes the equivalence gate against the float64 reference, trains it (a serving
engine runs its forward pass, gated and timed), and the HTML report shows it under the spec's own
title. (The slow tier's: a kernel and a framework import per backend. One workload, the MLP: the
conformance suite checks each backend x shipped workload's loader, steps, outputs and manifest,
and the quick tier runs papermill cells of shipped workloads in tests/test_bench.py. This run
replaced a ``ci`` run of the CNN on every backend, which repeated those checks at four times the
cost, and a python-executor run of the MLP, which repeated this one's.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rosetta import backends
from rosetta.runner import records
from rosetta.spec import models_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_fourth_workload_is_one_yaml_file_and_ci_runs_every_notebook(tmp_path, small_data):
    models = tmp_path / "models"
    models.mkdir()
    for spec in models_dir().glob("*.yaml"):
        shutil.copy(spec, models)
    shutil.copy(ROOT / "tests" / "workloads" / "mlp.yaml", models)
    env = {**os.environ, "ROSETTA_MODELS": str(models)}
    listing = subprocess.run(
        [sys.executable, "-m", "rosetta.cli", "list"], env=env, capture_output=True, text=True
    )
    assert listing.returncode == 0 and "mlp" in listing.stdout, listing.stderr
    usable = [b for b in backends.names() if backends.status(b).usable]
    assert {"numpy_ref", "torch"} <= set(usable)  # scripts/test.sh installs rosetta[all]
    results, report = tmp_path / "results", tmp_path / "report"
    cmd = [sys.executable, "-m", "rosetta.cli", "bench", "--profile", "ci", "--workloads", "mlp",
           "--backends", ",".join(usable), "--run-id", "mlp",
           "--results-dir", str(results), "--report-dir", str(report),
           "--data-dir", str(small_data), "--threads", "1"]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "summary CSV" in done.stdout
    run = results / "mlp"
    for b in usable:
        key = records.cell_key({"backend": b, "workload": "mlp", "threads": 1})  # b__mlp__t1
        rec = json.loads((run / f"{key}.json").read_text())
        assert rec["status"] == "ok", (b, rec.get("error"))
        assert rec["equivalence"]["equivalent"], (b, rec["equivalence"]["divergence"])
        assert rec["executor"] == "papermill" and (run / rec["notebook"]).is_file(), b
        if not backends.training_unsupported(b):
            assert rec["metrics"]["steps"] == 4, b  # 128 train samples / batch 32
        # --threads 1 in effect, read back by the backend from its framework, and recorded
        assert rec["manifest"]["runtime"]["threads"] == 1, b  # stored once (not in fast_path)
    info = json.loads((run / "run.json").read_text())
    assert info["peak_gflops"] > 0  # the machine's peaks, measured before the first cell
    assert info["peaks"]["gemm"]["gflops"]["numpy"]["fp32"] > 0
    assert info["peaks"]["ceiling"]["fp32"]["gflops"] > 0  # the measured ceiling (or the probe)
    page = (report / "mlp" / "index.html").read_text()
    assert "MLP on CIFAR-10" in page  # the spec's title, from the YAML alone
    for b in usable:
        assert b in page
