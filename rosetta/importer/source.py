"""An ONNX file read the way a stranger's file must be: every refusal one line, nothing written.

:func:`read` refuses, naming what is wrong and how to fix it: a path that is not a regular file;
a file over :data:`~rosetta.importer.MAX_FILE_BYTES`; bytes that are not an ONNX model (a
truncated file, another format); external data whose location leaves the file's folder (``..``,
an absolute path, a symlink); an initializer over :data:`~rosetta.importer.MAX_TENSOR_VALUES`
values or all of them over :data:`~rosetta.importer.MAX_TOTAL_VALUES`; an ai.onnx opset below
:data:`~rosetta.importer.MIN_OPSET` or an op domain other than ai.onnx; not exactly one graph
input; an input other than float or (N, T) integer token ids; a dynamic dimension other than
the batch with no ``--input-shape``.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rosetta.errors import RosettaError
from rosetta.importer import MAX_FILE_BYTES, MAX_TENSOR_VALUES, MAX_TOTAL_VALUES, MIN_OPSET


@dataclass(frozen=True)
class Source:
    """The model read from the file: its graph, its constants, the facts of its provenance."""

    path: Path
    sha256: str
    model: Any  # onnx.ModelProto, external data loaded
    opset: int
    producer: str
    producer_version: str
    input_name: str
    input_shape: tuple[int, ...]  # per sample (no batch axis)
    output_name: str
    constants: dict[str, np.ndarray]  # initializer name -> values
    batch: int | None = None  # the file's fixed batch size (None: dynamic)
    input_dtype: str = "float32"  # "float32" (images, features) | "int32" (token ids)
    input_onnx_dtype: str = "float32"  # what the file's input takes (int64 ids, say)


def _fail(path: Path, what: str) -> RosettaError:
    return RosettaError(f"{path}: {what}")


def read(path: str | Path, input_shape: tuple[int, ...] | None = None) -> Source:
    """The ONNX model at ``path`` with its weights, checked (module docstring);
    ``input_shape`` (per sample) fixes the input's dynamic dimensions."""
    import onnx
    from google.protobuf.message import DecodeError

    path = Path(path)
    if path.is_symlink() or not path.is_file():
        raise _fail(path, "not a regular file; give the path of an .onnx model file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise _fail(
            path,
            f"{size:,} bytes is over the {MAX_FILE_BYTES:,} read (store the weights as "
            "external data beside it)",
        )
    data = path.read_bytes()
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise _fail(
            path, f"not an ONNX model (truncated, or another format: {type(exc).__name__})"
        ) from None
    if not model.graph.node:
        raise _fail(path, "not an ONNX model (truncated, or another format: no graph nodes)")
    opset = _opset(path, model)
    _load_external(path, model)
    constants = _constants(path, model)
    name, shape, batch, onnx_dtype = _input(path, model, constants, input_shape)
    if len(model.graph.output) != 1:
        raise _fail(path, f"has {len(model.graph.output)} outputs; the spec has one")
    return Source(
        path,
        hashlib.sha256(data).hexdigest(),
        model,
        opset,
        model.producer_name or "unknown",
        model.producer_version or "unknown",
        name,
        shape,
        model.graph.output[0].name,
        constants,
        batch,
        "float32" if onnx_dtype.startswith("float") else "int32",
        onnx_dtype,
    )


def _opset(path: Path, model: Any) -> int:
    opset = None
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            opset = entry.version
    used = sorted({n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")})
    if used:
        raise _fail(path, f"uses ops of the domain(s) {', '.join(used)}; only ai.onnx is read")
    if opset is None or opset < MIN_OPSET:
        raise _fail(
            path,
            f"ai.onnx opset {opset} is below {MIN_OPSET}, the lowest read; re-export it at "
            f"opset {MIN_OPSET} or later (or convert it: onnx.version_converter)",
        )
    return opset


def _load_external(path: Path, model: Any) -> None:
    """Load external data only from regular files inside the model's folder."""
    from onnx import external_data_helper

    folder = path.parent.resolve()
    for tensor in _tensors(model):
        if tensor.data_location != onnx_external():
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        target = folder / location
        if (
            not location
            or os.path.isabs(location)
            or ".." in Path(location).parts
            or target.is_symlink()
            or not target.resolve().is_relative_to(folder)
        ):
            raise _fail(
                path,
                f"initializer {tensor.name[:60]!r}: external data location {location[:60]!r} "
                "leaves the model's folder (only plain files beside it are read)",
            )
        if not target.is_file():
            raise _fail(path, f"external data file {location[:60]!r} is missing beside it")
    external_data_helper.load_external_data_for_model(model, str(folder))


def _tensors(model: Any) -> list:
    """Every tensor the file stores: initializers and tensor attributes of nodes (Constant),
    subgraphs' included."""
    found: list = []

    def graph(g: Any) -> None:
        found.extend(g.initializer)
        for node in g.node:
            for a in node.attribute:
                if a.HasField("t"):
                    found.append(a.t)
                found.extend(a.tensors)
                if a.HasField("g"):
                    graph(a.g)
                for sub in a.graphs:
                    graph(sub)

    graph(model.graph)
    return found


def onnx_external() -> int:
    """``TensorProto.EXTERNAL``."""
    from onnx import TensorProto

    return TensorProto.EXTERNAL


def _constants(path: Path, model: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out: dict[str, np.ndarray] = {}
    total = 0
    for tensor in model.graph.initializer:
        n = math.prod(tensor.dims)
        total += n
        if n > MAX_TENSOR_VALUES or total > MAX_TOTAL_VALUES:
            limit = MAX_TENSOR_VALUES if n > MAX_TENSOR_VALUES else MAX_TOTAL_VALUES
            raise _fail(
                path,
                f"initializer {tensor.name[:60]!r} brings the values over {limit:,} (the bound "
                "on one tensor and on all of them: a model this large is not benchmarked here)",
            )
        out[tensor.name] = numpy_helper.to_array(tensor)
    return out


def _input(
    path: Path, model: Any, constants: dict, given: tuple[int, ...] | None
) -> tuple[str, tuple[int, ...], int | None, str]:
    from onnx import TensorProto

    inputs = [i for i in model.graph.input if i.name not in constants]
    if len(inputs) != 1:
        raise _fail(path, f"has {len(inputs)} graph inputs besides its weights; the spec has one")
    value = inputs[0]
    kind = value.type.tensor_type
    floats = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64",
              TensorProto.FLOAT16: "float16"}  # fmt: skip
    ids = {TensorProto.INT64: "int64", TensorProto.INT32: "int32"}
    dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
    if kind.elem_type in ids and len(dims) != 2:
        raise _fail(
            path,
            f"input {value.name[:60]!r} is integer of rank {len(dims)}; integers are read as "
            "token ids of shape (N, T) only",
        )
    if kind.elem_type not in floats and kind.elem_type not in ids:
        raise _fail(
            path,
            f"input {value.name[:60]!r} is of ONNX element type {kind.elem_type}; read are float "
            "inputs (images, features) and int64/int32 token ids (N, T)",
        )
    dtype = floats.get(kind.elem_type) or ids[kind.elem_type]
    if len(dims) < 2:
        raise _fail(path, f"input {value.name[:60]!r} has rank {len(dims)}; expected (N, ...)")
    sample, batch = dims[1:], dims[0]
    if given is not None:
        if len(given) != len(sample) or any(
            d not in (None, g) for d, g in zip(sample, given, strict=True)
        ):
            raise _fail(
                path,
                f"--input-shape {list(given)} does not fit the input's per-sample "
                f"dimensions {['?' if d is None else d for d in sample]}",
            )
        return value.name, tuple(given), batch, dtype
    if any(d is None for d in sample):
        raise _fail(
            path,
            f"input {value.name[:60]!r} has dynamic dimensions "
            f"{['?' if d is None else d for d in sample]}; give them: --input-shape C,H,W",
        )
    return value.name, tuple(int(d) for d in sample), batch, dtype
