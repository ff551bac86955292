"""The per-backend notebooks: generated from one template, executed by papermill, kept thin.

``make_notebook(backend)`` is the single source of ``notebooks/<backend>.ipynb`` (committed
without outputs; a test checks they are up to date). Each notebook has a papermill
``parameters`` cell and then the steps of ``rosetta.runner.cell.Cell``, each followed by what a
person wants to see: the environment, the spec as a table, the native model, its generated
source (``rosetta code``), the gate's numbers, the step times with a plot, the accuracy and the
record. The display helpers live here, so the
notebooks stay a screen long and their logic is tested in the package.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

from rosetta import backends
from rosetta.runner import records
from rosetta.runner.cell import Cell
from rosetta.runner.config import CellConfig

PARAMETERS = {  # the papermill parameters cell: CellConfig's fields with the notebook defaults
    "workload": "cnn",
    "profile": "ci",
    "seed": 0,
    "device": "cpu",
    "dtype": "float32",
    "threads": None,
    "precision": "fp32",
    "tf32": False,
    "data_dir": None,
    "out": "",
    "run_id": "notebook",
    "sample_every": None,
}


def notebooks_dir() -> Path:
    """The repository's ``notebooks/`` folder (may be absent in an installed package)."""
    from rosetta.datasets.paths import repo_root

    return repo_root() / "notebooks"


def notebook_source(backend: str) -> Path | None:
    """The committed notebook of ``backend`` if this is a checkout that has it."""
    path = notebooks_dir() / f"{backend}.ipynb"
    return path if path.is_file() else None


def make_notebook(backend: str):
    """The notebook of ``backend`` as an ``nbformat`` node (no outputs)."""
    import nbformat.v4 as v4

    framework = backends.info(backend).framework
    forward_only = backends.training_unsupported(backend)  # a serving engine: no training cell
    defaults = {**PARAMETERS, "workload": "resnet50"} if forward_only else PARAMETERS
    params = [f"backend = {backend!r}"] + [f"{k} = {v!r}" for k, v in defaults.items()]
    md, code = v4.new_markdown_cell, v4.new_code_cell
    cells = [
        md(
            f"# Rosetta: the {framework} backend (`{backend}`)\n\n"
            "One Rosetta *cell*: a workload of the neutral spec, lowered to this framework, "
            "checked against the NumPy reference, then timed. `rosetta bench` executes this "
            "notebook with papermill, one kernel per cell, and saves the executed copy beside the "
            "cell's record. Opened by hand, *Run all* runs the `ci` profile on the embedded "
            "synthetic data; change the parameters below to run another workload or profile."
            + (
                f"\n\n{forward_only[0].upper()}{forward_only[1:]}; by default this notebook runs "
                "the `ci` profile of the ResNet-50 features (a training workload runs its "
                "forward pass only)."
                if forward_only
                else ""
            )
        ),
        code("\n".join(params), metadata={"tags": ["parameters"]}),
        md("## 1. The environment"),
        code(
            "from rosetta.runner import notebook as nb\n\n"
            "cell = nb.start(locals())  # the parameters above, as one CellConfig\n"
            "nb.show_environment(cell)"
        ),
        md("## 2. The spec: the layers every backend lowers"),
        code("nb.show_spec(cell)"),
        md(f"## 3. The native {framework} model the lowering built"),
        code("model = cell.build()\nprint(model.summary())"),
        md(
            f"## 4. The same model as {framework} source a person would write\n\n"
            f"`rosetta code WORKLOAD --backend {backend}` generates it from the same tables the "
            "lowering uses; it runs with NumPy and the framework only, and the conformance suite "
            "gates it against the reference like the model above."
        ),
        code("nb.show_source(cell)"),
        md(
            "## 5. The equivalence gate\n\nForward outputs, and for training the loss, every "
            "gradient and the parameters after 3 optimiser steps, against the float64 NumPy "
            "reference. A violation is the worst |difference| / tolerance: at most 1 passes."
        ),
        code("nb.show_gate(cell.gate())"),
        md("## 6. The timed run"),
        code("cell.run()\nnb.show_clocks(cell)"),
        code("nb.plot(cell)"),
        md("## 7. The result"),
        code("nb.show_metrics(cell)"),
        md("## 8. The record"),
        code("record = nb.finish(cell)"),
    ]
    for i, c in enumerate(cells):
        c["id"] = f"step-{i:02d}"  # stable ids: the committed file is reproducible
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["rosetta"] = {"backend": backend, "generated_by": "rosetta.runner.notebook"}
    return nb


def write_notebooks(folder: Path | None = None) -> list[Path]:
    """Write every backend's notebook into ``folder`` (default: the repository's notebooks/)."""
    import nbformat

    folder = Path(folder) if folder else notebooks_dir()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in backends.names():
        path = folder / f"{name}.ipynb"
        nbformat.write(make_notebook(name), str(path))
        paths.append(path)
    return paths


# -- what the notebook cells call ------------------------------------------------------------
def start(namespace: dict) -> Cell:
    """A ``Cell`` from the notebook's parameters; makes the synthetic data if none is there."""
    # every CellConfig field papermill injected (batch_size, round...), not only those shown
    names = [f.name for f in dataclasses.fields(CellConfig)]
    fields = {k: namespace[k] for k in names if k in namespace}
    config = CellConfig(**fields)
    from rosetta.datasets import prepare_data
    from rosetta.spec import get_workload

    prepare_data([get_workload(config.workload).dataset.name], config.data_dir)
    return Cell(config)


def show_environment(cell: Cell) -> None:
    """Print the cell's configuration and the machine."""
    env = cell.environment()
    c = cell.config
    print(f"cell      {c.backend} x {c.workload}, profile {c.profile}, {c.dtype} on {c.device}")
    for key in ("cpu", "cpu_count", "os", "python", "numpy", "blas", "git_revision", "load_avg"):
        print(f"{key:<13} {env.get(key)}")
    print(f"threads       {c.threads or 'all usable cores'} (asked; in effect after build)")


def show_spec(cell: Cell) -> None:
    """Print the spec as a table of layers."""
    w = cell.workload
    print(f"{w.name}: {w.description}")
    print(f"input {list(w.input.shape)} {w.input.dtype}; {w.num_params:,} parameters\n")
    print(f"{'layer':<24} {'op':<14} {'output':<16} {'params':>10}")
    for name, op, out, n in cell.spec_table():
        print(f"{name:<24} {op:<14} {out:<16} {n:>10}")


def show_source(cell: Cell) -> None:
    """Print the generated source file of the cell's workload in its backend's framework."""
    from rosetta import codegen

    backend = cell.config.backend
    if backend not in codegen.BACKENDS:
        print(f"no generated source for backend {backend!r} (codegen covers {codegen.BACKENDS})")
        return
    print(codegen.generate(cell.config.workload, backend).text)


def show_gate(gate) -> None:
    """Print the gate's verdict and each check."""
    print(f"equivalent: {gate.equivalent} ({gate.dtype}, {gate.note})")
    if gate.reused_from:
        print(f"  the verdict of {gate.reused_from}: the same function at another batch size, "
              "thread count or round of this run, gated once")  # fmt: skip
    for c in gate.checks:
        where = f"  worst at {c.worst}" if c.worst else ""
        print(f"  {c.what:<8} {c.violation:10.3g} x tolerance{where}")
    if gate.divergence:
        print(f"  -> {gate.divergence}")


def show_clocks(cell: Cell) -> None:
    """Print cold start, steady state and end to end."""
    c, st = cell.result["clocks"], cell.result["clocks"]["steady"]
    print(f"first step       {c['first_step_s']:.3f} s (part of the cold start)")
    print(
        f"steady step      median {st['median']:.4f} s [95% CI {st['ci95_low']:.4f}, "
        f"{st['ci95_high']:.4f}], IQR {st['q25']:.4f}-{st['q75']:.4f}, n={st['n']}"
    )
    print(f"end to end       {c['end_to_end_s']:.2f} s")
    print(f"throughput       {c['throughput_samples_per_s']:.1f} samples/s")
    for flag in cell.flags:
        print(f"FLAG: {flag}")


def plot(cell: Cell) -> None:
    """Step times (and the loss curve for training) as a small matplotlib figure."""
    import matplotlib.pyplot as plt

    c, m = cell.result["clocks"], cell.result["metrics"]
    losses = m.get("losses")
    fig, axes = plt.subplots(1, 2 if losses else 1, figsize=(10 if losses else 5, 3))
    axes = axes if losses else [axes]
    axes[0].plot(c["steady_raw_s"], marker=".")
    axes[0].set(title="steady-state step times", xlabel="sampled step", ylabel="seconds")
    if losses:
        axes[1].plot(losses)
        axes[1].set(title="training loss", xlabel="step", ylabel="loss")
    fig.tight_layout()
    plt.show()


def show_metrics(cell: Cell) -> None:
    """Print the accuracy, a forward-only cell's time per 1000 samples, or the time per 1000
    images."""
    m = cell.result["metrics"]
    if "test_accuracy" in m:
        print(f"test accuracy {m['test_accuracy']:.4f} on {m['test_samples']} samples")
        print(f"data          {cell.data.source} ({cell.data.checksum})")
    elif m.get("mode") == "forward":  # a serving engine on a training workload: no training
        print(f"forward only: {m['time_per_1000_samples_s']:.2f} s per 1000 samples "
              f"({m['samples']} samples of the test data, {cell.data.source})")  # fmt: skip
    else:
        print(f"time per 1000 images {m['time_per_1000_images_s']:.2f} s ({m['images']} images)")


def finish(cell: Cell) -> dict:
    """Build the record, write it to ``config.out`` when given, and print a short view."""
    rec = cell.record()
    if cell.config.out:
        records.write_record(Path(cell.config.out), rec)
        print(f"record written: {cell.config.out}")
    view = {k: rec[k] for k in ("backend", "workload", "profile", "status")}
    view["equivalent"] = rec["equivalence"]["equivalent"]
    view["steady_median_s"] = rec["clocks"]["steady"]["median"]
    print(json.dumps(view, indent=1))
    return rec


def staged(config: CellConfig) -> CellConfig:
    """The config a papermill run gets: the record goes to a hidden staging file first."""
    out = Path(config.out)
    return replace(config, out=str(out.with_name(f".{out.stem}.pending.json")))
