"""The shared method of every benchmark: interleaved rounds, medians, bootstrap ratio intervals.

Two (or more) ways of doing the same step are timed in alternation, A B A B ..., in one process,
after warm-up, so that drift of the machine (other load, frequency, caches) hits both alike.
The figure of merit is the ratio of medians with a bootstrap 95% interval (percentile method,
resampling each side's times independently).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

OUT_DIR = Path(__file__).parent / "out"


@dataclass(frozen=True)
class Ratio:
    """median(a) / median(b) with its bootstrap 95% interval, and both medians (seconds)."""

    name: str
    ratio: float
    low: float
    high: float
    median_a: float
    median_b: float
    n: int

    def line(self) -> str:
        """One human-readable line."""
        return (
            f"{self.name:<34} {self.ratio:6.3f} [{self.low:.3f}, {self.high:.3f}]  "
            f"{self.median_a * 1e3:9.2f} ms vs {self.median_b * 1e3:9.2f} ms  (n={self.n})"
        )


def interleaved(
    steps: dict[str, Callable[[], object]],
    *,
    rounds: int,
    warmup: int = 2,
    sync: Callable[[object], None] = lambda v: None,
) -> dict[str, list[float]]:
    """Time each callable ``rounds`` times in alternation after ``warmup`` untimed rounds.

    ``sync(value)`` is called on each step's return value before the clock is read (block on a
    JAX array, ``torch.cuda.synchronize`` ...)."""
    for _ in range(warmup):
        for fn in steps.values():
            sync(fn())
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(rounds):
        for key, fn in steps.items():
            t0 = time.perf_counter_ns()
            sync(fn())
            times[key].append((time.perf_counter_ns() - t0) / 1e9)
    return times


def run_child(benchmark: str, args: list[str], *, timeout: float = 3600) -> dict:
    """Run ``python -m benchmarks <benchmark> --child ...`` (one framework's thread pools alone
    in a process of their own): its printed lines but the last are echoed, the last is its JSON
    result. A failed child stops the benchmark with its last error line."""
    cmd = [sys.executable, "-m", "benchmarks", benchmark, "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"{benchmark}: the child {args[0]} failed: {tail}")
    sys.stdout.write("".join(line + "\n" for line in lines[:-1]))
    return json.loads(lines[-1])


def streamed_generation(model, prompts: np.ndarray, new_tokens: int):
    """One greedy generation by a lowered model as a server streams it (and as
    ``rosetta.runner.generation.time_generation`` times it): the prefill, then one token a step,
    each token on the host before the next step. Returns the last token (native)."""
    _, nxt = model.prefill(prompts)
    model.to_numpy(nxt)
    for _ in range(new_tokens - 1):
        _, nxt = model.decode(nxt)
        model.to_numpy(nxt)
    return nxt


def random_batch(w, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """One batch of workload ``w``'s input format: images in [0, 1) or token ids, plus labels
    for training workloads (None for features)."""
    rng = np.random.default_rng(seed)
    if w.input.dtype == "int32":
        x = rng.integers(1, 30000, size=(n, *w.input.shape)).astype(np.int32)
    else:
        x = rng.random((n, *w.input.shape), dtype=np.float32)
    y = rng.integers(0, w.output_shape[0], size=n).astype(np.int64) if w.task == "train" else None
    return x, y


def median_interval(values, *, resamples: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95% interval of the median of ``values`` (e.g. per-round paired ratios)."""
    rng = np.random.default_rng(seed)
    v = np.asarray(values, dtype=float)
    boot = np.median(rng.choice(v, size=(resamples, v.size)), axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(lo), float(hi)


def ratio(
    name: str, a: list[float], b: list[float], *, resamples: int = 4000, seed: int = 0
) -> Ratio:
    """``median(a) / median(b)`` with a bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    ta, tb = np.asarray(a), np.asarray(b)
    ma = np.median(rng.choice(ta, size=(resamples, ta.size)), axis=1)
    mb = np.median(rng.choice(tb, size=(resamples, tb.size)), axis=1)
    lo, hi = np.percentile(ma / mb, [2.5, 97.5])
    return Ratio(
        name,
        float(np.median(ta) / np.median(tb)),
        float(lo),
        float(hi),
        float(np.median(ta)),
        float(np.median(tb)),
        int(min(ta.size, tb.size)),
    )


def report(benchmark: str, rows: list[Ratio], notes: dict | None = None) -> Path:
    """Print the rows and write them (plus machine load and ``notes``) to ``out/<name>.json``."""
    print(f"{'comparison':<34} {'ratio':>6} [95% CI]          medians")
    for r in rows:
        print(r.line())
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / f"{benchmark}.json"
    payload = {
        "benchmark": benchmark,
        "rows": [asdict(r) for r in rows],
        "load_avg": list(os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "notes": notes or {},
    }
    path.write_text(json.dumps(payload, indent=1))
    print(f"written: {path}")
    return path
