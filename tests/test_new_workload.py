"""ADDING_A_WORKLOAD.md's promise, proven: a fourth workload is one YAML file.

``tests/workloads/mlp.yaml`` (an MLP on the CIFAR-10 data) is copied beside the three real specs
into a temporary folder named by ``ROSETTA_MODELS``; then, without touching any Python file, every
installed backend lowers it, passes the equivalence gate against the float64 reference, trains,
and the HTML report shows it under the spec's own title.
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


def _usable() -> list[str]:
    usable = [b for b in backends.names() if backends.status(b).usable]
    return [b for b in usable if not backends.training_unsupported(b)]  # mlp trains


# The slow tier's (a minute: a process and a framework import per backend); the quick tier checks
# every backend's ops in the conformance suite, and a workload's YAML by the spec tests. (A run of
# the reference and one framework alone was a subset of this one: removed.)
@pytest.mark.slow
def test_a_fourth_workload_is_one_yaml_file(tmp_path, small_data):
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
    usable = _usable()
    results, report = tmp_path / "results", tmp_path / "report"
    cmd = [sys.executable, "-m", "rosetta.cli", "bench", "--profile", "ci", "--workloads", "mlp",
           "--backends", ",".join(usable), "--executor", "python", "--run-id", "mlp",
           "--results-dir", str(results), "--report-dir", str(report),
           "--data-dir", str(small_data), "--threads", "1"]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for b in usable:
        key = records.cell_key({"backend": b, "workload": "mlp", "threads": 1})  # b__mlp__t1
        rec = json.loads((results / "mlp" / f"{key}.json").read_text())
        assert rec["status"] == "ok", (b, rec.get("error"))
        assert rec["equivalence"]["equivalent"], (b, rec["equivalence"]["divergence"])
        assert rec["metrics"]["steps"] == 4  # 128 train samples / batch 32
        # --threads 1 in effect, read back by the backend from its framework, and recorded
        assert rec["manifest"]["runtime"]["threads"] == 1  # stored once (not in fast_path)
    page = (report / "mlp" / "index.html").read_text()
    assert "MLP on CIFAR-10" in page  # the spec's title, from the YAML alone
    for b in usable:
        assert b in page
