"""The report's statistics: step times across rounds, paired ratios, the verdict rule, noise.

Pure NumPy (the pandas side is :mod:`rosetta.report.compare`). The rules, justified in
``METHODOLOGY.md`` ("Statistics"):

- **A cell's steady-state step time** is the median of its rounds' medians (each round is one
  fresh process). Its 95% interval is a *hierarchical bootstrap*: resample the rounds with
  replacement, then each drawn round's steps with replacement, take the median of the drawn
  rounds' medians; the 2.5th and 97.5th percentiles of 2000 such medians. With one round this is
  the plain bootstrap of one process's median (method ``one process``), which says how well that
  process's median is known, not how another process would come out.
- **A ratio between two backends** is computed within each round (same round, same machine
  state: a uniform drift of the machine cancels), summarised as the median of the per-round
  ratios, with the same hierarchical bootstrap over the *paired* rounds.
- **The verdict**: with two or more rounds a ratio is clear when its interval excludes 1. With one
  round (no process-to-process spread known) the old, stricter rule stays: the interval excludes
  1 *and* the two medians' intervals do not overlap.
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
RESAMPLES = 2000  # bootstrap replicates: the 2.5th/97.5th percentiles move < 1% between seeds
SPREAD_LIMIT = 0.10  # IQR / median of one round's steps above which a cell *may* be noisy
ROUNDS = "rounds"  # method: hierarchical bootstrap over >= 2 rounds
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


def _over_rounds(pools: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Second level of the hierarchical bootstrap.

    ``pools`` (R, B) holds, per round, B bootstrap draws of that round's statistic (a median or a
    ratio of medians). Each replicate draws R rounds with replacement and, for each drawn round, one
    of its bootstrap draws at random (an independent step resample of that round), then takes the
    median over the drawn rounds: returns (B,) replicates."""
    r, b = pools.shape
    rounds = rng.integers(r, size=(b, r))  # (B, R): which round fills each slot
    draws = rng.integers(b, size=(b, r))  # (B, R): which step resample of it
    return np.median(pools[rounds, draws], axis=1)


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
    runner summarised it, used where a round kept no raw steps: then the median is the median of
    the round medians and the interval spans the rounds' recorded intervals (never narrower)."""
    raw = {k: np.asarray(v, dtype=float) for k, v in rounds.items() if len(v) >= 1}
    recorded = dict(recorded or {})
    keys = sorted(set(raw) | set(recorded))
    meds = {k: float(np.median(raw[k])) if k in raw else recorded[k][0] for k in keys}
    keys = [k for k in keys if math.isfinite(meds[k]) and meds[k] > 0]
    if not keys:
        return None
    round_meds = tuple(meds[k] for k in keys)
    spread = max(robust_spread(raw[k]) if k in raw else 0.0 for k in keys)
    median = float(np.median(round_meds))
    if not all(k in raw and raw[k].size >= 2 for k in keys):
        lows = [recorded.get(k, (meds[k],) * 3)[1] for k in keys]
        highs = [recorded.get(k, (meds[k],) * 3)[2] for k in keys]
        lo = min([x for x in lows if _finite(x)] + list(round_meds))
        hi = max([x for x in highs if _finite(x)] + list(round_meds))
        return Estimate(median, lo, hi, FROM_INTERVALS, round_meds, spread)
    rng = np.random.default_rng(seed)
    pools = np.stack([_boot_medians(raw[k], rng, resamples) for k in keys])  # (R, B)
    boot = pools[0] if len(keys) == 1 else _over_rounds(pools, rng)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    method = ONE_PROCESS if len(keys) == 1 else ROUNDS
    lo, hi = float(min(lo, median)), float(max(hi, median))
    return Estimate(median, lo, hi, method, round_meds, spread)


@dataclass(frozen=True)
class Ratio:
    """``a / b`` of step times, paired by round, with its 95% interval and the verdict on it."""

    ratio: float
    low: float
    high: float
    clear: bool  # the verdict rule of the module docstring
    method: str  # ROUNDS | ONE_PROCESS | FROM_INTERVALS
    per_round: tuple[float, ...] = ()  # a / b within each shared round

    @property
    def verdict(self) -> str:
        """'x.xx times slower' / 'x.xx times faster' / 'no clear difference'."""
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
        """'held in 3 of 3 rounds', or why there is no such statement."""
        if self.method == ONE_PROCESS:
            return "one round: within-process interval"
        if self.method == FROM_INTERVALS:
            return "no raw steps: bounded by the recorded intervals"
        return f"held in {self.held} of {self.rounds} rounds"


def paired_draws(
    a: Rounds, b: Rounds, *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, np.ndarray, tuple[float, ...]] | None:
    """(median of per-round ratios a/b, its bootstrap replicates (B,), the per-round ratios) over
    the rounds both cells ran with at least 2 raw steps each; None if they share no such round."""
    keys = sorted(k for k in set(a) & set(b) if len(a[k]) >= 2 and len(b[k]) >= 2)
    if not keys:
        return None
    ra = {k: np.asarray(a[k], dtype=float) for k in keys}
    rb = {k: np.asarray(b[k], dtype=float) for k in keys}
    per_round = tuple(float(np.median(ra[k]) / np.median(rb[k])) for k in keys)
    rng = np.random.default_rng(seed)
    pools = np.stack(
        [_boot_medians(ra[k], rng, resamples) / _boot_medians(rb[k], rng, resamples) for k in keys]
    )  # (R, B): per round, bootstrap ratios of medians
    boot = pools[0] if len(keys) == 1 else _over_rounds(pools, rng)
    return float(np.median(per_round)), boot, per_round


def paired_ratio(a: Rounds, b: Rounds, ea: Estimate, eb: Estimate, *, seed: int = 0) -> Ratio:
    """``a / b`` paired by round (see the module docstring); ``ea``/``eb`` are the two cells'
    estimates, used for the one-round rule and when raw steps are missing."""
    got = paired_draws(a, b, seed=seed)
    apart = ea.low > eb.high or eb.low > ea.high
    if got is None:  # no shared round with raw steps: bounded by the two intervals
        r = ea.median / eb.median
        lo = ea.low / eb.high if eb.high > 0 else 0.0
        hi = ea.high / eb.low if eb.low > 0 else math.inf
        return Ratio(r, lo, hi, bool(apart and not lo <= 1.0 <= hi), FROM_INTERVALS)
    r, boot, per_round = got
    lo, hi = (float(x) for x in np.percentile(boot, [2.5, 97.5]))
    lo, hi = min(lo, r), max(hi, r)
    excludes = not lo <= 1.0 <= hi
    if len(per_round) == 1:
        return Ratio(r, lo, hi, bool(excludes and apart), ONE_PROCESS, per_round)
    return Ratio(r, lo, hi, bool(excludes), ROUNDS, per_round)


@dataclass(frozen=True)
class RatioOfRatios:
    """Run ``other`` against run ``base`` for one backend, both relative to a common backend."""

    ratio: float  # (b/c in other) / (b/c in base)
    low: float
    high: float
    clear: bool  # the interval excludes 1

    @property
    def verdict(self) -> str:
        """'x.xx times slower' / 'x.xx times faster' (relative to the common backend), or none."""
        if not self.clear:
            return NO_CLEAR
        if self.ratio >= 1:
            return f"{self.ratio:.2f}x slower"
        return f"{1 / self.ratio:.2f}x faster"


def ratio_of_ratios(
    base_b: Rounds, base_c: Rounds, other_b: Rounds, other_c: Rounds, *, seed: int = 0
) -> RatioOfRatios | None:
    """How backend b moved between two runs relative to the common backend c: the paired ratio
    b/c of ``other`` over that of ``base``; the interval from independent replicates of the two
    (the runs are independent). None where either run has no shared round of b and c."""
    base = paired_draws(base_b, base_c, seed=seed)
    other = paired_draws(other_b, other_c, seed=seed + 1)
    if base is None or other is None:
        return None
    rr = other[0] / base[0]
    lo, hi = (float(x) for x in np.percentile(other[1] / base[1], [2.5, 97.5]))
    lo, hi = min(lo, rr), max(hi, rr)
    return RatioOfRatios(rr, lo, hi, not lo <= 1.0 <= hi)


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
