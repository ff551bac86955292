"""The report's statistics on planted data: rounds, paired ratios, the verdict rule, noise.

Each test plants a known effect (a uniform machine drift, rounds that disagree, a known ratio
under a known spread between processes, one slow step, bimodal steps) and asserts what the
statistics must make of it, against an independent answer where there is one (SciPy's t
quantiles; the planted ratio of a simulation and how often the interval covers it)."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta.report import stats
from rosetta.runner.cell import noise_flag
from rosetta.runner.clock import summarize

STEPS = 60


def steps(median: float, *, seed: int, sigma: float = 0.01, n: int = STEPS) -> np.ndarray:
    """``n`` log-normal step times whose median is exactly ``median``."""
    t = np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))
    return median * t / np.median(t)


def rounds(medians: list[float], *, seed: int, sigma: float = 0.01) -> dict[int, np.ndarray]:
    return {k: steps(m, seed=seed + k, sigma=sigma) for k, m in enumerate(medians)}


def est(r: dict[int, np.ndarray]) -> stats.Estimate:
    e = stats.estimate(r)
    assert e is not None
    return e


# -- a cell across rounds ----------------------------------------------------------------------
def test_one_round_is_the_within_process_bootstrap():
    r = rounds([1.0], seed=1)
    e = est(r)
    s = summarize(list(r[0]))  # the runner's own interval: the same bootstrap, same seed
    assert e.method == stats.ONE_PROCESS and e.rounds == 1
    assert (e.median, e.low, e.high) == pytest.approx((s.median, s.ci95_low, s.ci95_high))


def test_rounds_that_disagree_widen_the_interval():
    agree = est(rounds([1.0, 1.01, 0.99, 1.0], seed=10))
    disagree = est(rounds([0.9, 1.0, 1.1, 1.0], seed=10))  # same steps, rounds shifted
    assert agree.method == disagree.method == stats.ROUNDS
    w_agree, w_disagree = agree.high - agree.low, disagree.high - disagree.low
    assert w_agree < 0.03  # rounds within 1% of each other
    # the process-to-process spread of +-10% must show: the interval reaches past 0.95 and 1.05
    assert disagree.low < 0.95 and disagree.high > 1.05 and w_disagree > 5 * w_agree
    assert disagree.round_medians == pytest.approx((0.9, 1.0, 1.1, 1.0))


def test_cross_round_interval_is_students_t_on_the_log_round_medians():
    """An independent computation: SciPy's t quantile over the logs of the round medians."""
    st = pytest.importorskip("scipy.stats")
    meds = [0.95, 1.02, 1.0, 1.07, 0.98]
    e = est(rounds(meds, seed=20, sigma=0.03))
    x = np.log(meds)
    half = st.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    assert e.method == stats.ROUNDS and e.median == pytest.approx(1.0)
    assert (e.low, e.high) == pytest.approx(np.exp([x.mean() - half, x.mean() + half]), rel=1e-4)


def test_t_quantiles_agree_with_an_independent_computation():
    st = pytest.importorskip("scipy.stats")
    for df in [1, 2, 3, 4, 5, 9, 29, 30, 31, 45, 200, 5000]:
        assert stats.t975(df) == pytest.approx(st.t.ppf(0.975, df), abs=2e-4)
    with pytest.raises(ValueError):
        stats.t975(0)


def test_rounds_without_raw_steps_use_their_recorded_medians():
    e = stats.estimate({}, {0: (1.0, 0.97, 1.03), 1: (1.2, 1.15, 1.25)})
    assert e.method == stats.ROUNDS and e.median == pytest.approx(1.1)
    assert e.low < 1.0 and e.high > 1.2  # two processes 20% apart: a wide interval (df = 1)
    one = stats.estimate({}, {0: (1.0, 0.97, 1.03)})
    assert one.method == stats.FROM_INTERVALS
    assert (one.median, one.low, one.high) == pytest.approx((1.0, 0.97, 1.03))
    assert stats.estimate({}, {0: (0.0, 0.0, 0.0)}) is None


# -- paired ratios -----------------------------------------------------------------------------
def test_uniform_shift_between_rounds_leaves_the_paired_ratio_unchanged():
    drift = [1.0, 1.18, 0.92, 1.08]  # the machine's state per round, hitting both alike
    own = [1.0, 1.01, 0.995, 1.005]  # a's own process-to-process spread
    a = {k: steps(1.2 * o, seed=k) * d for k, (o, d) in enumerate(zip(own, drift, strict=True))}
    b = {k: steps(1.0, seed=50 + k) * d for k, d in enumerate(drift)}
    a0 = {k: steps(1.2 * o, seed=k) for k, o in enumerate(own)}
    b0 = {k: steps(1.0, seed=50 + k) for k in range(4)}
    steady = stats.paired_ratio(a0, b0, est(a0), est(b0))
    r = stats.paired_ratio(a, b, est(a), est(b))
    # per round the drift cancels exactly; the summary and its interval are those of no drift
    assert r.per_round == pytest.approx(tuple(1.2 * o for o in own), rel=1e-12)
    assert (r.ratio, r.low, r.high) == pytest.approx((steady.ratio, steady.low, steady.high))
    assert r.ratio == pytest.approx(1.2 * np.exp(np.mean(np.log(own))), rel=1e-12)
    assert r.clear and r.verdict == "1.20x slower"
    assert r.held == r.rounds == 4 and r.stability == "held in 4 of 4 rounds"
    # unpaired, the same data says nothing: the cells' own intervals carry the drift and overlap
    ea, eb = est(a), est(b)
    assert ea.low < eb.high
    assert ea.low / eb.high < 1.0 < r.low


def test_a_verdict_that_flips_between_rounds_is_no_clear_difference():
    a = rounds([1.1, 0.9, 1.1, 0.9], seed=1)
    b = rounds([1.0, 1.0, 1.0, 1.0], seed=40)
    r = stats.paired_ratio(a, b, est(a), est(b))
    assert r.low < 1.0 < r.high and not r.clear and r.verdict == stats.NO_CLEAR
    assert r.held == 2 and r.rounds == 4
    assert r.stability == ""  # "held in 2 of 4 rounds" only beside a clear verdict


def test_one_round_is_too_few_for_an_interval():
    a, b = rounds([2.0], seed=1), rounds([1.0], seed=2)
    r = stats.paired_ratio(a, b, est(a), est(b))
    assert r.method == stats.TOO_FEW_ROUNDS and not r.clear and r.verdict == stats.TOO_FEW
    assert r.ratio == pytest.approx(2.0) and np.isnan(r.low) and np.isnan(r.high)
    assert r.stability == ""
    # two rounds are enough for Student's t (one degree of freedom: a wide interval)
    two = stats.paired_ratio(
        rounds([2.0, 2.1], seed=1),
        rounds([1.0, 1.0], seed=2),
        est(rounds([2.0, 2.1], seed=1)),
        est(rounds([1.0, 1.0], seed=2)),
    )
    assert two.method == stats.ROUNDS and two.low < 2.0 < 2.1 < two.high


def test_ratio_without_raw_steps_is_bounded_by_the_intervals():
    ea = stats.Estimate(2.0, 1.8, 2.2, stats.FROM_INTERVALS, (2.0,), 0.0)
    eb = stats.Estimate(1.0, 0.9, 1.1, stats.FROM_INTERVALS, (1.0,), 0.0)
    r = stats.paired_ratio({}, {}, ea, eb)
    assert (r.ratio, r.low, r.high, r.method) == (2.0, 1.8 / 1.1, 2.2 / 0.9, "from intervals")
    assert r.clear


# -- coverage by simulation --------------------------------------------------------------------
SIMS = 2000  # simulated runs per case: the binomial sd of a 95% coverage is 0.0049
TOLERANCE = 0.015  # 3 binomial sd: a correct method misses this band with probability 0.003


def _simulated_runs(rounds_: int, ratio: float, seed: int, steps_: int = 15):
    """``SIMS`` runs of two cells over ``rounds_`` processes each, as the machine makes them:
    per round a machine state shared by both (log sd 0.10), per process its own state (log sd
    0.06: allocator, thread placement), per step 3% noise; cell a is ``ratio`` x cell b."""
    rng = np.random.default_rng(seed)
    machine = rng.normal(0.0, 0.10, (SIMS, rounds_, 1))
    proc_a, proc_b = (rng.normal(0.0, 0.06, (SIMS, rounds_, 1)) for _ in range(2))
    noise_a, noise_b = (rng.normal(0.0, 0.03, (SIMS, rounds_, steps_)) for _ in range(2))
    a = 0.05 * ratio * np.exp(machine + proc_a + noise_a)
    b = 0.05 * np.exp(machine + proc_b + noise_b)
    return a, b


def _covered(a: np.ndarray, b: np.ndarray, ratio: float) -> tuple[float, float]:
    """(how often the paired interval holds ``ratio``, how often its verdict is clear)."""
    hits = clear = 0
    unused = stats.Estimate(1.0, 1.0, 1.0, stats.ROUNDS, (1.0,), 0.0)  # read without raw steps
    for run_a, run_b in zip(a, b, strict=True):
        r = stats.paired_ratio(dict(enumerate(run_a)), dict(enumerate(run_b)), unused, unused)
        hits += r.low <= ratio <= r.high
        clear += r.clear
    return hits / len(a), clear / len(a)


@pytest.mark.parametrize("rounds_", [2, 5])
def test_paired_interval_covers_a_planted_ratio_at_its_nominal_rate(rounds_):
    """Known spread, planted ratio 1.3: the t interval over R processes holds the truth in 95%
    of simulated runs (within 3 binomial sd of 2000 runs), at R = 5 (smoke's) and even at 2."""
    a, b = _simulated_runs(rounds_, 1.3, seed=32 + rounds_)
    coverage, _ = _covered(a, b, 1.3)
    assert abs(coverage - 0.95) <= TOLERANCE, coverage


def test_coverage_check_catches_an_interval_that_ignores_the_spread_between_processes():
    """The planted defect: a percentile bootstrap over the 5 per-round ratios (what the report
    did over R values) is too narrow for 5 processes; the same check rejects it."""
    a, b = _simulated_runs(5, 1.3, seed=37)
    logs = np.log(np.median(a, axis=2) / np.median(b, axis=2))  # (SIMS, 5) per-round log-ratios
    rng = np.random.default_rng(0)
    idx = rng.integers(5, size=(400, 5))
    boot = logs[:, idx].mean(axis=2)  # (SIMS, 400) resampled means of the rounds
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=1)
    coverage = np.mean((lo <= np.log(1.3)) & (np.log(1.3) <= hi))
    assert coverage < 0.95 - TOLERANCE, coverage


def test_a_tie_is_called_clear_no_more_often_than_the_level_allows():
    a, b = _simulated_runs(5, 1.0, seed=41)
    _, clear = _covered(a, b, 1.0)
    assert clear <= 0.05 + TOLERANCE, clear


# -- a rerun's median: the machine's run-to-run spread --------------------------------------------
def _simulated_pairs(rounds_: int, within: float, between: float, seed: int):
    """``SIMS`` pairs of runs of one cell as a VM makes them: per run an effect of the machine
    (log sd ``between``: the host's other tenants, its clock), per round the process's own (log
    sd ``within``). Returns A's and B's round medians, shape (SIMS, rounds_) each."""
    rng = np.random.default_rng(seed)
    run = rng.normal(0.0, between, (2, SIMS, 1))
    proc = rng.normal(0.0, within, (2, SIMS, rounds_))
    m = 0.05 * np.exp(run + proc)
    return m[0], m[1]


def _held(a: np.ndarray, b: np.ndarray, interval) -> float:
    """How often B's reported median (the median of its round medians) lies in ``interval(A)``."""
    held = []
    for ma, mb in zip(a, b, strict=True):
        lo, hi = interval(ma)
        held.append(lo <= np.median(mb) <= hi)
    return float(np.mean(held))


@pytest.mark.parametrize("between", [0.0, 0.03, 0.08])
def test_a_reruns_interval_holds_the_next_runs_median_at_its_nominal_rate(between):
    """Known spread within (0.08) and between runs (none, small, as large): A's interval for a
    rerun, given the machine's spread, holds B's median in 95% of simulated pairs (3 binomial
    sd of 2000) at smoke's 5 rounds each."""
    a, b = _simulated_pairs(5, 0.08, between, seed=int(between * 100) + 50)
    coverage = _held(a, b, lambda ma: stats.rerun_interval(ma, 5, between))
    assert abs(coverage - 0.95) <= TOLERANCE, coverage


def _interval(e: stats.Estimate) -> tuple[float, float]:
    return e.low, e.high


def test_an_interval_blind_to_the_machine_misses_the_next_run_more_often():
    """The defect this interval fixes, planted: with a run-to-run spread as large as the rounds',
    a run's own interval, and a rerun interval without the machine's spread, both hold the next
    run's median far less often than 95%."""
    a, b = _simulated_pairs(5, 0.08, 0.08, seed=61)
    own = _held(a, b, lambda ma: _interval(stats.estimate(dict(enumerate(ma[:, None])))))
    blind = _held(a, b, lambda ma: stats.rerun_interval(ma, 5, 0.0))
    assert own < blind < 0.95 - 3 * TOLERANCE, (own, blind)


def test_the_median_variance_factors_agree_with_a_simulation():
    """``median_variance_factor``: Var(median of n normals) / Var(mean), against 400,000 draws a
    size (relative sd of a variance estimate: sqrt(2 / 4e5) = 0.22%; tolerance 1%)."""
    rng = np.random.default_rng(7)
    for n in range(1, 11):
        x = rng.normal(size=(400_000, n))
        ratio = np.var(np.median(x, axis=1)) / np.var(np.mean(x, axis=1))
        assert stats.median_variance_factor(n) == pytest.approx(ratio, rel=0.01), n
    assert stats.median_variance_factor(101) == pytest.approx(np.pi / 2)


def test_a_reruns_interval_is_worked_by_hand():
    """Logs 0, 0.1, 0.2 (mean 0.1, sd 0.1), a rerun of 3 rounds: rounds' variance 0.01 (1/3 +
    1.3460/3) = 0.0078200; alone, t(2) = 4.3027: half-width 0.38049. With a run-to-run sd of
    0.05, 0.0078200 + 0.005 = 0.012820, Satterthwaite df = 2 (0.012820/0.0078200)^2 = 5.375,
    t(5) = 2.5706: half-width 0.29106."""
    import math

    meds = [math.exp(v) for v in (0.0, 0.1, 0.2)]
    lo, hi = stats.rerun_interval(meds, 3)
    assert (math.log(lo), math.log(hi)) == pytest.approx((0.1 - 0.38049, 0.1 + 0.38049), abs=1e-5)
    lo, hi = stats.rerun_interval(meds, 3, 0.05)
    assert (math.log(lo), math.log(hi)) == pytest.approx((0.1 - 0.29106, 0.1 + 0.29106), abs=1e-5)
    assert stats.rerun_interval(meds) == stats.rerun_interval(meds, 3)  # as many rounds: 3
    with pytest.raises(ValueError, match="at least 2 rounds"):
        stats.rerun_interval(meds[:1])
    with pytest.raises(ValueError, match="finite sd"):
        stats.rerun_interval(meds, 3, float("nan"))


# -- two runs ----------------------------------------------------------------------------------
def test_ratio_of_ratios_ignores_a_uniformly_slower_machine():
    base_b, base_c = rounds([1.2, 1.21, 1.19], seed=1), rounds([1.0, 1.0, 1.0], seed=20)
    slow = 1.15  # the second machine: everything 15% slower
    other_b = rounds([1.2 * slow, 1.19 * slow, 1.21 * slow], seed=40)
    other_c = rounds([slow] * 3, seed=60)
    rr = stats.ratio_of_ratios(base_b, base_c, other_b, other_c)
    assert rr.ratio == pytest.approx(1.0, abs=1e-9) and not rr.clear
    assert rr.verdict == stats.NO_CLEAR
    k, lo, hi = stats.machine_factor([(1.2, 1.2 * slow), (1.0, slow)])
    assert (k, lo, hi) == pytest.approx((slow, slow, slow))
    # a real change of one backend relative to the common one is found through the drift
    faster = rounds([1.2 * slow * 0.8, 1.21 * slow * 0.8, 1.19 * slow * 0.8], seed=80)
    rr = stats.ratio_of_ratios(base_b, base_c, faster, other_c)
    assert rr.ratio == pytest.approx(0.8, rel=1e-9) and rr.clear and rr.verdict == "1.25x faster"
    # one round in either run: no interval
    one = stats.ratio_of_ratios({0: base_b[0]}, {0: base_c[0]}, faster, other_c)
    assert one.verdict == stats.TOO_FEW and not one.clear and np.isnan(one.low)


# -- noise -------------------------------------------------------------------------------------
def test_spread_ignores_one_outlier_step_and_sees_bimodal_steps():
    one_slow = steps(1.0, seed=3)
    one_slow[17] = 10.0  # one step 10x slower (a page fault, a context switch)
    s = summarize(list(one_slow))
    assert s.std / s.mean > 0.10  # the old CV rule fires on it: a false alarm
    assert stats.robust_spread(one_slow) < 0.02
    bimodal = np.concatenate([steps(1.0, seed=4, n=30), steps(1.3, seed=5, n=30)])
    assert stats.robust_spread(bimodal) > 0.2
    assert stats.robust_spread([1.0]) == 0.0


def test_noise_is_flagged_only_where_it_could_change_a_verdict():
    spread = 0.25  # bimodal steps as above
    assert stats.noise_matters(spread, 1.0, [1.1])  # a neighbour inside the spread
    assert not stats.noise_matters(spread, 1.0, [10.0])  # far away: the order cannot change
    assert not stats.noise_matters(0.02, 1.0, [1.01])  # close, but quiet steps


def test_runner_flag_ignores_one_outlier_and_fires_on_bimodal_steps():
    one_slow = steps(1.0, seed=3)
    one_slow[17] = 10.0
    assert noise_flag(summarize(list(one_slow)).as_dict()) is None
    bimodal = np.concatenate([steps(1.0, seed=4, n=30), steps(1.3, seed=5, n=30)])
    flag = noise_flag(summarize(list(bimodal)).as_dict())
    assert flag is not None and flag.startswith("steady-state spread") and "> 10%" in flag
