"""A rerun's interval (rosetta.report.rerun): the machine's run-to-run spread, estimated from
pairs of runs, read from the shipped file as data, and shown in the report beside each cell."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rosetta.report import references, rerun

MACHINE = {
    "cpu": "Test CPU 9000",
    "isa": ["avx2", "fma"],
    "family": 25,
    "flop_per_cycle_fp32": 16.2,
}


def _file(tmp_path, between_runs, machine=MACHINE):
    path = (
        tmp_path / f"ref{len(list(tmp_path.glob('ref*.json')))}.json"
    )  # a new file: cached by path
    entry = {**machine, "run": {"placeholder": False}, "fractions": []}
    if between_runs is not None:
        entry["between_runs"] = between_runs
    path.write_text(json.dumps({"schema": references.SCHEMA, "machines": [entry]}))
    return path


def test_the_run_to_run_spread_is_worked_by_hand():
    """Two cells of one pair, two rounds a side. Cell 1: logs A 0, 0.2 and B 0.1, 0.3: d = 0.1,
    pooled variance 0.02, term 0.01 - 0.02 (1/2 + 1/2) = -0.01. Cell 2: A 0, 0 and B 0.4, 0.4:
    d = 0.4, term 0.16. sd^2 = mean(-0.01, 0.16) / 2 = 0.0375: sd 0.19365."""
    e = np.exp
    cells = [(e([0.0, 0.2]), e([0.1, 0.3])), (e([0.0, 0.0]), e([0.4, 0.4]))]
    assert rerun.between_run_sd([cells]) == pytest.approx(math.sqrt(0.0375), rel=1e-12)
    assert rerun.between_run_sd([cells[:1]]) == 0.0  # round noise explains it all: clamped
    with pytest.raises(ValueError, match="at least 2 rounds"):
        rerun.between_run_sd([[(e([0.0]), e([0.1, 0.2]))]])


def test_the_run_to_run_spread_recovers_a_planted_one():
    """400 cells of one pair, 5 rounds a side, rounds' sd 0.08 and a planted run-to-run sd of
    0.05: the estimate is within 0.01 of it (its sd by simulation of this design: ~0.003)."""
    rng = np.random.default_rng(3)
    run = rng.normal(0.0, 0.05, (2, 400, 1))
    m = np.exp(run + rng.normal(0.0, 0.08, (2, 400, 5)))
    assert rerun.between_run_sd([list(zip(m[0], m[1], strict=True))]) == pytest.approx(
        0.05, abs=0.01
    )


def test_the_spread_is_read_for_its_machine_only(tmp_path):
    path = _file(tmp_path, {"sd_log": 0.04, "cells": 15, "pairs": [["a", "b"]], "note": "x"})
    spread, problems = rerun.spread_for(MACHINE, path)
    assert (spread.sd_log, spread.cells, spread.pairs, problems) == (0.04, 15, (("a", "b"),), [])
    assert "from 1 pair of runs (15 cells) on Test CPU 9000 family 25 (fma)" in spread.text()
    # issue 50 item 6: a busy run of the same machine measures another FLOP per cycle (a busy
    # Zen 4 read 74-87) and is still that machine; another family under the same name is not
    busy = {**MACHINE, "flop_per_cycle_fp32": 80.0}
    assert rerun.spread_for(busy, path)[0] == spread
    other = {**MACHINE, "family": 26}  # another generation under the same name and ISA
    assert rerun.spread_for(other, path) == (None, [])
    legacy = {k: v for k, v in MACHINE.items() if k != "family"}  # a run that records none
    assert rerun.spread_for(legacy, path)[0] == spread  # unambiguous: one entry of its kind
    assert rerun.spread_for(MACHINE, _file(tmp_path, None)) == (None, [])


@pytest.mark.parametrize(
    "bad",
    [
        {"sd_log": -0.1, "cells": 15, "pairs": [["a", "b"]]},
        {"sd_log": "0.04", "cells": 15, "pairs": [["a", "b"]]},
        {"sd_log": 0.04, "cells": 0, "pairs": [["a", "b"]]},
        {"sd_log": 0.04, "cells": 15, "pairs": [["a"]]},
        {"sd_log": 0.04, "cells": 15, "pairs": []},
        "0.04",
    ],
)
def test_a_malformed_spread_is_left_out_with_one_line(tmp_path, bad):
    spread, problems = rerun.spread_for(MACHINE, _file(tmp_path, bad))
    assert spread is None
    assert problems == [
        "Test CPU 9000 family 25 (fma): its between_runs entry is malformed; left out"
    ]


def test_the_report_gives_a_reruns_interval_only_where_the_machine_has_a_spread(
    tmp_path, monkeypatch
):
    """The fixture run's machine (Test CPU 9000, no peaks recorded) has no shipped spread: a
    dash and the line saying why. Given one, each cell's interval is ``rerun_interval`` of its
    round medians with that spread, wider than the run's own."""
    from report_fixtures import write_timing_run

    from rosetta.report import load_tables, sections
    from rosetta.report.stats import rerun_interval

    run = write_timing_run(tmp_path, "ta")
    t = load_tables([run])
    assert {r["rerun_ms"] for r in sections.ratio_rows(t)} == {"-"}
    (line,) = sections.rerun_lines(t)
    assert line.startswith("ta: no rerun interval (none is shipped for this machine)")
    machine = {"cpu": "Test CPU 9000", "isa": [], "flop_per_cycle_fp32": None}
    path = _file(tmp_path, {"sd_log": 0.05, "cells": 15, "pairs": [["a", "b"]]}, machine)
    monkeypatch.setattr(references, "DATA", path)
    t = load_tables([run])
    g = t.groups[t.groups["backend"] == "torch"].iloc[0]
    lo, hi = rerun_interval(g["round_medians"], None, 0.05)
    assert (g["rerun_low"], g["rerun_high"]) == (lo, hi)
    assert lo < g["steady_low"] and hi > g["steady_high"]
    assert sections.rerun_lines(t) == [
        "ta: a rerun's interval uses the run-to-run spread sd 0.050 of log step time, from 1 pair "
        "of runs (15 cells) on Test CPU 9000."
    ]
