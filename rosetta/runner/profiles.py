"""Bench profiles: which spec profile each cell runs, the default axes and the rounds.

A workload's YAML holds its *spec profiles* (``ci``, ``smoke``, ``full``): how many samples, epochs
or batches one cell runs. A *bench profile* (what ``rosetta bench --profile`` names) picks one of
them and adds the matrix's defaults: the batch sizes, precisions and thread counts swept, how
many rounds (``repeat``) every cell runs and how long a timing round is. ``sweep`` is the only one
that is not a spec profile of the same name: it runs the ``ci`` sample counts over a grid.

Step counts stay in **samples**: a training profile's ``train_samples``/``test_samples`` and
``epochs`` are kept whatever the batch size, so a cell at batch 16 runs 4x the steps of one at 64
over the same data; a feature profile's images (``batches x batch_size`` of the spec) are kept
too, cut into ``images // B`` timed batches (after ``warmup_batches`` untimed ones at batch B).
Every point of a sweep thus does the same work, and the time budget does not depend on the grid's
batch sizes.

Rounds (issue 32): round 0 of every cell is its **training run** (all the profile's epochs or
batches: training time, accuracy, loss curve, latency, the gate once per function); rounds 1 to
``repeat - 1`` are **timing rounds**, each a fresh process (always ``python -m
rosetta.runner.cell``, no notebook) that imports, builds, takes one cold step, ``timing_warmup``
untimed steps and ``timing_steps`` timed ones. The report's intervals and verdicts come from the
timing rounds (Student's t over processes, ``rosetta.report.stats``).

The rough seconds per training run and per timing round (``cell_s``, ``timing_cell_s``) give the
plan's estimate (``rosetta bench --dry-run`` and the start line); the measurements behind them
and each profile's budget are in ``METHODOLOGY.md`` ("Profile budgets"), with their dates and
machines.
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
    repeat: int = 1  # rounds, each a fresh process per cell: the training run + repeat-1 timing
    batch_sizes: tuple[int | None, ...] = (None,)  # None: the spec profile's batch size
    precisions: tuple[str, ...] = ("fp32",)
    threads: tuple[int | None, ...] = (None,)  # None: all usable cores
    #: points of the axes' product this profile leaves out, while no axis is given on the command
    #: line (``rosetta.runner.matrix.skipped``); an axis given runs the whole product
    skip_points: tuple[dict, ...] = ()
    #: rough seconds one training run takes on the 2-core machine (the budgets above / their
    #: cells): the time estimate of the bound on the run's size (``rosetta.runner.plan``)
    cell_s: float = 30.0
    timing_warmup: int = 1  # a timing round: untimed steps after its first (cold) one
    timing_steps: int = 3  # a timing round: timed steps
    timing_cell_s: float = 8.0  # rough seconds one timing round of one cell takes (as cell_s)

    @property
    def timing_rounds(self) -> int:
        """The timing rounds of ``repeat`` (round 0 is the training run)."""
        return max(self.repeat - 1, 0)


BENCH_PROFILES: dict[str, BenchProfile] = {
    "ci": BenchProfile("ci", "ci", repeat=1, cell_s=12.0, timing_cell_s=5.0),
    "smoke": BenchProfile("smoke", "smoke", repeat=6, cell_s=40.0, timing_cell_s=8.0),
    "full": BenchProfile(
        "full",
        "full",
        repeat=6,
        cell_s=1800.0,
        timing_warmup=2,
        timing_steps=10,
        timing_cell_s=60.0,
    ),  # fmt: skip
    "sweep": BenchProfile(
        "sweep",
        "ci",
        repeat=1,
        batch_sizes=(16, 64),
        precisions=("fp32", "bf16"),
        threads=(1, None),
        skip_points=({"precision": "bf16", "threads": 1},),  # bf16 at all cores only
        cell_s=15.0,
        timing_cell_s=5.0,
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
