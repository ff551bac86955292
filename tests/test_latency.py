"""Batch-1 latency and memory per sample: the request loop syncs around every request and keeps
the whole distribution; percentiles agree with an independent computation; a real cell's record
carries ``metrics.latency``, ``metrics.throughput_at_batch`` and ``metrics.memory``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rosetta.backends import make
from rosetta.runner import clock, latency
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig
from rosetta.spec import canonical_weights, get_workload


def test_each_request_is_synchronised_and_only_timed_ones_are_kept(monkeypatch):
    ticks = iter(range(0, 10**12, 1000))  # a fake clock: every read advances 1 us
    monkeypatch.setattr(clock, "now_ns", lambda: next(ticks))
    log: list[str] = []

    def predict(b):
        log.append(f"predict {b}")
        return f"out {b}"

    def sync(v):
        log.append(f"sync {v}")

    raw = latency.request_times(predict, sync, ["a", "b"], latency.LatencyPlan(warmup=2, n=3))
    assert len(raw) == 3 and all(t == pytest.approx(1e-6) for t in raw)
    # warm-up: predict + sync on its output; each timed request: sync first, then predict, sync
    assert log[:4] == ["predict a", "sync out a", "predict b", "sync out b"]
    assert log[4:] == [
        "sync None", "predict a", "sync out a",
        "sync None", "predict b", "sync out b",
        "sync None", "predict a", "sync out a",
    ]  # fmt: skip


def test_percentiles_match_an_independent_sort():
    rng = np.random.default_rng(3)
    raw = list(rng.lognormal(-5, 0.5, size=201))
    got = latency.percentiles(raw)
    s = sorted(raw)  # 201 values: the q-th percentile is exactly the (200 q)-th order statistic
    assert got["p50"] == pytest.approx(s[100])
    assert got["p90"] == pytest.approx(s[180])
    assert got["p99"] == pytest.approx(s[198])
    assert got["min"] == s[0] and got["max"] == s[-1]


def test_plans_per_profile():
    assert latency.LatencyPlan.for_profile("ci") == latency.LatencyPlan(3, 20)
    for name in ("smoke", "full", "sweep"):  # the floor: >= 200 requests after warm-up
        plan = latency.LatencyPlan.for_profile(name)
        assert plan.n >= 200 and plan.warmup > 0


def test_measure_a_real_model_keeps_the_whole_distribution():
    w = get_workload("gru")
    model = make("numpy_ref", w, canonical_weights(w, 0))
    x = np.random.default_rng(0).integers(1, 30000, size=(3, 150)).astype(np.int32)
    got = latency.measure(model, x, latency.LatencyPlan(warmup=1, n=7))
    assert got["batch"] == 1 and got["n"] == 7 and len(got["raw_s"]) == 7
    assert 0 < got["min"] <= got["p50"] <= got["p90"] <= got["p99"] <= got["max"]
    assert got["p50"] == pytest.approx(float(np.median(got["raw_s"])))


def test_memory_per_sample():
    m = latency.memory(64 * 2**20, None, 64)
    assert m["peak_rss_bytes_per_sample"] == 2**20
    assert m["peak_device_bytes"] is None and m["peak_device_bytes_per_sample"] is None
    assert latency.memory(100, 50, 10)["peak_device_bytes_per_sample"] == 5


def _vm_hwm_bytes() -> int:
    """Peak resident set from /proc (an independent source from getrusage)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_a_cell_records_latency_throughput_and_memory(small_data):
    cfg = CellConfig(backend="numpy_ref", workload="gru", profile="ci", data_dir=str(small_data))
    rec = run_cell(cfg)
    m = rec["metrics"]
    lat = m["latency"]
    assert lat["batch"] == 1 and lat["n"] == 20 and len(lat["raw_s"]) == 20
    assert lat["p50"] <= lat["p99"]
    assert m["throughput_at_batch"]["batch"] == 64
    assert m["throughput_at_batch"]["samples_per_s"] == pytest.approx(
        rec["clocks"]["throughput_samples_per_s"]
    )
    mem = m["memory"]
    hwm = _vm_hwm_bytes()  # read after the cell: the peak can only have grown since
    assert 0.5 * hwm < mem["peak_rss_bytes"] <= hwm * 1.01
    assert mem["peak_rss_bytes_per_sample"] == pytest.approx(mem["peak_rss_bytes"] / 64)
    assert mem["peak_device_bytes"] is None  # the CPU reports none


def test_latency_is_measured_once_per_point_in_round_zero(small_data):
    later = run_cell(
        CellConfig(
            backend="numpy_ref", workload="gru", profile="ci", data_dir=str(small_data), round=1
        )  # fmt: skip
    )
    assert later["status"] == "ok" and later["point"]["round"] == 1
    assert "latency" not in later["metrics"] and "throughput_at_batch" not in later["metrics"]
    assert later["metrics"]["memory"]["batch_size"] == 64  # the rest of the record is whole
