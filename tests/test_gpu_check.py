"""The GPU check (``scripts/gpu_check.sh``): its dry run plans every command line here, so the
script cannot rot between GPU machines, and its read-back summary judges records as the check
does (planted records: one of each defect). The check itself ran on an H200: docs/gpu/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check_summary as summary  # noqa: E402 - a script's module, found through its folder


def test_dry_run_plans_every_command_line(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    env.pop("OUT", None)
    p = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "gpu_check: dry run ok" in out
    # the four benches, each planned: the CUDA run's training round holds torch and jax x 4
    for name in ("gpu-fp32", "gpu-bf16", "gpu-tf32", "cpu-ref"):
        assert f"dry run (nothing runs): run {name}:" in out
    assert "round 0 (training run, 8 cells): torch x cnn, jax x cnn," in out
    assert "round 2 (timing round, 8 cells)" in out  # gpu-fp32: the training run + 2 rounds
    assert "numpy_ref x transformer" in out
    if shutil.which("nvidia-smi") is None:  # refused as a user sees it, then planned on the CPU
        assert "--device cuda: no CUDA GPU here" in out
        assert "--tf32 applies to CUDA only" in out
    assert not (ROOT / "gpu-report").exists() or any((ROOT / "gpu-report").iterdir())
    assert list(tmp_path.iterdir()) == []  # its work folder is removed, nothing else made


@pytest.mark.slow  # a second dry run (quick-tier budget)
def test_a_folder_of_imported_specs_adds_the_gpu_import_bench(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    spec = (ROOT / "rosetta/models/cnn.yaml").read_text()  # any spec will do, renamed
    (models / "mine.yaml").write_text(spec.replace("name: cnn", "name: mine", 1))
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path),
           "GPU_CHECK_MODELS": str(models), "GPU_CHECK_BENCHES": "gpu-import"}  # fmt: skip
    env.pop("OUT", None)
    p = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "round 0 (training run, 2 cells): torch x mine, jax x mine" in out  # its specs only
    env["GPU_CHECK_MODELS"] = str(tmp_path / "absent")
    p = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "is not a folder of imported specs" in p.stderr


def test_an_unknown_argument_is_one_line():
    p = subprocess.run(["bash", "scripts/gpu_check.sh", "--gpu"], cwd=ROOT, capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "usage:" in p.stderr


def _record(name, *, device="cuda", ran_on="cuda", status="ok", equivalent=True, tf32=False,
            autotune="cudnn.benchmark=True", backend="torch", workload="cnn"):  # fmt: skip
    return name, {
        "backend": backend, "workload": workload, "status": status,
        "config": {"device": device, "tf32": tf32},
        "equivalence": {"equivalent": equivalent, "where": "first at op 3 conv2d (forward)"},
        "manifest": {"runtime": {"device": ran_on, "tf32": tf32},
                     "fast_path": {"layout": "NCHW", "autotune": autotune}},
        "clocks": {"steady": {"median": 0.0021}, "cold_start_s": 7.5},
    }  # fmt: skip


def _run(tmp_path, *records):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "run.json").write_text("{}")  # not a cell record
    for name, rec in records:
        (run / f"{name}.json").write_text(json.dumps(rec))
    return str(tmp_path), "run"


def test_summary_passes_good_cells_and_lists_them(tmp_path, capsys):
    assert summary.main([*_run(tmp_path, _record("torch__cnn"))]) == 0
    out = capsys.readouterr().out
    assert "torch__cnn" in out and "cuda->cuda" in out and "step=    2.100ms" in out
    assert "1 cell records in 1 runs; 0 problems" in out


@pytest.mark.parametrize(
    "planted, words",
    [
        (dict(equivalent=False), "not equivalent: first at op 3 conv2d"),
        (dict(ran_on="cpu"), "asked for cuda, ran on cpu"),
        (dict(tf32=None), None),  # replaced below: asked on, read back off
        (dict(autotune="n/a"), "cuDNN autotune not on"),
        (dict(status="failed"), "status failed"),
    ],
)
def test_summary_names_each_planted_defect(tmp_path, capsys, planted, words):
    name, rec = _record("torch__cnn", **planted)
    if "tf32" in planted:
        rec["config"]["tf32"], rec["manifest"]["runtime"]["tf32"] = True, False
        words = "TF32 asked True, in effect False"
    assert summary.main([*_run(tmp_path, _record("jax__gru", backend="jax"), (name, rec))]) == 1
    out = capsys.readouterr().out
    assert f"PROBLEM run/torch__cnn: {words}" in out
    assert "jax__gru" not in out.split("problems")[1]  # the good cell is not blamed


def test_summary_interrupted_cells_are_a_cut_not_a_failure(tmp_path, capsys):
    args = _run(tmp_path, _record("torch__cnn"), _record("jax__cnn", status="interrupted"))
    assert summary.main([*args]) == 2
    assert "1 interrupted" in capsys.readouterr().out
    assert summary.main([str(tmp_path)]) == 1  # no run at all is not a pass
