"""Conformance by op: every op of the spec in tiny graphs of its own, built from its ``PROBES``.

An op declares its probes where it is registered (``rosetta.spec.ops.Probe``: the case, the op's
YAML fields, the kind of input it reads and of output it gives). :func:`probe_workloads` wraps
each into a complete training workload, through the same loader and checks as a YAML file: an
input of that kind (an image, features, token ids, or an embedded sequence), the op, a head that
fits its output (flatten, or the mean over real tokens, then a dense layer to the classes), the
softmax cross-entropy loss and SGD with momentum. :func:`probe_batch` gives the batch the gate
runs (a token batch always holds a row of padding only: the masked ops' edge case). The
conformance suite runs every probe on every backend against the float64 reference: forward,
loss, every gradient and the parameters after the optimiser's steps. No workload YAML is needed,
so a new op is checked everywhere the moment it is registered.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rosetta.spec import ops
from rosetta.spec.loader import parse_workload
from rosetta.spec.workload import Workload

VOCAB, LENGTH, DIM = 40, 8, 8  # the token probes: 40 ids, 8 positions, 8-wide embeddings
IMAGE = (3, 6, 6)

#: the image datasets' and the token datasets' declarations (the loader checks them as any spec's)
_IMAGE_DATA = {"name": "cifar10", "classes": 10}
_TOKEN_DATA = {
    "name": "imdb", "classes": 2, "num_words": VOCAB, "maxlen": LENGTH, "start_id": 1,
    "oov_id": 2, "index_from": 3, "padding": "pre",
}  # fmt: skip
_DENSE_INIT = {"kernel": "glorot_uniform", "bias": {"dist": "normal", "mean": 0.0, "std": 0.1}}
#: input kind -> (input shape, dtype, dataset, the layers before the op)
INPUTS = {
    "image": (list(IMAGE), "float32", _IMAGE_DATA, []),
    "features": ([3, 2, 2], "float32", _IMAGE_DATA, [{"op": "flatten", "order": "CHW"}]),
    "wide": (
        [3, 2, 2], "float32", _IMAGE_DATA,
        [{"op": "flatten", "order": "CHW"},
         {"op": "dense", "name": "probe_wide", "units": 12, "bias": True,
          "init": {"kernel": {"dist": "normal", "mean": 0.0, "std": 3.0},
                   "bias": {"dist": "normal", "mean": 0.0, "std": 1.0}}}],
    ),
    "image4": (
        list(IMAGE), "float32", _IMAGE_DATA,
        [{"op": "conv2d", "name": "probe_widen", "out_channels": 4, "kernel": [1, 1],
          "stride": [1, 1], "padding": [0, 0, 0, 0], "bias": False,
          "init": {"kernel": "glorot_uniform"}}],
    ),
    "tokens": ([LENGTH], "int32", _TOKEN_DATA, []),
    "sequence": (
        [LENGTH], "int32", _TOKEN_DATA,
        [{"op": "embedding", "name": "probe_embedding", "vocab": VOCAB, "dim": DIM,
          "init": {"table": {"dist": "uniform", "low": -0.5, "high": 0.5}}}],
    ),
}  # fmt: skip
#: output kind -> the layers between the op and the classifier
HEADS = {
    "image": [{"op": "flatten", "order": "CHW"}],
    "vector": [],
    "sequence": [{"op": "masked_mean", "mask": "tokens"}],
}
#: the tolerances every probe states: float64 is the strict comparison (only summation order
#: differs, as every shipped workload's float64 set), float32 the MLP's (tests/workloads/mlp.yaml)
TOLERANCES = {
    "float32": {
        "forward": {"rtol": 1.0e-4, "atol": 1.0e-5},
        "loss": {"rtol": 1.0e-5, "atol": 1.0e-6},
        "grads": {"rtol": 1.0e-2, "atol": 1.0e-7, "scale": "max"},
        "params": {"rtol": 5.0e-2, "atol": 1.0e-8, "scale": "max"},
    },
    "float64": {
        "forward": {"rtol": 1.0e-10, "atol": 1.0e-12},
        "loss": {"rtol": 1.0e-10, "atol": 1.0e-12},
        "grads": {"rtol": 1.0e-8, "atol": 1.0e-11, "scale": "max"},
        "params": {"rtol": 1.0e-8, "atol": 1.0e-13, "scale": "max"},
    },
}


def probe_name(op: str, index: int) -> str:
    """The workload name of ``op``'s probe ``index``, e.g. ``probe_conv2d_1``."""
    return f"probe_{op}_{index}"


def probe_spec(op: str, index: int) -> dict:
    """Probe ``index`` of ``op`` as the mapping a workload YAML file would hold."""
    probe: ops.Probe = ops.OPS[op].PROBES[index]
    if probe.input not in INPUTS or probe.output not in HEADS:
        raise ValueError(
            f"op {op!r} probe {index}: input {probe.input!r} / output {probe.output!r}; valid: "
            f"{', '.join(INPUTS)} / {', '.join(HEADS)}"
        )
    shape, dtype, dataset, before = INPUTS[probe.input]
    classes = dataset["classes"]
    head = {"op": "dense", "name": "probe_head", "units": classes, "bias": True,
            "init": _DENSE_INIT}  # fmt: skip
    return {
        "name": probe_name(op, index),
        "title": f"{op}: {probe.case}",
        "description": f"the conformance probe of {op}: {probe.case}",
        "task": "train",
        "dataset": dict(dataset),
        "input": {"shape": shape, "dtype": dtype},
        "layers": [*_wired(before, op, probe), *HEADS[probe.output], head],
        "loss": {"op": "softmax_cross_entropy", "reduction": "mean"},
        "optimizer": {"op": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": False},
        "profiles": {
            name: {"batch_size": 4, "epochs": 1, "train_samples": 8, "test_samples": 4}
            for name in ("ci", "smoke", "full")
        },
        "tolerances": TOLERANCES,
    }


def _wired(before: list[dict], op: str, probe: ops.Probe) -> list[dict]:
    """The layers up to the op: ``before``, then, for a variadic op, each of its input branches
    reading ``before``'s output (named ``source``) and the op reading the branches' ends."""
    if not probe.inputs:
        return [*before, {"op": op, **probe.fields}]
    layers = [dict(layer) for layer in before]
    source = "input"
    if layers:
        layers[-1]["id"] = source = "source"
    ends = []
    for k, branch in enumerate(probe.inputs):
        if not branch:
            ends.append(source)
            continue
        for j, layer in enumerate(branch):
            layers.append(
                {**layer, **({"inputs": [source]} if j == 0 else {}),
                 **({"id": f"branch{k}"} if j == len(branch) - 1 else {})}
            )  # fmt: skip
        ends.append(f"branch{k}")
    return [*layers, {"op": op, **probe.fields, "inputs": ends}]


def probe_workload(op: str, index: int) -> Workload:
    """Probe ``index`` of ``op`` as a workload, through the loader's parser and checks."""
    name = probe_name(op, index)
    return parse_workload(probe_spec(op, index), Path(f"<probe>/{name}.yaml"))


def probe_workloads() -> list[tuple[str, int, str]]:
    """Every probe of every op of the spec: ``(op, index, case)``, in registry order."""
    return [
        (name, i, p.case)
        for name, cls in ops.OPS.items()
        for i, p in enumerate(getattr(cls, "PROBES", ()))
    ]


def probe_batch(workload: Workload, n: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The gate's batch for a probe: images in [0, 1), or pre-padded token ids of varied lengths
    with the last row padding only; labels below the classes."""
    rng = np.random.default_rng(seed)
    if workload.input.dtype == "int32":
        (t,) = workload.input.shape
        x = np.zeros((n, t), dtype=np.int32)
        for i in range(n - 1):
            length = int(rng.integers(1, t + 1)) if i else t  # the first row has no padding
            x[i, t - length :] = rng.integers(1, VOCAB, size=length)
        # the last row stays 0: padding only (attention attends to nothing, the mean is 0)
    else:
        x = rng.random((n, *workload.input.shape), dtype=np.float32)
    y = rng.integers(0, workload.output_shape[0], size=n).astype(np.int64)
    return x, y
