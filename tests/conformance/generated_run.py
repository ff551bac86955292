"""Run a generated file in a fresh process and judge it with the equivalence gate.

The file is written to a folder, given the canonical weights and a batch (``IN.npz``), run with
``python FILE --weights W.npz --check IN.npz OUT.npz --dtype D`` in a new interpreter (no
``rosetta`` on its path: it must stand alone), and its outputs are wrapped in
:class:`GeneratedRun`, which answers the gate's questions from ``OUT.npz``. So
:func:`rosetta.runner.gate.run_gate` compares it with the float64 reference through the very
tolerance objects it applies to the lowered models.
"""

from __future__ import annotations

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
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / gen.name
    src.write_text(gen.text)
    wfile, infile, outfile = (folder / f"{gen.workload}_{n}.npz" for n in ("w", "in", "out"))
    save_weights(wfile, workload, params)
    batch = {"x": x, "k": np.int64(k)}
    if y is not None:
        batch["y"] = y
    np.savez(infile, **batch)
    env = {k_: v for k_, v in os.environ.items() if k_ != "PYTHONPATH"}  # no rosetta on the path
    cmd = [sys.executable, src.name, "--weights", wfile.name, "--check", infile.name]
    cmd += [outfile.name, "--dtype", dtype]
    done = subprocess.run(
        cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-12:]
        raise BackendError(f"{gen.name} --check failed ({done.returncode}):\n" + "\n".join(tail))
    with np.load(outfile) as f:
        return {name: f[name] for name in f.files}


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
