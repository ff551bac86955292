"""One scenario of one backend x workload under LoadGen: calibrate, run, search, check.

:func:`serve` is what a serving cell does, in order:

1. **warm** every batch bucket (compiles before any clock);
2. **calibrate** (outside LoadGen, as MLPerf submitters size their settings): the median of 16
   batch-1 predictions (SingleStream's and MultiStream's expected latency) and the throughput
   of 4 max-batch predictions (Offline's expected rate, the top of the Server search);
3. **the performance run**: one LoadGen run of the scenario; for Server, a bounded search of the
   highest target QPS whose run LoadGen reports VALID at the p99 bound: first a SingleStream run
   for the single-stream p99 (a bound below it is refused, one line naming it), then bisection
   on a log scale between 1/64 of the calibrated throughput and all of it,
   ``Budget.server_trials`` trials, every trial's summary kept;
4. **the accuracy run**: LoadGen's accuracy mode (every sample once, through the same batching),
   its log's outputs compared with the float64 reference's for the same samples at the
   workload's float32 forward tolerance: ``accuracy.equivalent`` and the worst violation.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from rosetta.errors import RosettaError
from rosetta.serving import scenarios as sc
from rosetta.serving.summary import read_accuracy, read_summary
from rosetta.serving.sut import Batching, Predictor, SystemUnderTest

SEARCH_SPAN = 64  # the Server search's range: the calibrated top rate down to 1/64 of it


def run_loadgen(predictor: Predictor, scenario: str, settings, folder: Path) -> dict:
    """One LoadGen run; the summary read back, with the sizes of the batches run."""
    import mlperf_loadgen as lg

    folder.mkdir(parents=True, exist_ok=True)
    out = lg.LogOutputSettings()
    out.outdir = str(folder)
    out.copy_summary_to_stdout = False
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    sut = SystemUnderTest(predictor, scenario in ("server", "offline"), len(predictor.x))
    try:
        lg.StartTestWithLogSettings(sut.sut, sut.qsl, settings, log)
    finally:
        sizes = sut.close()
    summary = read_summary(folder)
    summary["batches"] = {str(b): sizes.count(b) for b in sorted(set(sizes))}
    return summary


def calibrate(predictor: Predictor) -> dict:
    """Batch-1 median latency and max-batch throughput, outside LoadGen (module docstring)."""
    one = []
    for i in range(16):
        start = time.perf_counter()
        predictor([i % len(predictor.x)])
        one.append(time.perf_counter() - start)
    b = predictor.batching.max_batch
    start = time.perf_counter()
    for i in range(4):
        predictor([(i * b + j) % len(predictor.x) for j in range(b)])
    rate = 4 * b / (time.perf_counter() - start)
    return {"batch1_median_s": statistics.median(one), "max_batch_samples_per_s": rate}


def server_search(
    predictor: Predictor, budget: sc.Budget, p99_bound_s: float, top_qps: float, folder: Path
) -> dict:
    """The highest target QPS VALID at the p99 bound (module docstring): bisection on a log
    scale between ``top_qps / SEARCH_SPAN`` and ``top_qps``, so 3 trials already reach an eighth
    of the top (a linear bisection stayed above a quarter, where queueing on 2 cores made every
    ``ci`` trial INVALID)."""
    lo, hi = max(top_qps, 1.0) / SEARCH_SPAN, max(top_qps, 1.0)
    best, trials = None, []
    for k in range(budget.server_trials):
        target = (lo * hi) ** 0.5
        settings = sc.settings("server", budget, target_qps=target, p99_bound_s=p99_bound_s)
        s = run_loadgen(predictor, "server", settings, folder / f"trial{k}")
        trials.append({"target_qps": target, **s})
        if s["valid"]:
            lo, best = target, max(best or 0.0, target)
        else:
            hi = target
    return {
        "max_valid_qps": best,
        "trials": trials,
        "span": [max(top_qps, 1.0) / SEARCH_SPAN, max(top_qps, 1.0)],
    }


def check_accuracy(outputs: dict[int, np.ndarray], reference: np.ndarray, tolerance) -> dict:
    """LoadGen's logged outputs against the float64 reference's (rows by sample index)."""
    if not outputs:
        return {"equivalent": False, "samples": 0, "violation": None,
                "why": "LoadGen logged no outputs"}  # fmt: skip
    idx = sorted(outputs)
    ours = np.stack([outputs[i].reshape(reference.shape[1:]) for i in idx]).astype(np.float64)
    violation = float(tolerance.violation(ours, reference[idx]))
    return {"equivalent": bool(violation <= 1.0), "samples": len(idx), "violation": violation}


def serve(
    predict,
    x: np.ndarray,
    reference: np.ndarray,
    tolerance,
    scenario: str,
    budget: sc.Budget,
    batching: Batching | None = None,
    p99_bound_s: float | None = None,
    folder: Path | None = None,
) -> dict:
    """A serving cell's measurements of ``scenario`` (module docstring): ``predict`` is the
    backend's ``predict_numpy``, ``x`` the samples, ``reference`` the float64 outputs of ``x``,
    ``tolerance`` the workload's float32 forward tolerance."""
    if scenario not in sc.SCENARIOS:
        raise RosettaError(
            f"unknown scenario {scenario[:40]!r}; choose from {', '.join(sc.SCENARIOS)}"
        )
    with tempfile.TemporaryDirectory(prefix="rosetta-loadgen-") as tmp:
        root = Path(folder) if folder is not None else Path(tmp)
        batching = batching or Batching()
        predictor = Predictor(predict, x, batching)
        predictor.warm()
        cal = calibrate(predictor)
        record: dict = {"scenario": scenario, "budget": budget.as_record(),
                        "batching": batching.as_record(), "calibration": cal}  # fmt: skip
        expected = cal["batch1_median_s"]
        if scenario == "multi_stream":
            expected *= sc.MULTI_STREAM_SAMPLES / 2  # a batch of 8 costs less than 8 requests
        # Offline: LoadGen issues expected rate x min duration samples; a rate guessed low ends the
        # run before its min duration (INVALID, measured on jax's transformer), so 2x calibrated
        args = {"expected_latency_s": expected, "expected_qps": 2 * cal["max_batch_samples_per_s"]}
        if scenario == "server":
            single = run_loadgen(
                predictor, "single_stream", sc.settings("single_stream", budget, **args),
                root / "single_stream",
            )  # fmt: skip
            p99 = single["percentiles_s"].get("99.00")
            record["single_stream_p99_s"] = p99
            # default: 4x (single-stream p99 + the batcher's wait): a query at low load waits the
            # whole max wait for company (measured: ORT's transformer p50 1.1 ms single-stream,
            # 4.3 ms through a 2 ms batcher at 25 QPS), which 4x the p99 alone did not allow
            wait = batching.max_wait_s
            bound = p99_bound_s if p99_bound_s is not None else 4 * ((p99 or expected) + wait)
            if p99 is not None and bound < p99:
                raise RosettaError(
                    f"--p99-ms {bound * 1e3:g} is below this backend's single-stream p99 of "
                    f"{p99 * 1e3:.3g} ms: no load can meet it; raise the bound"
                )
            record["p99_bound_s"] = bound
            record["p99_bound_from"] = (
                "given" if p99_bound_s is not None else "4 x (single-stream p99 + max wait)"
            )
            record["server"] = server_search(
                predictor, budget, bound, cal["max_batch_samples_per_s"], root / "server"
            )
            perf = None
            # the accuracy run at the rate found (a quarter of the calibrated top if none was)
            rate = record["server"]["max_valid_qps"] or cal["max_batch_samples_per_s"] / 4
            acc_settings = sc.settings(
                "server", budget, target_qps=rate, p99_bound_s=bound, accuracy=True
            )
        else:
            perf = run_loadgen(predictor, scenario, sc.settings(scenario, budget, **args),
                               root / "performance")  # fmt: skip
            acc_settings = sc.settings(scenario, budget, accuracy=True, **args)
        record["performance"] = perf
        acc = run_loadgen(predictor, scenario, acc_settings, root / "accuracy")
        record["accuracy"] = {
            **check_accuracy(read_accuracy(root / "accuracy"), reference, tolerance),
            "batches": acc.get("batches"),
        }
    return record
