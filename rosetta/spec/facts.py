"""What a record states of the spec it ran: the facts the report shows, computed once, when the
cell runs, from the spec as it was then (a later edit of the YAML never changes an old run's
figures)."""

from __future__ import annotations

from rosetta.spec.traffic import step_traffic
from rosetta.spec.workload import Workload

TRAIN_FLOP_FACTOR = 3  # a training step = forward + backward, the backward counted as 2x forward


def spec_facts(workload: Workload, profile_batch: int, batch: int, precision: str) -> dict:
    """The record's ``spec``: ``workload`` (at the input size it ran) at ``batch`` samples a
    step in ``precision``: its task, the spec profile's batch size, the input shape, the forward
    FLOPs per sample and per step (training: 3x forward), the bytes one step must move at least
    (``rosetta.spec.traffic``; None for a precision it does not know), the parameter count and,
    for an imported model, its provenance."""
    factor = TRAIN_FLOP_FACTOR if workload.task == "train" else 1
    flops = workload.flops_per_sample()
    try:
        step_bytes = step_traffic(workload, batch, precision).total
    except ValueError:
        step_bytes = None
    return {
        "task": workload.task,
        "profile_batch": profile_batch,
        "batch_size": batch,
        "input_shape": list(workload.input.shape),
        "flops_per_sample": flops,
        "flops_per_step": batch * flops * factor,
        "bytes_per_step": step_bytes,
        "num_params": workload.num_params,
        # an imported model's origin: its file, sha256, producer, opset and the reference's
        # error against ONNX Runtime on it (``rosetta import``); absent for a written spec
        **({"provenance": dict(workload.provenance)} if workload.provenance else {}),
    }
