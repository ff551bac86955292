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

Time budgets (2-core machine). The first budget was set from a quiet single smoke round of
4 min 45 s for all 15 cells (per cell papermill start 0.9-2.3 s, cold start 0.1-5 s); two rounds
then fitted 10 minutes (2 x (15 x 6 s fixed + 0.83 x 195 s timed) = 504 s, with the cuts below).
Since then each cell gained a float64 gate of its timed program and a 200-request batch-1
latency loop, and the machine measures slower (NumPy sgemm 175-196 GFLOP/s, 230-258 before):

- ``smoke``: R = 2 rounds. Measured quiet (run ``smoke-a``, 2026-11-23): 20 min 53 s. Per round
  ~604 s of cell processes: timed loops 327 s (chainer cnn 78 s and numpy_ref cnn 55 s lead),
  batch-1 latency 75 s, the float64 gate 55 s, cold starts 50 s, kernel start, data and test
  evaluation ~100 s. Latency is now measured in round 0 only (one figure per point; rounds
  measure the step time's spread), which saves ~75 s. Ten minutes for two rounds would leave
  600 - 2 x 205 s fixed - 75 s latency = 115 s for both rounds' timed loops, 0.18x of today's
  327 s each: the cnn would train 11 steps (the reference reaches 0.43 at 48 steps against the
  0.6 ``tests/test_profiles.py`` holds) and a steady median would rest on 10 steps. So ``smoke``
  keeps its accuracy and two rounds: measured back to back, quiet, with latency in round 0
  only: 17 min 13 s (``smoke-b``) and 16 min 32 s (``smoke-c``); one round takes ~10.
  The counts were cut where accuracy allows: gru 4096 -> 3072 train samples (96 steps; the
  reference still passes ``tests/test_profiles.py``'s > 0.75), resnet50 8 -> 6 batches, tests
  1024 -> 768; cnn keeps its 2048 (64 steps: at 1536 the reference fell to 0.45, below 0.6).
- ``sweep``: ci sample counts; batch 16 and 64, each at fp32 and bf16 on all cores, and fp32
  on 1 thread too: each question against the others' default (batch scaling per precision,
  the bf16/fp32 ratio per batch at all cores, thread scaling per batch at fp32). 6 points x 15
  cells = 90 records, of which the 12 bf16 points of numpy_ref and chainer are skipped records
  with their reason (no process): 78 cell processes. The full product (bf16 on 1 thread too:
  96 processes) measured 23 min 12 s quiet (run ``sweep-c``, the gate once per function and
  the data cut cached), over the 20-minute budget; ``--precisions fp32,bf16 --threads 1,all``
  runs it.
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
    #: points of the axes' product this profile leaves out, while no axis is given on the command
    #: line (``rosetta.runner.matrix.skipped``); an axis given runs the whole product
    skip_points: tuple[dict, ...] = ()
    #: rough seconds one cell takes on the 2-core machine (the budgets above / their cells): the
    #: time estimate of the bound on the run's size (``rosetta.runner.plan``), not a promise
    cell_s: float = 30.0


BENCH_PROFILES: dict[str, BenchProfile] = {
    "ci": BenchProfile("ci", "ci", repeat=1, cell_s=12.0),
    "smoke": BenchProfile("smoke", "smoke", repeat=2, cell_s=40.0),
    "full": BenchProfile("full", "full", repeat=1, cell_s=1800.0),
    "sweep": BenchProfile(
        "sweep",
        "ci",
        repeat=1,
        batch_sizes=(16, 64),
        precisions=("fp32", "bf16"),
        threads=(1, None),
        skip_points=({"precision": "bf16", "threads": 1},),  # bf16 at all cores only
        cell_s=15.0,
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
