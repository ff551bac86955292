"""The frame every ``lowering_<backend>`` benchmark shares: lowered / hand-written, side by side.

A backend's module writes one function, ``prepare(name, args) -> Pair``: the lowered model and
the hand-written one built from the same canonical weights, their outputs already checked equal
(else the clocks mean nothing), and the two steps to time. :func:`run` does the rest, the same
way for every backend: the common arguments (``--workloads``, ``--rounds``, ``--threads``,
``--image-size``, ``--no-ceiling``, ``--hand-first``), the steps interleaved after warm-up
(:func:`benchmarks.common.interleaved`), the median ratio lowered / hand-written with its
bootstrap 95% interval (target <= 1.05), the load average before and after each workload, the
spec's GFLOP per step, and, after every timing is done (so it never disturbs one), the measured
compute ceiling (:func:`rosetta.runner.ceiling.measure`) and the fraction of it each side
reached. The record is ``benchmarks/out/lowering_<backend>.json``, with the machine (CPU model,
family, ISA flags) it ran on; ``python -m benchmarks baselines`` gathers those records into the
report's shipped table.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.common import interleaved, random_batch, ratio, report

WORKLOADS = ("cnn", "gru", "resnet50", "transformer")
#: each side's step size: cnn train at 64, gru and transformer train at 64 x 150, resnet50
#: features at 32 images
BATCH = {"cnn": 64, "gru": 64, "resnet50": 32, "transformer": 64}
#: default timed rounds per workload (each round times both sides once)
ROUNDS = {"cnn": 20, "gru": 20, "resnet50": 6, "transformer": 20}


@dataclass(frozen=True)
class Pair:
    """One workload's two steps, already shown to compute the same function.

    ``train``: whether the steps are training steps (the spec's FLOPs x 3) or forward passes;
    ``sync(value)`` blocks on a step's result before the clock is read; ``facts``: what the
    record should say about both sides (programs, settings, threads); ``alternatives``: other
    forms of the lowered step (a fast-path choice's other side, by label), timed in the same
    rounds and reported as ``<label> / lowered``; ``after()``, called once the rounds are done,
    returns more facts (e.g. compile counters) and raises where the timing is void (a steady
    state that recompiled)."""

    lowered: Callable[[], object]
    handwritten: Callable[[], object]
    train: bool
    batch: int
    sync: Callable[[object], object] = lambda v: None
    facts: dict = field(default_factory=dict)
    alternatives: dict[str, Callable[[], object]] = field(default_factory=dict)
    after: Callable[[], dict] = dict


def load_avg() -> list[float]:
    """The 1/5/15-minute load averages, rounded."""
    return [round(v, 2) for v in os.getloadavg()]


def workload_batch(name: str, image_size: int = 224, seed: int = 0):
    """The workload (ResNet-50 at ``image_size``) and one batch of :data:`BATCH` size: images in
    the runner's feature form for resnet50, random inputs and labels otherwise."""
    from rosetta.runner.data import feature_images
    from rosetta.spec import get_workload

    w = get_workload(name)
    if name == "resnet50" and image_size != 224:
        w = w.at_image_size(image_size)
    x, y = random_batch(w, BATCH[name], seed)
    if name == "resnet50":
        x = feature_images(w, 0, BATCH[name])
    return w, x, y


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4) -> None:
    """The float32 check every benchmark makes before timing: ``rtol`` relative, and an absolute
    floor of ``rtol / 10`` of the largest output (a near-zero logit is not judged relatively)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 0.1 * np.abs(want).max())


def machine() -> dict:
    """The CPU the figures were taken on: model, family, ISA flags, usable cores."""
    from rosetta.runner.manifest import cpu_family, cpu_model
    from rosetta.runner.peak import ISA_FLAGS, cpu_flags

    try:
        flags = cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        flags = set()
    fam = cpu_family() or {}  # {"family": 25, "model": 17, ...}: the family as the reports key it
    return {"cpu": cpu_model(), "family": fam.get("family"), "model": fam.get("model"),
            "isa": sorted(flags & ISA_FLAGS), "cores": len(os.sched_getaffinity(0))}  # fmt: skip


def run(
    backend: str,
    prepare: Callable[[str, argparse.Namespace], Pair],
    argv: list[str],
    *,
    setup: Callable[[argparse.Namespace], dict] | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
    workloads: tuple[str, ...] = WORKLOADS,
) -> int:
    """Parse the common arguments (plus ``options``' own), call ``setup(args)`` once (threads
    before the framework starts; it returns facts for the record), time each workload's
    :class:`Pair` and write ``out/lowering_<backend>.json``."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks lowering_{backend}")
    p.add_argument("--workloads", default=",".join(workloads))
    p.add_argument("--rounds", type=int, default=0, help="timed rounds (default: per workload)")
    p.add_argument("--threads", type=int, default=0, help="threads (default: all usable cores)")
    p.add_argument("--image-size", type=int, default=224, help="resnet50 input size")
    p.add_argument("--no-ceiling", action="store_true", help="skip the ceiling measurement")
    p.add_argument("--hand-first", action="store_true", help="time hand-written first per round")
    if options:
        options(p)
    args = p.parse_args(argv)
    unknown = [n for n in args.workloads.split(",") if n not in workloads]
    if unknown:
        p.error(f"--workloads: unknown {unknown}; choose from {', '.join(workloads)}")
    notes: dict = {"backend": backend, "machine": machine(), **(setup(args) if setup else {})}
    notes["order"] = "handwritten first" if args.hand_first else "lowered first"
    rows, extra_rows, flops = [], [], {}
    for name in args.workloads.split(","):
        pair = prepare(name, args)
        before = load_avg()
        steps = {"lowered": pair.lowered, "handwritten": pair.handwritten, **pair.alternatives}
        if args.hand_first:  # the order within a round, to rule out a first-mover effect
            steps = {"handwritten": steps.pop("handwritten"), **steps}
        times = interleaved(steps, rounds=args.rounds or ROUNDS[name], warmup=2, sync=pair.sync)
        row = ratio(f"{name} lowered/handwritten", times["lowered"], times["handwritten"])
        others = [
            ratio(f"{name} {k}/lowered", times[k], times["lowered"]) for k in pair.alternatives
        ]
        for r in (row, *others):
            print(r.line(), flush=True)
        rows.append(row)
        extra_rows.extend(others)
        w, _, _ = workload_batch(name, args.image_size)
        flops[name] = w.flops_per_sample() * pair.batch * (3 if pair.train else 1) / 1e9
        notes[name] = {
            **pair.facts,
            "batch": pair.batch,
            "step": "train" if pair.train else "forward",
            "image_size": args.image_size if name == "resnet50" else None,
            "load_before": before,
            "load_after": load_avg(),
            "gflop_per_step": flops[name],
            "lowered_s": times["lowered"],
            "handwritten_s": times["handwritten"],
            **{f"{k}_s": times[k] for k in pair.alternatives},
            **pair.after(),
        }
    if not args.no_ceiling:
        _fractions(notes, rows, flops, args.threads or len(os.sched_getaffinity(0)))
    report(f"lowering_{backend}", rows + extra_rows, notes)
    return 0


def _fractions(notes: dict, rows: list, flops: dict[str, float], threads: int) -> None:
    """Each side's fraction of the measured fp32 ceiling (spec FLOPs / median time / ceiling)."""
    from rosetta.runner import ceiling

    ceil = ceiling.measure(threads)
    gflops = (ceil.get("fp32") or {}).get("gflops") if isinstance(ceil.get("fp32"), dict) else None
    notes["ceiling"] = {"fp32_gflops": gflops, "method": ceil.get("method"), "threads": threads}
    if not gflops:
        return
    for row, name in zip(rows, flops, strict=True):
        notes[name]["of_ceiling_lowered"] = flops[name] / row.median_a / gflops
        notes[name]["of_ceiling_handwritten"] = flops[name] / row.median_b / gflops
