"""The report's statistics: step times across rounds, paired ratios, the verdict rule, noise.

Pure NumPy (the pandas side is :mod:`rosetta.report.compare`). The rules, justified in
``METHODOLOGY.md`` ("Clocks"):

- **Rounds are processes.** The spread that matters is between processes (allocator, thread
  placement, JIT), so every interval across rounds treats each round as *one* observation, its
  median step time, and uses a method valid for few of them: **Student's t on the logarithms**
  (``R - 1`` degrees of freedom). A bootstrap over R values cannot know the spread of two or three
  values; Student's t is exact for log-normal round effects and conservative enough otherwise
  (``tests/test_stats.py`` checks its coverage by simulation).
- **A cell's steady-state step time** is the median of its rounds' medians; with R >= 2 rounds
  its 95% interval is ``exp(mean(log m) +- t(R-1) sd(log m) / sqrt(R))`` over the round medians
  ``m`` (widened to hold the median). With one round it is the plain bootstrap of that process's
  median (method ``one process``): how well that process knows its own median, not how another
  process would come out, so no verdict rests on it.
- **A ratio between two backends** is computed within each round (same round, same machine
  state: a uniform drift of the machine cancels), summarised as the geometric mean of the
  per-round ratios with the t interval of the per-round log-ratios (method ``rounds``). It is
  clear when that interval excludes 1. With fewer than :data:`MIN_ROUNDS` shared rounds there is
  no interval: the verdict says :data:`TOO_FEW` (method ``too few rounds``).
- **A rerun's median** (:func:`rerun_interval`): where another run of the cell would put its
  median, from this run's rounds and the machine's run-to-run spread (measured from pairs of
  runs: :mod:`rosetta.report.rerun`), which no interval within one run can see.
- **Two runs** (ratio of ratios to a common backend): the difference of the two runs' mean
  log-ratios with Welch's t interval (the runs are independent); too few rounds in either run
  gives :data:`TOO_FEW`.
- **Noise**: a round's robust spread is IQR / median of its steps (one slow step cannot move it;
  bimodal steps do). A cell is flagged only when that spread is above :data:`SPREAD_LIMIT` *and*
  it could change a verdict: some other backend's median lies within that spread of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

NO_CLEAR = "no clear difference"
TOO_FEW = "too few rounds for an interval"
MIN_ROUNDS = 2  # Student's t needs one degree of freedom: two processes
MAX_DF = 1e6  # Satterthwaite's degrees of freedom where a known variance is all: the normal
EXCLUDE_EPS = 1e-9  # an interval excludes 1 only beyond float noise (rounds that agree exactly)
RESAMPLES = 2000  # bootstrap replicates: the 2.5th/97.5th percentiles move < 1% between seeds
SPREAD_LIMIT = 0.10  # IQR / median of one round's steps above which a cell *may* be noisy
ROUNDS = "rounds"  # method: Student's t over >= MIN_ROUNDS rounds (one value per process)
TOO_FEW_ROUNDS = "too few rounds"  # method: a ratio over fewer rounds: no interval, no verdict
ONE_PROCESS = "one process"  # method: one round, the within-process bootstrap
FROM_INTERVALS = "from intervals"  # method: no raw steps kept, bounded by recorded intervals

Rounds = Mapping[int, np.ndarray]  # round number -> that round's raw steady-state step times


def robust_spread(steps: Sequence[float] | np.ndarray) -> float:
    """IQR / median of one round's step times (0 for fewer than 2 steps or a zero median)."""
    t = np.asarray(steps, dtype=float)
    if t.size < 2:
        return 0.0
    med = float(np.median(t))
    if med <= 0:
        return 0.0
    q25, q75 = np.percentile(t, [25, 75])
    return float((q75 - q25) / med)


def _boot_medians(t: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` bootstrap medians of ``t``: shape (resamples,).

    Exactly ``np.median(rng.choice(t, size=(resamples, t.size)), axis=1)`` (the same draws from
    ``rng``, the same values), computed on the ranks of ``t``: small integers sort along a row
    several times faster than floats are partitioned, and a report of 10,000 records draws
    tens of thousands of these."""
    t = np.asarray(t, dtype=float)
    n = t.size
    idx = rng.choice(n, size=(resamples, n))  # the indices rng.choice(t, ...) would draw
    order = np.argsort(t, kind="stable")
    rank = np.empty(n, dtype=np.int16 if n < 2**15 else np.int64)
    rank[order] = np.arange(n)
    mid = np.sort(rank[idx], axis=1)  # each resample's ranks in order
    hi = t[order[mid[:, n // 2]]]
    if n % 2:
        return hi
    return (t[order[mid[:, n // 2 - 1]]] + hi) / 2  # np.median's mean of the middle two


# Student's t, two-sided 95%: the 0.975 quantile for 1..30 degrees of freedom (standard tables;
# tests/test_stats.py checks them against an independent computation), beyond by expansion.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
_Z975 = 1.959963984540054


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (df >= 1; a fractional
    df, as Welch's, is rounded down: the wider interval). Above 30, the Cornish-Fisher expansion
    in 1/df, exact to 1e-4 there."""
    if not df >= 1:
        raise ValueError(f"Student's t needs at least one degree of freedom, got {df}")
    k = int(math.floor(df))
    if k <= len(_T975):
        return _T975[k - 1]
    z = _Z975
    return (z + (z**3 + z) / (4 * k) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * k**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * k**3))  # fmt: skip


def excludes_one(lo: float, hi: float) -> bool:
    """Whether the interval [lo, hi] lies off 1 by more than float noise (NaN: no)."""
    return bool(lo > 1.0 + EXCLUDE_EPS or hi < 1.0 - EXCLUDE_EPS)


def t_interval(logs: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of the 95% Student's t interval for the mean of ``logs`` (>= 2 values)."""
    x = np.asarray(logs, dtype=float)
    if x.size < MIN_ROUNDS:
        raise ValueError(f"a t interval needs at least {MIN_ROUNDS} values, got {x.size}")
    mean = float(x.mean())
    half = t975(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


# Var(median of n normal values) / Var(their mean), n = 1..10 (the order statistics integrated
# numerically; tests/test_stats.py checks them by simulation); beyond, the large-sample pi / 2.
_MEDIAN_VAR = (1.0, 1.0, 1.3460, 1.1928, 1.4342, 1.2885, 1.4731, 1.3455, 1.4949, 1.3833)


def median_variance_factor(n: int) -> float:
    """How much more a median of ``n`` normal values varies than their mean (variance ratio)."""
    if n < 1:
        raise ValueError(f"a median needs at least one value, got {n}")
    return _MEDIAN_VAR[n - 1] if n <= len(_MEDIAN_VAR) else math.pi / 2


def rerun_interval(
    round_medians: Sequence[float], rounds_b: int | None = None, between_sd: float = 0.0
) -> tuple[float, float]:
    """The 95% interval for the median step time **another run** of the same cell would report
    (the median of its ``rounds_b`` round medians; default: as many as this run's), from this
    run's round medians (>= 2) and the machine's run-to-run spread ``between_sd`` (the sd of a
    whole run's log step time about the machine's typical one, measured from pairs of runs:
    :mod:`rosetta.report.rerun`).

    In logs the other run's median lies off this run's mean by both runs' round noise and both
    runs' run effects: variance ``s^2 (1/R_A + f(R_B)/R_B) + 2 between_sd^2``, ``f`` the median's
    :func:`median_variance_factor`; the interval is Student's t with Satterthwaite's degrees of
    freedom (``R_A - 1`` where the rounds' part is all, more as the known part grows). With
    ``between_sd = 0`` it is the prediction interval of the rounds alone, blind to a change of
    the machine between runs."""
    x = np.log(np.asarray(round_medians, dtype=float))
    if x.size < MIN_ROUNDS:
        raise ValueError(f"a rerun interval needs at least {MIN_ROUNDS} rounds, got {x.size}")
    if not (math.isfinite(between_sd) and between_sd >= 0):
        raise ValueError(f"the run-to-run spread must be a finite sd >= 0, got {between_sd}")
    rb = x.size if rounds_b is None else max(int(rounds_b), 1)
    rounds_part = float(x.var(ddof=1)) * (1 / x.size + median_variance_factor(rb) / rb)
    var = rounds_part + 2 * between_sd**2
    df = (x.size - 1) * (var / rounds_part) ** 2 if rounds_part > 0 else MAX_DF
    half = t975(min(df, MAX_DF)) * math.sqrt(var)
    mean = float(x.mean())
    return math.exp(mean - half), math.exp(mean + half)


@dataclass(frozen=True)
class Estimate:
    """A cell's steady-state step time across its rounds: median, 95% interval and method."""

    median: float
    low: float
    high: float
    method: str  # ROUNDS | ONE_PROCESS | FROM_INTERVALS
    round_medians: tuple[float, ...]  # in round order
    spread: float  # the largest robust spread (IQR / median) of its rounds

    @property
    def rounds(self) -> int:
        """How many rounds the estimate summarises."""
        return len(self.round_medians)


def estimate(
    rounds: Rounds,
    recorded: Mapping[int, tuple[float, float, float]] | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Estimate | None:
    """The cross-round estimate of one cell (None when no round has a positive median).

    ``rounds`` holds each round's raw steps; ``recorded`` each round's (median, low, high) as the
    runner summarised it, used where a round kept no raw steps. With two or more rounds the
    interval is Student's t over the logarithms of the round medians (module docstring); with one,
    the within-process bootstrap of its steps, or its recorded interval when it kept none."""
    raw = {k: np.asarray(v, dtype=float) for k, v in rounds.items() if len(v) >= 1}
    recorded = dict(recorded or {})
    keys = sorted(set(raw) | set(recorded))
    meds = {k: float(np.median(raw[k])) if k in raw else recorded[k][0] for k in keys}
    keys = [k for k in keys if _finite(meds[k]) and meds[k] > 0]
    if not keys:
        return None
    round_meds = tuple(meds[k] for k in keys)
    spread = max(robust_spread(raw[k]) if k in raw else 0.0 for k in keys)
    median = float(np.median(round_meds))
    if len(keys) >= MIN_ROUNDS:
        _, lo, hi = t_interval(np.log(round_meds))
        lo, hi = min(math.exp(lo), median), max(math.exp(hi), median)
        return Estimate(median, lo, hi, ROUNDS, round_meds, spread)
    (k,) = keys
    if k in raw and raw[k].size >= 2:
        rng = np.random.default_rng(seed)
        lo, hi = np.percentile(_boot_medians(raw[k], rng, resamples), [2.5, 97.5])
        lo, hi = float(min(lo, median)), float(max(hi, median))
        return Estimate(median, lo, hi, ONE_PROCESS, round_meds, spread)
    lo, hi = recorded.get(k, (median,) * 3)[1:]
    lo = min(lo, median) if _finite(lo) else median
    hi = max(hi, median) if _finite(hi) else median
    return Estimate(median, lo, hi, FROM_INTERVALS, round_meds, spread)


@dataclass(frozen=True)
class Ratio:
    """``a / b`` of step times, paired by round, with its 95% interval and the verdict on it."""

    ratio: float
    low: float  # NaN where there is no interval (TOO_FEW_ROUNDS)
    high: float
    clear: bool  # the verdict rule of the module docstring
    method: str  # ROUNDS | TOO_FEW_ROUNDS | FROM_INTERVALS
    per_round: tuple[float, ...] = ()  # a / b within each shared round

    @property
    def verdict(self) -> str:
        """'x.xx times slower' / 'x.xx times faster' / 'no clear difference' / 'too few rounds
        for an interval'."""
        if self.method == TOO_FEW_ROUNDS:
            return TOO_FEW
        if not self.clear:
            return NO_CLEAR
        if self.ratio >= 1:
            return f"{self.ratio:.2f}x slower"
        return f"{1 / self.ratio:.2f}x faster"

    @property
    def rounds(self) -> int:
        """How many paired rounds the ratio summarises."""
        return len(self.per_round)

    @property
    def held(self) -> int:
        """In how many rounds the per-round ratio fell on the same side of 1 as the summary."""
        side = self.ratio >= 1
        return sum((r >= 1) == side for r in self.per_round)

    @property
    def stability(self) -> str:
        """'held in 3 of 3 rounds' beside a clear verdict only ("" beside no verdict: a count of
        rounds on one side means nothing where the interval holds 1); where the interval came
        from elsewhere, where from."""
        if self.method == FROM_INTERVALS:
            return "no raw steps: bounded by the recorded intervals"
        if self.method == ROUNDS and self.clear:
            return f"held in {self.held} of {self.rounds} rounds"
        return ""


def round_ratios(a: Rounds, b: Rounds) -> tuple[float, ...]:
    """``median(a) / median(b)`` within every round both cells ran (each with a positive median),
    in round order."""
    out = []
    for k in sorted(set(a) & set(b)):
        if len(a[k]) and len(b[k]):
            ma, mb = float(np.median(a[k])), float(np.median(b[k]))
            if ma > 0 and mb > 0 and math.isfinite(ma / mb):
                out.append(ma / mb)
    return tuple(out)


def paired_ratio(a: Rounds, b: Rounds, ea: Estimate, eb: Estimate) -> Ratio:
    """``a / b`` paired by round (see the module docstring); ``ea``/``eb`` are the two cells'
    estimates, used when no round of raw steps is shared."""
    per_round = round_ratios(a, b)
    if not per_round:  # no shared round with raw steps: bounded by the two intervals
        apart = ea.low > eb.high or eb.low > ea.high
        r = ea.median / eb.median
        lo = ea.low / eb.high if eb.high > 0 else 0.0
        hi = ea.high / eb.low if eb.low > 0 else math.inf
        return Ratio(r, lo, hi, bool(apart and not lo <= 1.0 <= hi), FROM_INTERVALS)
    if len(per_round) < MIN_ROUNDS:
        r = float(np.exp(np.mean(np.log(per_round))))
        return Ratio(r, math.nan, math.nan, False, TOO_FEW_ROUNDS, per_round)
    mean, lo, hi = t_interval(np.log(per_round))
    r, lo, hi = math.exp(mean), math.exp(lo), math.exp(hi)
    return Ratio(r, lo, hi, excludes_one(lo, hi), ROUNDS, per_round)


@dataclass(frozen=True)
class RatioOfRatios:
    """Run ``other`` against run ``base`` for one backend, both relative to a common backend."""

    ratio: float  # (b/c in other) / (b/c in base)
    low: float  # NaN where there is no interval
    high: float
    clear: bool  # the interval excludes 1

    @property
    def verdict(self) -> str:
        """'x.xx times slower' / 'x.xx times faster' (relative to the common backend), or none."""
        if math.isnan(self.low):
            return TOO_FEW
        if not self.clear:
            return NO_CLEAR
        if self.ratio >= 1:
            return f"{self.ratio:.2f}x slower"
        return f"{1 / self.ratio:.2f}x faster"


def ratio_of_ratios(
    base_b: Rounds, base_c: Rounds, other_b: Rounds, other_c: Rounds
) -> RatioOfRatios | None:
    """How backend b moved between two runs relative to the common backend c: the geometric mean
    of the per-round ratios b/c in ``other`` over that in ``base``, with Welch's t interval on the
    difference of the mean log-ratios (the runs are independent). No interval (NaN, verdict
    :data:`TOO_FEW`) where either run has fewer than :data:`MIN_ROUNDS` shared rounds; None where
    either has none."""
    base, other = np.log(round_ratios(base_b, base_c)), np.log(round_ratios(other_b, other_c))
    if not base.size or not other.size:
        return None
    diff = float(other.mean() - base.mean())
    rr = math.exp(diff)
    if base.size < MIN_ROUNDS or other.size < MIN_ROUNDS:
        return RatioOfRatios(rr, math.nan, math.nan, False)
    va, vb = other.var(ddof=1) / other.size, base.var(ddof=1) / base.size
    se = math.sqrt(va + vb)
    if se == 0:  # both runs' rounds agree exactly: the interval is the point
        return RatioOfRatios(rr, rr, rr, excludes_one(rr, rr))
    df = (va + vb) ** 2 / (va**2 / (other.size - 1) + vb**2 / (base.size - 1))
    half = t975(max(df, 1.0)) * se
    lo, hi = math.exp(diff - half), math.exp(diff + half)
    return RatioOfRatios(rr, lo, hi, excludes_one(lo, hi))


def machine_factor(pairs: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """'The machines differ by k x': the geometric mean of ``other / base`` step-time medians over
    the cells timed in both runs, with the smallest and largest of those ratios."""
    r = np.array([o / b for b, o in pairs if _finite(b) and _finite(o) and b > 0 and o > 0])
    if r.size == 0:
        return None
    return float(np.exp(np.log(r).mean())), float(r.min()), float(r.max())


def noise_matters(spread: float, median: float, others: Sequence[float]) -> bool:
    """Whether a cell's noise could change a verdict: its robust spread is above
    :data:`SPREAD_LIMIT` and another backend's median lies within that spread of its own
    (``|log(other / median)| < log(1 + spread)``)."""
    if not spread > SPREAD_LIMIT or not median > 0:
        return False
    band = math.log1p(spread)
    return any(o > 0 and abs(math.log(o / median)) < band for o in others)


def passed(v: object) -> bool:
    """Whether an ``equivalent`` cell value says the gate passed (None/NaN: unknown, not passed)."""
    return isinstance(v, bool | np.bool_) and bool(v)


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
