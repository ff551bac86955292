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
