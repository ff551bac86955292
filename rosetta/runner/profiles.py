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

Time budgets (2-core machine), estimated from recorded figures, not timed anew:

- Per-step times of the smoke cells (quiet, this VM, runs ``smoke-b``/``smoke-c`` of issue 22's
  closing note): the timed loops sum to 327 s a round (cnn 64 steps: chainer 72-78 s, numpy_ref
  55 s; tensorflow fastest with numpy_ref 3.6x, jax 2.3x, chainer 5.9x of it), which with the
  recorded ratios gives the five backends' steps together: cnn ~3.1 s, gru ~0.9 s (96 steps;
  numpy_ref 103-131 ms), resnet50 at 112 px ~7.7 s (7 batches). One step of every smoke cell:
  ~11.7 s.
- Fixed cost of a timing round's process: its cold start (import, build, first step) 3.3 s on
  average (50 s over the 15 smoke cells), plus ~1 s of interpreter, package import, data from the
  run's cache and the record (a papermill kernel would add 2.6 s: 247 s over the sweep's 96
  processes). ~4.3 s a cell, 65 s a round of 15 cells.
- ``smoke``: 1 training run + 5 timing rounds (``repeat = 6``), timing rounds of 1 warm-up and
  3 timed steps. **Measured** (issue 32, runs ``s40-smoke-A``/``-B`` back to back, quiet, Zen 4,
  5 backends x cnn/gru/resnet50): 19 min 32 s and 18 min 49 s; four more in stop 42 (two
  pairs, each back to back): 18 min 14 s, 17 min 25 s, 15 min 48 s, 16 min 19 s. Of A's 1172 s,
  the training runs' cells took 503 s (their timed epochs 280 s, held by the accuracy the
  profile must reach:
  cnn 64 steps for > 0.6, gru 96 for > 0.75, ``tests/test_profiles.py``; the gate 63 s), each
  timing round 100-108 s (the cells' cold starts, import + build + first step, 62-66 s of it,
  the timed steps 23-26 s), and the rest (~150 s) the 90 processes' interpreters, the machine's
  probes and the report. The 10 minutes the issue asked are out of reach here: the training
  runs alone take ~8.5 min, and five rounds of 15 fresh processes ~5 min of cold starts
  whatever their step counts. Three timed steps per round suffice for the interval: it is taken
  over the rounds' medians, whose spread it measures.
- Before rounds were split (issue 22) smoke ran every cell twice in full: 17 min 13 s and
  16 min 32 s measured back to back, quiet; the counts were cut where accuracy allows (gru
  4096 -> 3072 train samples, resnet50 8 -> 6 batches, tests 1024 -> 768).
- ``sweep``: ci sample counts; batch 16 and 64, each at fp32 and bf16 on all cores, and fp32
  on 1 thread too: each question against the others' default (batch scaling per precision,
  the bf16/fp32 ratio per batch at all cores, thread scaling per batch at fp32). 6 points x 15
  cells = 90 records, of which the 12 bf16 points of numpy_ref and chainer are skipped records
  with their reason (no process): 78 cell processes. The full product (bf16 on 1 thread too:
  96 processes) measured 23 min 12 s quiet (run ``sweep-c``), over the 20-minute budget. One
  round: its verdicts say "too few rounds for an interval"; ``--repeat 3`` adds two timing
  rounds (~78 x 2 x 5 s: ~13 min more).
- ``ci``: the training run only (a CI check); ``full``: the original settings, hours for the
  training run, then 5 timing rounds of 10 steps (ResNet-50 at 224: 2.6-11 s a batch, so about
  an hour of rounds).
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
