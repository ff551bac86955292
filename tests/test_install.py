"""Rosetta works as an installed package: specs ship as package data, nothing needs the checkout.

A wheel of this checkout is built and installed non-editable into a fresh virtual environment,
which reuses NumPy and PyYAML from the project's ``.venv`` (through a ``.pth`` line, so no
download is needed); ``rosetta list`` then runs from an unrelated directory.
"""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_installed_wheel_lists_workloads_from_another_directory(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheels), str(ROOT)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = wheels.glob("rosetta-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # NumPy and PyYAML from the project's environment; rosetta only from the wheel
    (Path(purelib) / "reuse.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
         "-q", str(wheel)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run(
        [str(venv / "bin" / "rosetta"), "list"],
        cwd=elsewhere, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for name in ("cnn", "gru", "resnet50"):
        assert f"  {name} " in out.stdout
    where = subprocess.run(
        [str(py), "-c", "import rosetta, rosetta.spec as s; print(rosetta.__file__); "
         "print(s.models_dir())"],
        cwd=elsewhere, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(str(venv) in p for p in where), where  # the installed copy, not the checkout
    assert Path(where[1], "cnn.yaml").is_file()
