"""Run a generated file in a fresh process and judge it with the equivalence gate.

The file is written to a folder, given the canonical weights and a batch (``IN.npz``), run with
``python FILE --weights W.npz --check IN.npz OUT.npz --dtype D`` in a new interpreter (no
``rosetta`` on its path: it must stand alone), and its outputs are wrapped in
:class:`GeneratedRun`, which answers the gate's questions from ``OUT.npz``. So
:func:`rosetta.runner.gate.run_gate` compares it with the float64 reference through the very
tolerance objects it applies to the lowered models. :func:`run_files` runs many small files of
one framework and dtype (the graph probes) in one fresh interpreter, one after another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from rosetta.backends.base import Params
from rosetta.codegen import Generated
from rosetta.errors import BackendError
from rosetta.runner.gate import K_STEPS, GateResult, run_gate
from rosetta.spec import save_weights
from rosetta.spec.workload import Workload


class GeneratedRun:
    """The outputs of one ``--check`` run, shaped as the gate asks for a model's."""

    def __init__(self, backend: str, out: dict[str, np.ndarray], params: Params):
        self.backend = f"generated:{backend}"
        self.out = out
        self.params = params

    def get_params(self) -> Params:
        """What the file was handed: it loads these canonical weights from its ``.npz`` itself,
        so a loading fault of the file shows in its forward and gradients, not here."""
        return self.params

    def _named(self, prefix: str) -> Params:
        return {k[len(prefix) :]: v for k, v in self.out.items() if k.startswith(prefix)}

    def predict_numpy(self, x: np.ndarray) -> np.ndarray:
        return self.out["forward"]

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        return float(self.out["loss"]), self._named("grad:")

    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        return self._named("params:")

    def gated_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> tuple[list[float], Params]:
        """The file's training step run k times (dropout off): its loss at the start (the file
        reports the loss before its steps) and the parameters after."""
        return [float(self.out["loss"])], self._named("params:")


def run_file(
    gen: Generated,
    workload: Workload,
    params: Params,
    x: np.ndarray,
    y: np.ndarray | None,
    dtype: str,
    folder: Path,
    *,
    k: int = K_STEPS,
    timeout: float = 600,
) -> dict[str, np.ndarray]:
    """Write ``gen`` into ``folder``, run its ``--check`` in a fresh process, return OUT.npz."""
    outfile, args = _write_job(gen, workload, params, x, y, dtype, folder, k)
    env = {k_: v for k_, v in os.environ.items() if k_ != "PYTHONPATH"}  # no rosetta on the path
    cmd = [sys.executable, gen.name, *args]
    done = subprocess.run(
        cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-12:]
        raise BackendError(f"{gen.name} --check failed ({done.returncode}):\n" + "\n".join(tail))
    return _read_and_clear(outfile)


def _read_and_clear(outfile: Path) -> dict[str, np.ndarray]:
    """OUT.npz's arrays, then the job's three ``.npz`` files removed: a ResNet-50's weights,
    gradients and parameters are ~100 MB a file, and pytest keeps its last runs' folders (the
    file itself and a failed job's files stay, to read)."""
    with np.load(outfile) as f:
        out = {name: f[name] for name in f.files}
    stem = outfile.name[: -len("out.npz")]
    for n in ("w", "in", "out"):
        (outfile.parent / f"{stem}{n}.npz").unlink(missing_ok=True)
    return out


#: runs several generated files' ``--check`` in one interpreter, one after another, each as
#: ``__main__`` from its own folder with its own ``sys.argv``; writes {key: "ok" or the error}
_BATCH_DRIVER = """\
import json, os, runpy, sys, traceback

jobs_file, status_file = sys.argv[1], sys.argv[2]
with open(jobs_file) as f:
    jobs = json.load(f)
status = {}
for job in jobs:
    os.chdir(job["folder"])
    sys.argv = [job["file"], *job["args"]]
    try:
        runpy.run_path(job["file"], run_name="__main__")
        status[job["key"]] = "ok"
    except SystemExit as stop:
        status[job["key"]] = "ok" if stop.code in (None, 0) else f"exit {stop.code!r}"
    except BaseException:
        status[job["key"]] = traceback.format_exc()[-3000:]
with open(status_file, "w") as f:
    json.dump(status, f)
"""


def _write_job(gen, workload, params, x, y, dtype, folder: Path, k: int) -> tuple[Path, list]:
    """Write ``gen``, its weights and its batch into ``folder``: (OUT path, the file's argv)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / gen.name).write_text(gen.text)
    wfile, infile, outfile = (folder / f"{gen.workload}_{n}.npz" for n in ("w", "in", "out"))
    save_weights(wfile, workload, params)
    batch = {"x": x, "k": np.int64(k)}
    if y is not None:
        batch["y"] = y
    np.savez(infile, **batch)
    args = ["--weights", wfile.name, "--check", infile.name, outfile.name, "--dtype", dtype]
    return outfile, args


def run_files(
    jobs: dict[str, tuple[Generated, Workload, Params, np.ndarray, np.ndarray | None]],
    dtype: str,
    folder: Path,
    *,
    k: int = K_STEPS,
    timeout: float = 3600,
) -> dict[str, dict[str, np.ndarray] | str]:
    """Run every job's file ``--check`` in ONE fresh interpreter (no ``rosetta`` on its path),
    one after another: {key: OUT.npz's arrays, or the error text of that file}.

    For many small files of one framework and dtype (the graph probes), where a fresh interpreter
    per file pays the framework's import each time. The files share the interpreter's state (a
    framework's global dtype setting, its seeds), so only files of one dtype go together, and
    each workload's own file keeps its fresh process (:func:`run_file`): that is where a file
    shows it stands alone.
    """
    folder.mkdir(parents=True, exist_ok=True)
    plan, outs = [], {}
    for key, (gen, workload, params, x, y) in jobs.items():
        sub = folder / key
        outs[key], args = _write_job(gen, workload, params, x, y, dtype, sub, k)
        plan.append({"key": key, "folder": str(sub), "file": gen.name, "args": args})
    (folder / "jobs.json").write_text(json.dumps(plan))
    (folder / "batch_check.py").write_text(_BATCH_DRIVER)
    env = {k_: v for k_, v in os.environ.items() if k_ != "PYTHONPATH"}  # no rosetta on the path
    cmd = [sys.executable, "batch_check.py", "jobs.json", str(folder.resolve() / "status.json")]
    done = subprocess.run(
        cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    status_file = folder / "status.json"
    if done.returncode != 0 or not status_file.is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-12:])
        return {key: f"the batch interpreter failed ({done.returncode}):\n{tail}" for key in jobs}
    status = json.loads(status_file.read_text())
    results: dict[str, dict[str, np.ndarray] | str] = {}
    for key, out in outs.items():
        if status.get(key) != "ok":
            results[key] = status.get(key, "not run")
            continue
        results[key] = _read_and_clear(out)
    return results


def gate_generated(
    gen: Generated,
    workload: Workload,
    params: Params,
    x: np.ndarray,
    y: np.ndarray | None,
    dtype: str,
    folder: Path,
) -> GateResult:
    """The equivalence gate's verdict on the generated file ``gen`` (run in a fresh process)."""
    out = run_file(gen, workload, params, x, y, dtype, folder)
    return run_gate(GeneratedRun(gen.backend, out, params), workload, params, x, y, dtype)  # type: ignore[arg-type]
