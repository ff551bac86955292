"""``spec/``, ``datasets/``, the registry and the CLI import no deep-learning framework."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "jaxlib", "flax", "optax", "chainer", "cupy",
              "onnx", "onnxruntime", "openvino", "paddle", "pytensor", "numba")  # fmt: skip


def test_core_modules_import_no_framework():
    code = (
        "import sys\n"
        "import rosetta.spec, rosetta.datasets, rosetta.backends, rosetta.cli\n"
        "import rosetta.backends.numpy_ref, rosetta.export, rosetta.export.table\n"
        "from rosetta import backends\n"
        "[backends.status(n) for n in backends.names()]\n"
        "from rosetta.cli import build_parser; build_parser()\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"framework modules imported: {out.stdout.strip()}"


def test_spec_imports_only_stdlib_numpy_yaml():
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import rosetta.spec\n"
        "from rosetta.spec import get_workload, canonical_weights\n"
        "canonical_weights(get_workload('gru'))\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "stdlib = set(sys.stdlib_module_names)\n"
        "ignore = stdlib | {'cython_runtime'}  # a pseudo-module of NumPy's Cython extensions\n"
        "print(','.join(sorted(m for m in new if m not in ignore and not m.startswith('_'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set(out.stdout.strip().split(",")) <= {"rosetta", "numpy", "yaml"}, out.stdout


def test_every_op_module_loads_without_its_framework():
    """The text face of every backend (its op modules, ``ops/<op>.py``, and the table they
    make) loads and renders a workload with no framework imported: ``build`` imports it."""
    code = (
        "import sys\n"
        "from rosetta import backends\n"
        "from rosetta.backends import driver\n"
        "from rosetta.backends.snippet import RenderCtx\n"
        "from rosetta.spec import get_workload\n"
        "w = get_workload('transformer')\n"
        "for name in backends.REGISTRY:\n"
        "    table = backends.source_module(name).OPS\n"
        "    assert table.entries, name\n"
        "    driver.lower(table.rendering(), w.graph, w.input.shape, RenderCtx())\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"framework modules imported: {out.stdout.strip()}"
