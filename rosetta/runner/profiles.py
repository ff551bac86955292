"""Bench profiles: which spec profile each cell runs, the default axes and the rounds.

A workload's YAML holds its *spec profiles* (``ci``, ``smoke``, ``full``): how many samples, epochs
or batches one cell runs. A *bench profile* (what ``rosetta bench --profile`` names) picks one of
them and adds the matrix's defaults: the batch sizes, precisions and thread counts swept, and
how many rounds (``repeat``) every cell runs. ``sweep`` is the only one that is not a spec profile
of the same name: it runs the ``ci`` sample counts over a grid.

Step counts stay in **samples**: a training profile's ``train_samples``/``test_samples`` and
``epochs`` are kept whatever the batch size, so a cell at batch 16 runs 4x the steps of one at 64
over the same data; a feature profile's images (``batches x batch_size`` of the spec) are kept
too, cut into ``images // B`` timed batches (after ``warmup_batches`` untimed ones at batch B).
Every point of a sweep thus does the same work, and the time budget does not depend on the grid's
batch sizes.

Time budgets (2-core machine; figures from a quiet machine, smoke single round 4 min 45 s for
all 15 cells, of which per cell papermill start 0.9-2.3 s and cold start 0.1-5 s):

- ``smoke``: R = 2 rounds. Per cell a fixed cost of about 6 s (papermill ~1.6 s, cold start
  ~2.5 s, data and the gate ~2 s; at worst ~10 s) leaves ~195 s of the 285 s for the timed
  loops (at worst 135 s). The smoke counts were cut where accuracy allows: gru 4096 -> 3072
  train samples (96 steps; the reference still passes ``tests/test_profiles.py``'s > 0.75),
  resnet50 8 -> 6 batches, tests 1024 -> 768; cnn keeps its 2048 (64 steps: at 1536 the
  reference fell to 0.45, below the 0.6 asked). About 0.83 of the timed loops remain, so two
  rounds cost 2 x (15 x 6 + 0.83 x 195) = 504 s (at worst 2 x (150 + 0.83 x 135) = 524 s),
  within 10 minutes. A third round would need 600 / 3 - 90 = 110 s of timed loops (0.56x),
  which the accuracy floors do not allow (gru at a third of its counts: 0.65).
- ``sweep``: ci sample counts, batch 16 and 64, threads 1 and all cores, fp32 and bf16: 8
  points x 15 cells = 120 cells of ~8 s each (6 s fixed, ~2 s timed on ci counts) = 16 minutes
  once bf16 runs; today bf16 is skipped in every backend (no process), so 60 cells ~ 8 minutes.
- ``ci`` and ``full``: R = 1 (ci is a CI check, full the original settings, hours per round).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rosetta.errors import RosettaError
from rosetta.spec.workload import Profile, Workload


@dataclass(frozen=True)
class BenchProfile:
    """What ``rosetta bench --profile NAME`` runs by default."""

    name: str
    spec_profile: str  # the workload YAMLs' profile every cell runs (sample counts)
    repeat: int = 1  # rounds: every cell runs this many times, each in a fresh process
    batch_sizes: tuple[int | None, ...] = (None,)  # None: the spec profile's batch size
    precisions: tuple[str, ...] = ("fp32",)
    threads: tuple[int | None, ...] = (None,)  # None: all usable cores


BENCH_PROFILES: dict[str, BenchProfile] = {
    "ci": BenchProfile("ci", "ci", repeat=1),
    "smoke": BenchProfile("smoke", "smoke", repeat=2),
    "full": BenchProfile("full", "full", repeat=1),
    "sweep": BenchProfile(
        "sweep",
        "ci",
        repeat=1,
        batch_sizes=(16, 64),
        precisions=("fp32", "bf16"),
        threads=(1, None),
    ),  # fmt: skip
}


def bench_profile(name: str) -> BenchProfile:
    """The bench profile ``name``; an unknown one is one line naming the valid ones."""
    if name not in BENCH_PROFILES:
        raise RosettaError(f"unknown profile {name!r}; valid: {', '.join(BENCH_PROFILES)}")
    return BENCH_PROFILES[name]


def feature_images(profile: Profile) -> int:
    """Timed images of a feature profile (``batches x batch_size`` of the spec)."""
    return profile.batches * profile.batch_size


def data_limit(profile: Profile, task: str) -> tuple[int, str]:
    """The largest batch ``profile`` can feed, and what limits it (for the one-line refusal)."""
    if task == "train":
        n = min(profile.train_samples, profile.test_samples)
        return n, f"{profile.train_samples} train / {profile.test_samples} test samples"
    n = feature_images(profile)
    return n, f"{n} images"


def check_batch_size(workload: Workload, profile: Profile, batch: int) -> None:
    """Refuse (one line) a batch the profile's data cannot fill once."""
    limit, what = data_limit(profile, workload.task)
    if batch > limit:
        raise RosettaError(
            f"--batch-sizes {batch}: larger than the data of profile {profile.name!r} for "
            f"{workload.name} ({what}); use at most {limit}"
        )


def effective_profile(profile: Profile, batch_size: int | None, task: str) -> Profile:
    """``profile`` at batch ``batch_size`` (``None``: unchanged), its sample counts kept: a
    training profile keeps samples and epochs (steps = samples // batch), a feature profile
    keeps its images (timed batches = images // batch, at least one)."""
    if batch_size is None or batch_size == profile.batch_size:
        return profile
    if task == "train":
        return replace(profile, batch_size=batch_size)
    return replace(
        profile, batch_size=batch_size, batches=max(1, feature_images(profile) // batch_size)
    )


def batch_flag(spec_batch: int, batch: int, task: str) -> str:
    """The record's flag for training at another batch than the spec's ("" otherwise)."""
    if task != "train" or batch == spec_batch:
        return ""
    return (
        f"batch {batch} \u2260 spec batch {spec_batch}: throughput only, optimiser settings "
        f"unchanged (learning rate and schedule are the spec's, tuned for {spec_batch})"
    )
