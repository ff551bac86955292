"""The four scenarios, their budgets per profile, and LoadGen's settings for a run of one.

Budgets (``BUDGETS``): ``ci`` a test of the path (0.5 s a run, at most 20 s; a Server search of 3
trials); ``smoke`` about a minute per backend and workload (5 s a run, at most 60 s, Offline at
least 256 samples; 5 trials);
``full`` MLPerf Inference's minimums: 600 s a run and 270,336 queries (Offline 24,576 samples),
8 trials. Whatever the budget, a run asks at least the queries LoadGen's early stopping needs to
accept its percentile (64 for SingleStream's 90th, 700 for the 99th of Server and MultiStream), or
no run could be VALID. Every record states the budget it ran under.
"""

from __future__ import annotations

from dataclasses import dataclass

from rosetta.errors import RosettaError

#: our name -> LoadGen's TestScenario member
SCENARIOS = {
    "single_stream": "SingleStream",
    "multi_stream": "MultiStream",
    "server": "Server",
    "offline": "Offline",
}
MULTI_STREAM_SAMPLES = 8  # samples per MultiStream query (MLPerf's for its vision models)
#: the fewest queries whose 99th percentile LoadGen's early stopping can accept when every query
#: is under the bound (662 in LoadGen 6.0, its summary says); a Server or MultiStream run under
#: the ci and smoke budgets asks at least this many, or no run could be VALID (measured: a
#: SingleStream run of 32 queries is INVALID, "Early stopping satisfied: NO")
P99_MIN_QUERIES = 700
#: the same for SingleStream's 90th percentile (64 in LoadGen 6.0)
P90_MIN_QUERIES = 64


@dataclass(frozen=True)
class Budget:
    """How long and how many queries one LoadGen run lasts at least, and the Server search's
    trials."""

    min_duration_ms: int
    min_query_count: int
    max_duration_ms: int  # 0: none (LoadGen's own stop rules)
    offline_samples: int  # the Offline scenario's samples (one query)
    server_trials: int

    def as_record(self) -> dict:
        return {
            "min_duration_ms": self.min_duration_ms,
            "min_query_count": self.min_query_count,
            "max_duration_ms": self.max_duration_ms,
            "offline_samples": self.offline_samples,
            "server_trials": self.server_trials,
        }


BUDGETS = {
    "ci": Budget(500, 32, 20_000, 64, 3),
    "smoke": Budget(5_000, 256, 60_000, 256, 5),
    "full": Budget(600_000, 270_336, 0, 24_576, 8),
}


def parse_scenarios(text: str) -> tuple[str, ...]:
    """``single_stream,server`` -> the names, checked; a one-line error names the unknown one."""
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    for name in names:
        if name not in SCENARIOS:
            raise RosettaError(
                f"--scenarios: unknown scenario {name[:40]!r}; choose from {', '.join(SCENARIOS)}"
            )
    if not names:
        raise RosettaError(f"--scenarios: name at least one of {', '.join(SCENARIOS)}")
    return names


def budget(profile: str) -> Budget:
    """The budget of ``profile`` (``smoke``'s for a profile without its own)."""
    return BUDGETS.get(profile, BUDGETS["smoke"])


def _room(b: Budget, needed_s: float) -> int:
    """A run's cap: the budget's, or 1.5x the time its minimum queries need at the expected
    rate where that is longer (a cap below it makes every run INVALID: "Min queries satisfied:
    NO", measured on ResNet-50 Server trials at 3-12 QPS under a 20 s cap); 0 (none) stays."""
    if not b.max_duration_ms:
        return 0
    return max(b.max_duration_ms, int(1.5 * needed_s * 1e3))


def settings(
    scenario: str,
    b: Budget,
    *,
    accuracy: bool = False,
    expected_latency_s: float = 1e-3,
    target_qps: float = 0.0,
    p99_bound_s: float = 0.0,
    expected_qps: float = 1.0,
):
    """LoadGen's ``TestSettings`` for one run of ``scenario`` under budget ``b``:
    ``expected_latency_s`` sizes SingleStream's and MultiStream's schedule, ``target_qps`` and
    ``p99_bound_s`` are a Server trial's, ``expected_qps`` the Offline throughput measured
    before (LoadGen issues enough samples to last the minimum duration at that rate, and at
    least the budget's)."""
    import mlperf_loadgen as lg

    if scenario not in SCENARIOS:
        raise RosettaError(
            f"unknown scenario {scenario[:40]!r}; choose from {', '.join(SCENARIOS)}"
        )
    s = lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, SCENARIOS[scenario])
    s.mode = lg.TestMode.AccuracyOnly if accuracy else lg.TestMode.PerformanceOnly
    s.min_duration_ms = b.min_duration_ms
    s.max_duration_ms = b.max_duration_ms
    s.min_query_count = b.min_query_count
    ns = max(int(expected_latency_s * 1e9), 1)
    if scenario == "single_stream":
        s.single_stream_expected_latency_ns = ns
        s.single_stream_target_latency_percentile = 0.9
        s.min_query_count = max(b.min_query_count, P90_MIN_QUERIES)
        s.max_duration_ms = _room(b, s.min_query_count * expected_latency_s)
    elif scenario == "multi_stream":
        s.multi_stream_samples_per_query = MULTI_STREAM_SAMPLES
        s.multi_stream_expected_latency_ns = ns
        s.multi_stream_target_latency_percentile = 0.99
        s.min_query_count = max(b.min_query_count, P99_MIN_QUERIES)
    elif scenario == "server":
        if target_qps <= 0:
            raise RosettaError(f"a Server run needs a target QPS above 0, not {target_qps:g}")
        s.server_target_qps = float(target_qps)
        s.server_target_latency_ns = max(int(p99_bound_s * 1e9), 1)
        s.server_target_latency_percentile = 0.99
        s.min_query_count = max(b.min_query_count, P99_MIN_QUERIES)
        s.max_duration_ms = _room(b, s.min_query_count / target_qps)
    else:  # offline: one query of all its samples
        s.offline_expected_qps = max(float(expected_qps), 1.0)
        s.min_query_count = b.offline_samples
    return s
