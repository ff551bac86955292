"""Issue 18's ci-sized sweep through papermill: two real backends x one workload x two batch sizes
x two precisions, every point a notebook executed in its own kernel, bf16 really running (not
skipped), and the report's scaling section reading the points back."""

from __future__ import annotations

import json

import pytest

from rosetta import backends
from rosetta.cli import main
from rosetta.report import load_tables, scaling, write_report
from rosetta.spec import get_workload

SWEEP = ("torch", "jax")  # the two lightest backends with a bf16 lowering


@pytest.mark.slow  # the quick tier's sweep is tests/test_axes.py (the python executor)
@pytest.mark.skipif(
    not all(backends.status(b).usable for b in SWEEP), reason="needs torch and jax installed"
)
def test_a_ci_sweep_of_two_backends_runs_bf16_through_papermill(tmp_path, small_data, capsys):
    results = tmp_path / "results"
    argv = ["bench", "--profile", "ci", "--results-dir", str(results), "--data-dir",
            str(small_data), "--backends", ",".join(SWEEP), "--workloads", "gru",
            "--batch-sizes", "32,64", "--precisions", "fp32,bf16", "--run-id", "sw",
            "--report-dir", str(tmp_path / "report")]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().out
    run = results / "sw"
    prof = get_workload("gru").profile("ci")
    for b in SWEEP:
        for bs in (32, 64):
            for p in ("fp32", "bf16"):
                key = f"{b}__gru__b{bs}" + ("-bf16" if p == "bf16" else "")
                rec = json.loads((run / f"{key}.json").read_text())
                assert rec["status"] == "ok", (key, rec.get("error"))
                assert rec["executor"] == "papermill" and (run / rec["notebook"]).is_file()
                assert rec["equivalence"]["equivalent"], (key, rec["equivalence"]["divergence"])
                # the point asked for is the point that ran, read back from the framework
                assert rec["point"]["batch_size"] == bs and rec["point"]["precision"] == p
                assert rec["manifest"]["runtime"]["precision"] == p
                assert rec["metrics"]["steps"] == prof.epochs * (prof.train_samples // bs)
                # the gate compared it at its own precision's tolerances
                assert rec["equivalence"]["dtype"] == ("bf16" if p == "bf16" else "float32")
                if p == "bf16":
                    assert "bf16" in rec["manifest"]["fast_path"]["precision_mode"]
    t = load_tables([run])
    (part,) = scaling.sections(t)
    assert {r["backend"] for r in part["precision"]} == set(SWEEP)
    assert len(part["precision"]) == 4  # each backend at each batch size: bf16 over fp32
    assert all(r["precision"] == "bf16 / fp32" for r in part["precision"])
    assert {r["backend"] for r in part["batch"]} == set(SWEEP)
    html = write_report([run], tmp_path / "again").read_text()
    assert "bf16 / fp32" in html
