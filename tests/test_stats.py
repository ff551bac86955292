"""The report's statistics on planted data: rounds, paired ratios, the verdict rule, noise.

Each test plants a known effect (a uniform machine drift, rounds that disagree, one slow step,
bimodal steps) and asserts what the statistics must make of it, against an independent answer
where there is one (a loop-by-loop hierarchical bootstrap; the true median of a simulation)."""

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
    agree = est(rounds([1.0, 1.0, 1.0, 1.0], seed=10))
    disagree = est(rounds([0.9, 1.0, 1.1, 1.0], seed=10))  # same steps, rounds shifted
    assert agree.method == disagree.method == stats.ROUNDS
    w_agree, w_disagree = agree.high - agree.low, disagree.high - disagree.low
    # within-round noise alone: 1% steps, 60 of them -> the median is known to well under 1%
    assert w_agree < 0.01
    # the process-to-process spread of +-10% must show: the interval reaches past 0.95 and 1.05
    assert disagree.low < 0.95 and disagree.high > 1.05 and w_disagree > 10 * w_agree
    assert disagree.round_medians == pytest.approx((0.9, 1.0, 1.1, 1.0))


def _loop_hierarchical(r: dict[int, np.ndarray], b: int, seed: int) -> np.ndarray:
    """An independent, deliberately plain hierarchical bootstrap: for each replicate draw the
    rounds, then resample each drawn round's steps, then the median of the drawn medians."""
    rng = np.random.default_rng(seed)
    keys = list(r)
    out = np.empty(b)
    for i in range(b):
        picks = rng.choice(keys, size=len(keys))
        out[i] = np.median([np.median(rng.choice(r[k], size=r[k].size)) for k in picks])
    return out


def test_hierarchical_bootstrap_agrees_with_a_plain_loop():
    r = rounds([0.95, 1.02, 1.0, 1.07, 0.98], seed=20, sigma=0.03)
    e = stats.estimate(r, resamples=4000)
    lo, hi = np.percentile(_loop_hierarchical(r, 4000, seed=99), [2.5, 97.5])
    # two Monte-Carlo estimates of the same percentiles, 4000 replicates each: their spread
    # here is ~0.5% of the median; 1.5% is three times that, well below the 12% interval width
    assert e.low == pytest.approx(lo, abs=0.015) and e.high == pytest.approx(hi, abs=0.015)


def test_cross_round_interval_covers_the_true_median_most_of_the_time():
    """Simulated runs: each round's machine state shifts its median (log-normal, 5%), steps have
    2% noise. The within-process interval of one round covers the true median rarely; the
    cross-round interval of 8 rounds covers it most of the time (the percentile bootstrap over
    few rounds under-covers somewhat: 95% nominal, >= 80% required over 60 simulations)."""
    rng = np.random.default_rng(7)
    covered_rounds = covered_one = 0
    n = 60
    for i in range(n):
        meds = list(np.exp(rng.normal(0.0, 0.05, 8)))
        r = rounds(meds, seed=1000 + 10 * i, sigma=0.02)
        e = stats.estimate(r, resamples=400, seed=i)
        one = stats.estimate({0: r[0]}, resamples=400, seed=i)
        covered_rounds += e.low <= 1.0 <= e.high
        covered_one += one.low <= 1.0 <= one.high
    assert covered_rounds >= 0.8 * n
    assert covered_one <= 0.5 * n  # the old interval: how well one process knows itself


def test_rounds_without_raw_steps_are_bounded_by_their_recorded_intervals():
    e = stats.estimate({}, {0: (1.0, 0.97, 1.03), 1: (1.2, 1.15, 1.25)})
    assert e.method == stats.FROM_INTERVALS
    assert (e.median, e.low, e.high) == pytest.approx((1.1, 0.97, 1.25))
    assert stats.estimate({}, {0: (0.0, 0.0, 0.0)}) is None


# -- paired ratios -----------------------------------------------------------------------------
def test_uniform_shift_between_rounds_leaves_the_paired_ratio_unchanged():
    drift = [1.0, 1.18, 0.92, 1.08]  # the machine's state per round, hitting both alike
    a = {k: steps(1.2, seed=k) * d for k, d in enumerate(drift)}
    b = {k: steps(1.0, seed=50 + k) * d for k, d in enumerate(drift)}
    steady = stats.paired_ratio(
        {k: steps(1.2, seed=k) for k in range(4)},
        {k: steps(1.0, seed=50 + k) for k in range(4)},
        est({k: steps(1.2, seed=k) for k in range(4)}),
        est({k: steps(1.0, seed=50 + k) for k in range(4)}),
    )
    r = stats.paired_ratio(a, b, est(a), est(b))
    # per round the drift cancels exactly; the summary and its interval are those of no drift
    assert r.per_round == pytest.approx((1.2,) * 4, rel=1e-12)
    assert (r.ratio, r.low, r.high) == pytest.approx((steady.ratio, steady.low, steady.high))
    assert r.ratio == pytest.approx(1.2, rel=1e-12) and r.clear and r.verdict == "1.20x slower"
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


def test_one_round_ratio_keeps_the_stricter_old_rule():
    a, b = rounds([2.0], seed=1), rounds([1.0], seed=2)
    r = stats.paired_ratio(a, b, est(a), est(b))
    assert r.method == stats.ONE_PROCESS and r.clear and r.verdict == "2.00x slower"
    assert r.stability == "one round: within-process interval"
    # interval excludes 1 but the medians' intervals overlap: no verdict with one process
    ea = stats.Estimate(1.05, 0.95, 1.15, stats.ONE_PROCESS, (1.05,), 0.0)
    eb = stats.Estimate(1.0, 0.9, 1.1, stats.ONE_PROCESS, (1.0,), 0.0)
    near = stats.paired_ratio(rounds([1.05], seed=3), rounds([1.0], seed=4), ea, eb)
    assert near.low > 1.0 and not near.clear


def test_ratio_without_raw_steps_is_bounded_by_the_intervals():
    ea = stats.Estimate(2.0, 1.8, 2.2, stats.FROM_INTERVALS, (2.0,), 0.0)
    eb = stats.Estimate(1.0, 0.9, 1.1, stats.FROM_INTERVALS, (1.0,), 0.0)
    r = stats.paired_ratio({}, {}, ea, eb)
    assert (r.ratio, r.low, r.high, r.method) == (2.0, 1.8 / 1.1, 2.2 / 0.9, "from intervals")
    assert r.clear


# -- two runs ----------------------------------------------------------------------------------
def test_ratio_of_ratios_ignores_a_uniformly_slower_machine():
    base_b, base_c = rounds([1.2, 1.2], seed=1), rounds([1.0, 1.0], seed=20)
    slow = 1.15  # the second machine: everything 15% slower
    other_b, other_c = rounds([1.2 * slow] * 2, seed=40), rounds([slow] * 2, seed=60)
    rr = stats.ratio_of_ratios(base_b, base_c, other_b, other_c)
    assert rr.ratio == pytest.approx(1.0, abs=1e-9) and not rr.clear
    k, lo, hi = stats.machine_factor([(1.2, 1.2 * slow), (1.0, slow)])
    assert (k, lo, hi) == pytest.approx((slow, slow, slow))
    # a real change of one backend relative to the common one is found through the drift
    faster = rounds([1.2 * slow * 0.8] * 2, seed=80)
    rr = stats.ratio_of_ratios(base_b, base_c, faster, other_c)
    assert rr.ratio == pytest.approx(0.8, rel=1e-9) and rr.clear and rr.verdict == "1.25x faster"


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
