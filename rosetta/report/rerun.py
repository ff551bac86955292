"""A rerun's interval: where **another run** of a cell would put its median step time.

A run's own interval (:func:`rosetta.report.stats.estimate`) is for the mean over *its*
processes: the rounds share the run's stretch of the machine's time, so it cannot see how the
machine itself moves between runs (another tenant of the host, its memory bandwidth, its clock).
That movement is a property of the machine, measured here from pairs of runs made back to back
(:func:`between_run_sd`) and shipped beside the reference fractions: each machine entry of
``reference_fractions.json`` may carry ``between_runs`` = ``{"sd_log": s, "pairs": [[A, B],
...], "cells": n, "note": ...}`` (refreshed by ``python -m benchmarks interval_coverage A B
--write``). A run on a machine with such an entry gets, per cell, the interval of
:func:`rosetta.report.stats.rerun_interval` with that spread; a machine without one gets none
(the report says so), never a guess.

The file is data: a malformed ``between_runs`` is left out with a problem line, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rosetta.report import references


@dataclass(frozen=True)
class Spread:
    """One machine's run-to-run spread of log step time, and where it was measured."""

    sd_log: float
    machine: str  # references.machine_name of the entry
    pairs: tuple[tuple[str, str], ...]  # the run pairs it was measured from
    cells: int  # the cells those pairs shared

    def text(self) -> str:
        """``"sd 0.033 of log step time, from 1 pair of runs (15 cells) on AMD EPYC (...)"``."""
        n = len(self.pairs)
        return (
            f"sd {self.sd_log:.3f} of log step time, from {n} pair{'s' * (n != 1)} of runs "
            f"({self.cells} cells) on {self.machine}"
        )


def between_run_sd(pairs: Sequence[Sequence[tuple[Sequence[float], Sequence[float]]]]) -> float:
    """The run-to-run sd of log step time from pairs of runs: for each pair, each shared cell's
    (A's round medians, B's round medians), each side >= 2 rounds.

    For one cell, the difference ``d`` of the two runs' mean log medians has variance
    ``s^2 (1/R_A + 1/R_B) + 2 sd_b^2`` (round noise of both runs, run effect of both); the
    method of moments pools every cell of every pair: ``sd_b^2 = mean(d^2 - s_p^2 (1/R_A +
    1/R_B)) / 2``, with ``s_p^2`` the cell's pooled round variance, clamped at 0. A common shift
    of the whole machine between the runs is part of ``d``, so it is part of the spread."""
    terms = []
    for cells in pairs:
        for a, b in cells:
            la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
            if la.size < 2 or lb.size < 2:
                raise ValueError("each run of a pair needs at least 2 rounds of the cell")
            d = float(lb.mean() - la.mean())
            dof = la.size + lb.size - 2
            sp2 = (
                float(la.var(ddof=1)) * (la.size - 1) + float(lb.var(ddof=1)) * (lb.size - 1)
            ) / dof
            terms.append(d * d - sp2 * (1 / la.size + 1 / lb.size))
    if not terms:
        raise ValueError("no cell shared by a pair of runs")
    return math.sqrt(max(float(np.mean(terms)) / 2, 0.0))


def spread_for(machine: dict, path: Path | None = None) -> tuple[Spread | None, list[str]]:
    """The spread of the shipped entry of ``machine``'s kind (``references.same_kind``: CPU model
    name, family, wide ISA flags; never the measured FLOP per cycle), or None; and the problems
    met. A spread measured on another kind of machine does not apply."""
    if not references.machine_name(machine):
        return None, []
    doc, problems = references.document(path or references.DATA)
    entries = [m for m in doc.get("machines", []) if isinstance(m, dict)] if isinstance(
        doc.get("machines"), list) else []  # fmt: skip
    for m in entries:
        if not references.same_kind(machine, m, entries) or "between_runs" not in m:
            continue
        name = references.machine_name(m)
        spread = _spread(m["between_runs"], name)
        if spread is None:
            return None, [*problems, f"{name}: its between_runs entry is malformed; left out"]
        return spread, list(problems)
    return None, list(problems)


def _spread(e: object, name: str) -> Spread | None:
    if not isinstance(e, dict):
        return None
    sd, cells, pairs = e.get("sd_log"), e.get("cells"), e.get("pairs")
    if not (isinstance(sd, int | float) and not isinstance(sd, bool) and 0 <= sd < 1):
        return None
    if not (isinstance(cells, int) and not isinstance(cells, bool) and cells > 0):
        return None
    if not (isinstance(pairs, list) and pairs):
        return None
    ok = []
    for p in pairs:
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            return None
        ok.append((references._text(p[0]), references._text(p[1])))
    return Spread(float(sd), name, tuple(ok), cells)


def run_spread(run, path: Path | None = None) -> tuple[Spread | None, list[str]]:
    """The shipped spread of the machine a run (:class:`rosetta.report.load.Run`) ran on."""
    return spread_for(references.run_machine(run), path)
