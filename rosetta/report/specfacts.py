"""What the report reads from a record's spec: the task, the profile's batch size and the forward
FLOPs per sample (None where the spec, the profile or the shape is unknown to this install)."""

from __future__ import annotations

from functools import lru_cache

from rosetta.errors import RosettaError
from rosetta.spec import get_workload
from rosetta.spec.traffic import step_traffic

TRAIN_FLOP_FACTOR = 3  # training step = forward + backward, backward counted as 2x forward


@lru_cache(maxsize=64)
def spec_facts(workload: str, profile: str, shape: tuple | None) -> tuple:
    """(task, batch size, forward FLOPs per sample) of ``workload`` at ``profile``."""
    try:
        w = get_workload(workload)
    except RosettaError:
        return None, None, None
    try:
        batch = w.profile(profile).batch_size
    except KeyError:
        batch = None
    try:
        flops = w.flops_per_sample(shape) if shape else w.flops_per_sample()
    except Exception:  # noqa: BLE001 - a shape the spec cannot take: no FLOP figure, no crash
        flops = None
    return w.task, batch, flops


def profile_batch(workload: str, profile: str) -> int | None:
    """The batch size the spec's profile uses (None where the spec or profile is unknown)."""
    return spec_facts(str(workload), str(profile), None)[1]


@lru_cache(maxsize=256)
def step_intensity(workload: str, profile: str, batch: int, precision: str) -> float | None:
    """Arithmetic intensity of one step of ``batch`` samples at the profile's input size: spec
    FLOPs (training: 3x forward) over the bytes it must move at least
    (:func:`rosetta.spec.traffic.step_traffic`); None where the spec, profile or precision is
    unknown to this install."""
    try:
        w = get_workload(workload)
        w = w.profile(profile).workload_for(w)
        traffic = step_traffic(w, batch, precision)
    except (RosettaError, KeyError, ValueError):
        return None
    factor = TRAIN_FLOP_FACTOR if w.task == "train" else 1
    return batch * w.flops_per_sample() * factor / traffic.total if traffic.total else None
