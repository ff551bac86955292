"""``rosetta import``'s steps, in order: read, translate, check against the source, write.

Nothing is written until the translation covers every node and the float64 reference matches
ONNX Runtime's run of the original file: the weights and the spec are first written to a
temporary folder, loaded back through the spec's own loader (every check a hand-written spec
gets) and run, and only then written into the models folder.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rosetta.errors import RosettaError
from rosetta.importer import patterns, rules, write
from rosetta.importer import source as sources
from rosetta.importer import translate as translation

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Imported:
    """What one import did."""

    coverage: dict  # ONNX op type -> translate.Row
    spec_path: Path | None  # None for --check, or where nothing was written
    weights_path: Path | None
    check: write.Check | None
    layers: int = 0
    params: int = 0


class UnsupportedNodes(RosettaError):
    """The file holds node types the spec cannot express; carries the coverage table."""

    def __init__(self, message: str, coverage: dict) -> None:
        super().__init__(message)
        self.coverage = coverage


def read_and_translate(path: Path, input_shape: tuple[int, ...] | None):
    """The source and its translation; :class:`UnsupportedNodes` (with the coverage table)
    where any node cannot be read."""
    source = sources.read(path, input_shape)
    result = translation.translate(source, rules.RULES, patterns.find(source))
    bad = result.unsupported
    if bad:
        counts = ", ".join(f"{k} x{r.count}" for k, r in sorted(bad.items()))
        raise UnsupportedNodes(
            f"{path}: unsupported node types: {counts}; nothing written (see the table)",
            result.coverage,
        )
    return source, result


def default_name(path: Path) -> str:
    """The file's stem as a workload name (``resnet-18.onnx`` -> ``resnet_18``)."""
    name = translation.spec_name(path.stem)
    return name if NAME.fullmatch(name or "") else "imported"


def import_model(
    path: Path,
    folder: Path,
    name: str,
    task: str = "features",
    input_shape: tuple[int, ...] | None = None,
    force: bool = False,
) -> Imported:
    """Read ``path``, translate it, check it against the file, write ``folder/name.{yaml,npz}``."""
    from rosetta.spec import load_workload

    if not NAME.fullmatch(name):
        raise RosettaError(
            f"--name {name[:40]!r}: a workload name is a letter or _, then letters, digits, _"
        )
    if not folder.is_dir():
        raise RosettaError(f"{folder}: the models folder is not a folder; create it first")
    source, result = read_and_translate(path, input_shape)
    spec = write.workload_spec(source, result, name, task)
    blob = write.weights_bytes(result.weights)
    spec["weights"] = {"file": f"{name}.npz", "sha256": write.sha256(blob)}
    with tempfile.TemporaryDirectory(prefix="rosetta-import-") as tmp:
        trial = Path(tmp)
        (trial / f"{name}.npz").write_bytes(blob)
        (trial / f"{name}.yaml").write_text(write.spec_text(spec, source, None))
        workload = load_workload(trial / f"{name}.yaml")
        check = write.check_against_source(source, workload)
    if not check.ok:
        raise RosettaError(
            f"{path}: the reference computes a different function from the file (max "
            f"|difference| {check.max_abs:.3g}, {check.max_rel:.3g} of the largest output; "
            f"bound {write.CHECK_RTOL:g}); nothing written. Please report it with the file"
        )
    spec["provenance"] = write.provenance(source, check)
    spec_path, weights_path = write.write(
        folder, name, write.spec_text(spec, source, check), blob, force
    )
    return Imported(
        result.coverage,
        spec_path,
        weights_path,
        check,
        len(workload.graph),
        workload.num_params,
    )
