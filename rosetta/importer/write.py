"""The imported workload: its spec text, its weights file, its provenance, and the check of the
float64 reference against ONNX Runtime's run of the original file.

:func:`workload_spec` makes the spec mapping (``task: features`` by default: an ONNX file carries
no loss or optimiser; ``train`` states softmax cross-entropy and SGD with momentum, for a
CIFAR-10-shaped classifier); :func:`spec_text` writes it as YAML in the built-in specs' style
(one flow mapping per layer); :func:`check_against_source` runs the reference and ONNX Runtime
on the same inputs; :func:`write` writes the weights (``NAME.npz``) and then the spec
(``NAME.yaml``, naming the weights' sha256) into the models folder, each whole (a temporary file,
then a rename), refusing to replace either without ``force``.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import rosetta
from rosetta.errors import RosettaError
from rosetta.importer import CHECK_ATOL, CHECK_RTOL
from rosetta.spec.probes import TOLERANCES as PROBE_TOLERANCES
from rosetta.userfile import check_target, write_user_file

#: the tolerances an imported workload's backends are gated at: ResNet-50's (the deepest
#: built-in convolutional network, 1e-3 relative in float32, module docstring of
#: rosetta/models/resnet50.yaml), the probes' strict float64 set
TOLERANCES = {
    "float32": {"forward": {"rtol": 1.0e-3, "atol": 1.0e-4}},
    "float64": {"forward": {"rtol": 1.0e-9, "atol": 1.0e-10}},
}


def _train_tolerances() -> dict:
    """A trained import's bounds: the probes' for gradients and optimiser steps
    (``rosetta.spec.probes.TOLERANCES``), the forward at :data:`TOLERANCES` (deep nets) and the
    loss, which follows the forward, 10x the probes'."""
    out = {}
    for dtype, probe in PROBE_TOLERANCES.items():
        loss = dict(probe["loss"], rtol=float(f"{10 * probe['loss']['rtol']:.3g}"))
        out[dtype] = {**probe, "forward": TOLERANCES[dtype]["forward"], "loss": loss}
    return out


TRAIN_TOLERANCES = _train_tolerances()


@dataclass(frozen=True)
class Check:
    """The reference (float64) against ONNX Runtime on the original file (float32)."""

    max_abs: float
    max_rel: float  # max_abs over the largest |reference output|
    ok: bool


def workload_spec(source: Any, translation: Any, name: str, task: str) -> dict:
    """The spec mapping of the imported model (weights named, not yet hashed)."""
    shape = list(source.input_shape)
    description = (
        f"imported by rosetta import from {source.path.name[:80]} "
        f"({source.producer[:40]} {source.producer_version[:20]}, opset {source.opset})"
    )
    tokens = source.input_dtype == "int32"
    task = "train" if tokens else task  # a token model trains (token_dataset)
    spec: dict = {
        "name": name,
        "title": f"{name} (imported from ONNX): {'training' if task == 'train' else 'inference'}",
        "description": "".join(c if c.isprintable() else "?" for c in description),
        "task": task,
    }
    if tokens:
        spec["dataset"] = token_dataset(translation, shape, task)
    elif task == "train":
        if shape != [3, 32, 32]:
            raise RosettaError(
                f"--task train needs a CIFAR-10-shaped classifier (input 3x32x32, 10 logits); "
                f"this model's input is {shape}: import it as features (the default)"
            )
        spec["dataset"] = {"name": "cifar10", "classes": 10}
    else:
        spec["dataset"] = {"name": "random_images", "seed": 0, "count": 256}
    spec["input"] = {"shape": shape, "dtype": source.input_dtype}
    spec["layers"] = translation.layers
    if tokens:  # the built-in GRU's loss, optimiser (Adam, as Keras' IMDB example) and profiles
        spec["loss"] = {"op": "softmax_cross_entropy", "reduction": "mean"}
        spec["optimizer"] = {"op": "adam", "lr": 1.0e-3, "beta1": 0.9, "beta2": 0.999,
                             "eps": 1.0e-8}  # fmt: skip
        spec["profiles"] = {
            "ci": {"batch_size": 32, "epochs": 1, "train_samples": 128, "test_samples": 64},
            "smoke": {"batch_size": 64, "epochs": 1, "train_samples": 3072, "test_samples": 768},
            "full": {"batch_size": 64, "epochs": 3, "train_samples": 25000, "test_samples": 25000},
        }
        spec["tolerances"] = TRAIN_TOLERANCES
    elif task == "train":
        spec["loss"] = {"op": "softmax_cross_entropy", "reduction": "mean"}
        spec["optimizer"] = {"op": "sgd", "lr": 0.01, "momentum": 0.9, "nesterov": False}
        spec["profiles"] = {
            "ci": {"batch_size": 32, "epochs": 1, "train_samples": 128, "test_samples": 64},
            "smoke": {"batch_size": 32, "epochs": 1, "train_samples": 1024, "test_samples": 256},
            "full": {"batch_size": 64, "epochs": 10, "train_samples": 50000, "test_samples": 10000},
        }
        spec["tolerances"] = TRAIN_TOLERANCES
    else:
        spec["profiles"] = {
            "ci": {"batch_size": 8, "batches": 2, "warmup_batches": 1},
            "smoke": {"batch_size": 16, "batches": 6, "warmup_batches": 1},
            "full": {"batch_size": 32, "batches": 40, "warmup_batches": 1},
        }
        spec["tolerances"] = TOLERANCES
    return spec


def token_dataset(translation: Any, shape: list[int], task: str) -> dict:
    """The data of a token-id model: IMDB (its synthetic stand-in by default), ids below the
    model's vocabulary, the model's sequence length, pre-padded as the built-in GRU's. A token
    model trains (``--task train`` is implied): the feature runs read generated images."""
    first = translation.layers[0] if translation.layers else {}
    if first.get("op") != "embedding":
        raise RosettaError("a token-id model must begin with an embedding (Gather of a table)")
    if translation.outputs != 2:
        raise RosettaError(
            f"a token-id model is trained on IMDB's 2 classes; this one has "
            f"{translation.outputs} outputs"
        )
    if first["vocab"] < 4:
        raise RosettaError(f"an embedding of {first['vocab']} rows is too small for IMDB's ids")
    return {
        "name": "imdb", "classes": 2, "num_words": first["vocab"], "maxlen": shape[0],
        "start_id": 1, "oov_id": 2, "index_from": 3, "padding": "pre",
    }  # fmt: skip


def weights_bytes(weights: dict[str, np.ndarray]) -> bytes:
    """The weights as ``.npz`` bytes (no pickles), by canonical name."""
    buf = io.BytesIO()
    np.savez(buf, **weights)
    return buf.getvalue()


def spec_text(spec: dict, source: Any, check: Check) -> str:
    """The spec as YAML in the built-in files' style: a header naming the source, one flow
    mapping per layer."""
    head = {k: v for k, v in spec.items() if k not in ("layers", "profiles", "tolerances")}
    tail = {k: spec[k] for k in ("profiles", "tolerances")}
    lines = [
        f"# Imported from an ONNX file by rosetta import (Rosetta {rosetta.__version__}).",
        "# The layers are the file's nodes read into the spec; the weights are the file's",
        "# initializers (weights.file, checked by its sha256). provenance.check_* is the float64",
        "# reference against ONNX Runtime's float32 run of the original file.",
        yaml.safe_dump(head, sort_keys=False, width=100, default_flow_style=None).rstrip(),
        "layers:",
    ]
    for layer in spec["layers"]:
        flow = yaml.safe_dump(layer, default_flow_style=True, sort_keys=False, width=10**6)
        lines.append(f"  - {flow.strip()}")
    lines.append(yaml.safe_dump(tail, sort_keys=False, width=100, default_flow_style=None).rstrip())
    return "\n".join(lines) + "\n"


def provenance(source: Any, check: Check) -> dict:
    """Where the model came from and how well the reference matched it."""
    return {
        "file": "".join(c if c.isprintable() else "?" for c in source.path.name)[:200],
        "sha256": source.sha256,
        "producer": source.producer[:200],
        "producer_version": source.producer_version[:200],
        "opset": source.opset,
        "checked_against": "onnxruntime float32 on the original file",
        "check_max_abs": float(f"{check.max_abs:.3g}"),
        "check_max_rel": float(f"{check.max_rel:.3g}"),
        "check_tolerance": f"rtol {CHECK_RTOL:g} of the largest output, atol {CHECK_ATOL:g}",
        "importer": f"rosetta {rosetta.__version__}",
    }


def check_against_source(source: Any, workload: Any) -> Check:
    """The float64 reference on the imported workload against ONNX Runtime's float32 run of the
    original file, on inputs in [0, 1) from seed 0, or token ids over the vocabulary (2 of them,
    or the file's fixed batch). The session is the onnxruntime backend's (its settings, one
    thread): no framework is imported here."""
    from rosetta.backends import make
    from rosetta.backends.onnxruntime.runtime import session as ort_session
    from rosetta.spec import canonical_weights

    n = source.batch or 2
    rng = np.random.default_rng(0)
    if source.input_dtype == "int32":  # token ids over the whole vocabulary
        vocab = workload.dataset.get("num_words")
        x = rng.integers(0, vocab, (n, *source.input_shape)).astype(source.input_onnx_dtype)
    else:
        x = rng.random((n, *source.input_shape), dtype=np.float32)
    try:
        session = ort_session(source.model.SerializeToString(), threads=1)
    except Exception as exc:  # ORT's own refusal (an invalid graph): one line, its words
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise RosettaError(
            f"{source.path}: ONNX Runtime cannot run the file, so nothing checks the import "
            f"against it ({first})"
        ) from None
    ours = np.asarray(
        make(
            "numpy_ref", workload, canonical_weights(workload, 0, "float64"), dtype="float64"
        ).predict_numpy(x.astype(workload.input.dtype)),
        dtype=np.float64,
    )
    theirs = session.run([source.output_name], {source.input_name: x})[0].astype(np.float64)
    theirs = theirs.reshape(ours.shape)  # the unit axes ONNX keeps after a global pooling
    err = np.abs(ours - theirs)
    scale = float(np.max(np.abs(ours))) or 1.0
    ok = bool(np.all(err <= CHECK_RTOL * scale + CHECK_ATOL))
    return Check(float(err.max()), float(err.max()) / scale, ok)


def write(folder: Path, name: str, text: str, weights: bytes, force: bool) -> tuple[Path, Path]:
    """The weights, then the spec, into ``folder``; neither replaced without ``force``."""
    spec_path, weights_path = folder / f"{name}.yaml", folder / f"{name}.npz"
    check_target(spec_path, "--name", force)
    check_target(weights_path, "--name", force)
    write_user_file(weights_path, weights, "--name", force)
    write_user_file(spec_path, text.encode(), "--name", force)
    return spec_path, weights_path


def sha256(data: bytes) -> str:
    """Hex digest of ``data``."""
    return hashlib.sha256(data).hexdigest()
