"""The profiles do what they promise (the slow tier's): ``ci`` runs every installed backend
inside CI (one workload each; the conformance suite covers each backend x workload), every cell a
papermill-executed notebook, ok and equivalent; ``smoke`` takes the reference clearly above
chance on the synthetic data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rosetta import backends
from rosetta.cli import main
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig


def _ci_run(tmp_path, workloads: str) -> tuple[Path, list[str]]:
    """``rosetta bench --profile ci`` of every installed backend on ``workloads``, through
    papermill, with the HTML report; every cell ok and gated (or skipped with the line naming the
    ops it lacks)."""
    results = tmp_path / "results"
    usable = [b for b in backends.names() if backends.status(b).usable]
    code = main(["bench", "--profile", "ci", "--results-dir", str(results), "--run-id", "ci",
                 "--workloads", workloads, "--backends", ",".join(usable),
                 "--report-dir", str(tmp_path / "report")])  # fmt: skip
    run = results / "ci"
    for b in usable:
        for w in workloads.split(","):
            rec = json.loads((run / f"{b}__{w}.json").read_text())
            why = CellConfig(backend=b, workload=w).unsupported()  # an op the backend lacks
            if why:
                assert rec["status"] == "skipped" and rec["error"] == why, (b, w, rec)
                continue
            assert rec["status"] == "ok", (b, w, rec.get("error"))
            assert rec["equivalence"]["equivalent"], (b, w, rec["equivalence"]["divergence"])
            assert (run / rec["notebook"]).is_file() and rec["executor"] == "papermill"
    assert code == 0
    return run, usable


@pytest.mark.slow
@pytest.mark.real_peaks
def test_ci_profile_runs_every_installed_backend_through_papermill(tmp_path, capsys):
    """Every installed backend's notebook end to end, one workload each (the CNN: the one every
    backend runs, training or forward: training, data, layouts), with the machine's real peaks
    and the HTML report; its other workloads are the conformance suite's, which checks each
    backend x workload's loader, steps, outputs and manifest. (The slow tier's: a papermill
    kernel per backend. The quick tier runs papermill cells in tests/test_bench.py.)"""
    run, usable = _ci_run(tmp_path, "cnn")
    assert {"numpy_ref", "torch"} <= set(usable)  # scripts/test.sh installs rosetta[all]
    out = capsys.readouterr().out
    assert "summary CSV" in out and (tmp_path / "report" / "ci" / "index.html").is_file()
    info = json.loads((run / "run.json").read_text())
    assert info["peak_gflops"] > 0  # the machine's peaks, measured before the first cell
    assert info["peaks"]["gemm"]["gflops"]["numpy"]["fp32"] > 0
    assert info["peaks"]["ceiling"]["fp32"]["gflops"] > 0  # the measured ceiling (or the probe)


# Chance is 0.1 (cnn) and 0.5 (gru); the reference measured 0.787 and 0.861 on smoke. These
# margins are what `smoke` must clear for the reference, so that a backend's smoke accuracy near
# chance means the backend, not the profile, is wrong.
SMOKE_MARGIN = {"cnn": (0.1, 0.5), "gru": (0.5, 0.25)}


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["cnn", "gru"])
def test_smoke_profile_takes_the_reference_clearly_above_chance(workload):
    rec = run_cell(CellConfig("numpy_ref", workload, "smoke"))
    chance, margin = SMOKE_MARGIN[workload]
    assert rec["metrics"]["test_accuracy"] > chance + margin
