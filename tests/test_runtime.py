"""The runtime is resolved once, before anything that depends on it, and records what is in
effect: the device with its reason, and the thread count read back from inside each framework."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rosetta import backends
from rosetta.errors import BackendError
from rosetta.runner.cell import Cell, run_cell
from rosetta.runner.config import CellConfig
from rosetta.runtime import THREAD_VARS, Runtime, child_env, usable_cores
from tests.bench_helpers import fault_env


def test_request_refuses_bad_values_in_one_line():
    for kwargs, match in (
        ({"device": "tpu"}, "unknown device 'tpu'; valid: cpu, cuda, auto"),
        ({"dtype": "float16"}, "unknown dtype 'float16'; valid: float32, float64"),
        ({"precision": "int8"}, "unknown precision 'int8'; valid: "),
        ({"threads": 0}, "threads must be a positive integer"),
        ({"tf32": True}, "--tf32 applies to CUDA only"),
    ):
        with pytest.raises(BackendError, match=match) as err:
            Runtime.request("numpy_ref", **kwargs)
        assert "\n" not in str(err.value)


def test_child_env_is_the_one_place_threads_become_variables():
    env = child_env(3, base={"PATH": "/bin", "OMP_NUM_THREADS": "99", "PYTHONPATH": "/elsewhere"})
    assert {k: env[k] for k in THREAD_VARS} == dict.fromkeys(THREAD_VARS, "3")
    assert env["PATH"] == "/bin"
    assert child_env(None, base={})["OMP_NUM_THREADS"] == str(usable_cores())
    # the driver's own package first, and no working directory prepended (PYTHONSAFEPATH)
    import rosetta

    root = str(Path(rosetta.__file__).resolve().parent.parent)
    assert env["PYTHONPATH"].split(os.pathsep) == [root, "/elsewhere"]
    assert env["PYTHONSAFEPATH"] == "1"
    models = child_env(None, base={"ROSETTA_MODELS": "specs"})["ROSETTA_MODELS"]
    assert models == str(Path.cwd() / "specs")  # the driver's folder, not the cell's cwd


def test_auto_on_a_cpu_only_machine_records_cpu_with_its_reason(small_data):
    rec = run_cell(CellConfig("numpy_ref", "gru", "ci", device="auto", data_dir=str(small_data)))
    rt = rec["manifest"]["runtime"]
    assert rt["device"] == "cpu" and "device" not in rec["manifest"]  # stored once
    assert rt["device_reason"] == "auto: it runs on the CPU only to numpy_ref"
    assert rec["clocks"]["sample_every"] == 1
    assert rec["config"]["device"] == "auto"  # the request stays in the config, as asked


def test_the_device_is_resolved_before_sample_every_and_the_manifest(small_data, monkeypatch):
    # a backend that sees a (pretend) GPU: `auto` must become cuda *before* the cell decides
    # how often to sync (4 on CUDA) and which machine facts to collect (GPU facts on CUDA)
    fault_env(monkeypatch, "fakecuda")
    asked = []
    monkeypatch.setattr(
        "rosetta.runner.manifest.gpu_info", lambda: asked.append("gpu") or {"gpus": []}
    )
    cell = Cell(CellConfig("fault", "gru", "ci", device="auto", data_dir=str(small_data)))
    # resolved first, when the cell is made: before data, build, sampling or any record
    assert (cell.runtime.device, cell.runtime.device_reason) == (
        "cuda",
        "auto: a CUDA GPU is visible",
    )
    assert cell.data is None and cell.model is None
    assert cell.sample_every == 4
    assert "gpu" in cell.environment() and asked == ["gpu"]
    failed = cell.failure("boom")  # a failure after this point names the resolved device
    assert failed["manifest"]["runtime"]["device"] == "cuda" and failed["status"] == "failed"


PROBE = {  # what each framework itself says about its threads, independent of the backend code
    "numpy_ref": "from threadpoolctl import threadpool_info as t; "
    "print(min(p['num_threads'] for p in t() if p['user_api'] == 'blas'))",
    "torch": "import torch; print(torch.get_num_threads())",
    "tensorflow": "import tensorflow as tf; "
    "print(tf.config.threading.get_intra_op_parallelism_threads())",
    "jax": "import os; print(len(os.sched_getaffinity(0)))",
    "chainer": "from threadpoolctl import threadpool_info as t; "
    "print(min(p['num_threads'] for p in t() if p['user_api'] == 'blas'))",
    # Paddle has no getter: its bundled OpenMP runtime (libiomp5, which its MKL kernels use)
    "paddle": "from threadpoolctl import threadpool_info as t; "
    "print(min(p['num_threads'] for p in t() if 'paddle' in p['filepath'] "
    "and p['user_api'] == 'openmp'))",
    "keras_jax": "import os; print(len(os.sched_getaffinity(0)))",
    "keras_torch": "import torch; print(torch.get_num_threads())",
}


@pytest.mark.parametrize("backend", list(PROBE))
def test_one_thread_is_in_effect_inside_the_framework(backend):
    if not backends.status(backend).usable:
        pytest.skip(backends.status(backend).reason)
    code = (
        "import json, rosetta.backends as b\n"
        f"rt = b.runtime_for({backend!r}, threads=1)\n"
        "m = b.load(rt.backend)\n"
        f"{PROBE[backend]}\n"
        "print(json.dumps(rt.as_dict()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env=child_env(None),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    native, runtime = out.stdout.strip().splitlines()[-2:]
    assert int(native) == 1, f"{backend}: the framework runs {native} threads"
    assert json.loads(runtime)["threads"] == 1
