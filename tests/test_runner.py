"""The runner: clocks, append-only records, one cell end to end, and a matrix that loses nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rosetta.errors import RosettaError
from rosetta.runner import clock, records
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig
from rosetta.spec import get_workload


def test_summarize_median_interval_and_quartiles():
    times = [1.0, 2.0, 3.0, 4.0, 100.0]
    s = clock.summarize(times)
    assert s.median == 3.0 and s.n == 5
    assert s.ci95_low <= s.median <= s.ci95_high
    assert (s.q25, s.q75) == (2.0, 4.0)
    assert s.mean == pytest.approx(22.0)
    with pytest.raises(ValueError):
        clock.summarize([])


def test_records_are_append_only(tmp_path):
    path = records.record_path(tmp_path, "r1", "numpy_ref", "gru")
    rec = records.make_record(backend="numpy_ref", workload="gru", profile="ci", status="skipped")
    records.write_record(path, rec)
    with pytest.raises(RosettaError, match="append-only"):
        records.write_record(path, {**rec, "status": "failed"})
    assert json.loads(path.read_text())["status"] == "skipped"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    assert records.read_records(path.parent)[0]["schema_version"] == records.SCHEMA_VERSION


def test_gru_cell_end_to_end_on_synthetic_data(small_data):
    rec = run_cell(CellConfig("numpy_ref", "gru", "ci", data_dir=str(small_data)))
    assert rec["status"] == "ok" and rec["equivalence"]["equivalent"]
    c, m = rec["clocks"], rec["metrics"]
    prof = get_workload("gru").profile("ci")
    assert m["steps"] == prof.train_samples // prof.batch_size  # complete batches only
    assert len(c["steady_raw_s"]) == m["steps"] - 1  # the first step belongs to the cold start
    assert c["steady"]["ci95_low"] <= c["steady"]["median"] <= c["steady"]["ci95_high"]
    assert c["cold_start_s"] >= c["import_build_s"] > 0
    assert c["gate_s"] > 0  # the gate's cost is recorded apart from every clock
    assert c["end_to_end_s"] >= sum(c["steady_raw_s"])
    assert m["test_samples"] == prof.test_samples and 0.0 <= m["test_accuracy"] <= 1.0
    man = rec["manifest"]
    assert man["data_source"] == "synthetic" and man["data_checksum"].startswith("sha256:")
    assert rec["profile"] == "ci" and man["numpy"] == np.__version__
    rt = man["runtime"]  # the runtime in effect, stored once (not copied to the top level)
    assert rt["dtype"] == "float32" and rt["precision"] == "fp32" and "dtype" not in man


class _CountingModel:
    """A model whose steps only count: which of them the loop synced and timed."""

    def __init__(self):
        self.steps = 0

    def train_step(self, batch):
        self.steps += 1
        return batch

    def sync(self, value=None):
        return value


@pytest.mark.parametrize("sample_every, n, sampled", [(4, 4, 1), (4, 9, 2), (1, 4, 3), (3, 7, 2)])
def test_a_short_run_samples_a_warm_step_at_any_sample_every(sample_every, n, sampled):
    """The cold first step is kept apart, and sampling starts with the first warm step: on an H200
    the ci profile's 4 steps at sample_every 4 (CUDA's default) sampled none, and the steady
    state fell back to the cold step (jax gru 1.77 s, its compile, against 10 ms warm)."""
    from rosetta.runner.steps import timed_steps

    model = _CountingModel()
    run = timed_steps(model, model.train_step, list(range(n)), sample_every=sample_every,
                      keep_outputs=True)  # fmt: skip
    assert run.first_s is not None and run.steps == n and run.outputs == list(range(n))
    assert len(run.samples) == sampled


@pytest.mark.parametrize(
    ("kwargs", "first", "kept"),
    [
        ({"n": 6, "discard": 2}, True, 3),  # a timing round: cold, 2 dropped, 3 timed
        ({"n": 6, "cold": False}, False, 6),  # nothing kept apart: every step timed
        ({"n": 4, "fetch_in_clock": True}, True, 3),  # the batch taken inside the clock
    ],
)
def test_the_one_timed_loop_keeps_the_cold_step_apart_and_drops_the_warm_up(kwargs, first, kept):
    from rosetta.runner.steps import clocks_of, timed_steps

    model = _CountingModel()
    run = timed_steps(model, model.train_step, iter(range(10)), **kwargs)
    assert (run.first_s is not None) == first and len(run.samples) == kept
    assert run.steps == kwargs["n"] == model.steps and run.last == kwargs["n"] - 1
    clocks = clocks_of(run, batch_size=8)
    assert clocks["steady_raw_s"] == run.samples and clocks["first_step_s"] == run.first_s
