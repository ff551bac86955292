"""Serving scenarios under MLPerf's own LoadGen (``rosetta.serving``): real LoadGen runs of a
second or less each, over a small linear model in NumPy (the mechanics: scenarios, batching, the
Server search, the accuracy log read back and checked), then one backend's cell end to end.

The accuracy check's tolerance is the cnn workload's float32 forward bound (what the gate uses
for a float32 backend): the float32 outputs of a float64 matrix product are within it, and a
planted offset of 1e-2 is not.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from rosetta.cli import main
from rosetta.errors import RosettaError
from rosetta.spec import get_workload

lg = pytest.importorskip("mlperf_loadgen")

from rosetta.serving import scenarios as sc  # noqa: E402  (after the skip)
from rosetta.serving.run import serve  # noqa: E402
from rosetta.serving.sut import Batching  # noqa: E402

#: a LoadGen run of at least 0.2 s and 16 queries, at most 2 s; 32 Offline samples; 2 trials
TINY = sc.Budget(200, 16, 2_000, 32, 2)


@pytest.fixture(scope="module")
def linear():
    """32 samples of 12 features, a (12, 3) weight, the float64 outputs, the tolerance."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 12)).astype(np.float32)
    w = rng.standard_normal((12, 3))
    tolerance = get_workload("cnn").tolerances["float32"].forward
    return x, w, x.astype(np.float64) @ w, tolerance


def _predict(w, offset=0.0, seconds=0.0):
    """The model's prediction path; ``seconds`` a batch, as a real model takes (LoadGen's
    Server at the rate of a bare matrix product would issue ~10^5 Python calls a trial)."""
    w32 = w.astype(np.float32)

    def predict(xb):
        if seconds:
            time.sleep(seconds)
        return xb @ w32 + np.float32(offset)

    return predict


@pytest.mark.parametrize("scenario", ["single_stream", "multi_stream", "offline"])
def test_a_scenario_runs_under_loadgen_and_its_accuracy_log_is_checked(linear, scenario):
    x, w, ref, tol = linear
    r = serve(_predict(w), x, ref, tol, scenario, TINY, Batching(4, 0.001))
    perf = r["performance"]
    assert perf["valid"], perf["reasons"]
    assert perf["scenario"] == sc.SCENARIOS[scenario]
    if scenario == "offline":
        assert perf["samples_per_second"] > 0
        assert max(int(b) for b in perf["batches"]) == 4  # the batcher filled its max batch
    else:
        pct = perf["percentiles_s"]
        assert 0 < pct["50.00"] <= pct["90.00"] <= pct["99.00"]
    acc = r["accuracy"]
    assert acc["equivalent"] and acc["samples"] == len(x) and acc["violation"] < 1.0


def test_the_server_search_keeps_every_trial_and_reports_the_highest_valid_rate(linear):
    x, w, ref, tol = linear
    r = serve(_predict(w, seconds=1e-3), x, ref, tol, "server", TINY, Batching(4, 0.001),
              p99_bound_s=0.05)  # fmt: skip
    trials = r["server"]["trials"]
    assert len(trials) == TINY.server_trials
    assert all("valid" in t and t["target_qps"] > 0 for t in trials)
    valid = [t["target_qps"] for t in trials if t["valid"]]
    assert r["server"]["max_valid_qps"] == (max(valid) if valid else None)
    assert r["single_stream_p99_s"] > 0 and r["p99_bound_s"] == 0.05
    assert r["accuracy"]["equivalent"]


def test_a_wrong_output_fails_the_accuracy_check(linear):
    x, w, ref, tol = linear
    r = serve(_predict(w, 1e-2), x, ref, tol, "single_stream", TINY)
    assert not r["accuracy"]["equivalent"] and r["accuracy"]["violation"] > 1.0


def test_a_bound_below_the_single_stream_p99_is_refused_naming_it(linear):
    x, w, ref, tol = linear
    with pytest.raises(RosettaError, match="below this backend's single-stream p99 of"):
        serve(_predict(w), x, ref, tol, "server", TINY, p99_bound_s=1e-9)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--scenarios", "streaming"], "--scenarios: unknown scenario 'streaming'"),
        (["--p99-ms", "0"], "--p99-ms: must be above 0"),
        (["--max-batch", "-2"], "--max-batch: must be above 0"),
    ],
)
def test_bad_serving_options_are_one_line(tmp_path, capsys, argv, words):
    base = ["serve", "--workloads", "cnn", "--backends", "numpy_ref", "--results-dir",
            str(tmp_path)]  # fmt: skip
    assert main(base + argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert words in line
    assert list(tmp_path.iterdir()) == []  # nothing recorded


def test_a_backend_cell_end_to_end_into_a_bench_run_and_its_report(tmp_path, capsys, small_data):
    """``rosetta serve --run`` of the cnn on ONNX Runtime: each scenario a cell in its own process,
    its record in the bench run's ``serving/`` folder, the serving page, and the run's own HTML
    report showing the scenario table; a second serve keeps what is recorded."""
    pytest.importorskip("onnxruntime")
    from report_fixtures import write_run

    from rosetta.report import write_report

    run = write_run(tmp_path, "bench-1", {("cnn", "torch"): dict(status="ok", step=0.1,
                                                                  e2e=60.0, acc=0.7)})  # fmt: skip
    argv = ["serve", "--workloads", "cnn", "--backends", "onnxruntime", "--scenarios",
            "single_stream,offline", "--results-dir", str(tmp_path), "--run", "bench-1",
            "--data-dir", str(small_data)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "onnxruntime  cnn          single_stream" in out and "accuracy equivalent" in out
    record = run / "serving" / "onnxruntime__cnn__single_stream.json"
    r = json.loads(record.read_text())
    assert r["status"] == "ok" and r["performance"]["valid"] and r["accuracy"]["equivalent"]
    assert r["samples"] == 32 and r["request"]["profile"] == "ci" and len(r["load_before"]) == 3
    assert "onnxruntime" in (record.parent / "serving.html").read_text()
    # the float64 reference of the samples: computed by the first cell, read by the second
    offline = json.loads((record.parent / "onnxruntime__cnn__offline.json").read_text())
    assert r["reference_from"] == "computed" and offline["reference_from"].startswith("the run's")
    assert offline["accuracy"]["equivalent"] and offline["performance"]["samples_per_second"] > 0
    # the bench run's report: the scenario table beside the training tables
    page = write_report([run], tmp_path / "report").read_text()
    section = page[page.index('<section id="loadgen">') :]
    section = section[: section.index("</section>")]
    assert "single_stream" in section and "samples/s" in section and "onnxruntime" in section
    assert "accuracy" in section and "equivalent (32 samples" in section
    # a second serve into the run keeps the records (nothing recorded is lost, nothing reruns)
    before = record.read_bytes()
    assert main(argv) == 0
    assert record.read_bytes() == before


def test_serving_into_a_bench_run_that_does_not_exist_is_one_line(tmp_path, capsys):
    argv = ["serve", "--workloads", "cnn", "--backends", "numpy_ref", "--results-dir",
            str(tmp_path), "--run", "no-such-run"]  # fmt: skip
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--run: no bench run 'no-such-run'" in line
    assert list(tmp_path.iterdir()) == []


def test_the_serving_page_escapes_record_text_and_draws_the_server_trials(tmp_path):
    """A record's text is data: a name with markup is shown, escaped; the Server trials become
    the latency-against-load chart; a file that is not a record is named, not fatal."""
    from rosetta.report.loadgen_page import write

    trials = [{"target_qps": q, "valid": ok, "percentiles_s": {"99.00": p}}
              for q, ok, p in ((50.0, True, 0.004), (75.0, False, 0.09))]  # fmt: skip
    server = {"kind": "serving", "status": "ok", "p99_bound_s": 0.01,
              "request": {"backend": "torch", "workload": "<b>w</b>", "scenario": "server"},
              "server": {"max_valid_qps": 50.0, "trials": trials},
              "accuracy": {"equivalent": True, "samples": 32, "violation": 0.1}}  # fmt: skip
    request = {"backend": "jax", "workload": "<b>w</b>", "scenario": "offline"}
    failed = {"kind": "serving", "status": "failed", "error": "<script>alert(1)</script>",
              "request": request}  # fmt: skip
    every = {**server, "request": {**server["request"], "backend": "jax"},
             "server": {"max_valid_qps": 50.0, "trials": trials[:1]}}  # fmt: skip
    (tmp_path / "a.json").write_text(json.dumps(server))
    (tmp_path / "d.json").write_text(json.dumps(every))  # every trial VALID: a floor
    (tmp_path / "b.json").write_text(json.dumps(failed))
    (tmp_path / "c.json").write_text("{not json")
    text = write(tmp_path).read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;b&gt;w&lt;/b&gt;" in text and "<b>w</b>" not in text
    assert "<td>50 QPS at p99 &lt;= 10 ms" in text and "1 of 2 trials VALID" in text
    assert "&gt;= 50 QPS at p99 &lt;= 10 ms" in text and "1 of 1 trials VALID" in text
    assert "<svg" in text and "c.json: not a record (JSONDecodeError)" in text
