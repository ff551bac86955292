"""The one timed loop of a cell: steps of a model over native batches, the cold start kept apart.

Every kind of cell times its steps through :func:`timed_steps`: a training run (each epoch's
train steps, sampled every ``sample_every``-th step, the rest unsynced so the device queue stays
full), a timing round (a fixed number of steps, a warm-up discarded), a forward-only backend's
forward pass and a feature extraction (each batch made on the fly, its fetch inside the clock).
:func:`clocks_of` turns what it measured into the record's ``clocks``, the same keys for all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rosetta.runner import clock


@dataclass
class Steps:
    """What one loop measured (seconds)."""

    first_s: float | None = None  # the cold first step, timed and kept apart
    samples: list[float] = field(default_factory=list)  # the sampled steady-state steps
    outputs: list[Any] = field(default_factory=list)  # every step's native output, if kept
    last: Any = None  # the last step's output
    steps: int = 0  # steps taken
    wall_s: float = 0.0  # from the first kept-phase step's start to the final sync


def timed_steps(
    model,
    step: Callable[[Any], Any],
    batches: Iterable,
    n: int | None = None,
    *,
    cold: bool = True,
    discard: int = 0,
    sample_every: int = 1,
    first_step: int = 0,
    fetch_in_clock: bool = False,
    keep_outputs: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Steps:
    """Run ``step`` on up to ``n`` native ``batches`` (all of them for ``None``) and time it.

    With ``cold`` the first step is bracketed by syncs and kept apart (``first_s``: the cold
    start's first step). The next ``discard`` steps are timed the same way and dropped (a
    warm-up). After them a step is sampled (bracketed by syncs, appended to ``samples``) when its
    number, counted from ``first_step`` (an epoch goes on counting its run's steps), satisfies
    ``k % sample_every == 1 % sample_every``: every step for 1, and for a larger n the first warm
    step and every n-th after it, so a short run still samples a warm step. The others flow
    unsynced. ``fetch_in_clock`` takes each batch from the iterator inside the clock (a batch made
    on the fly: the feature and forward passes). The loop ends with one sync on the last output;
    ``progress(k)`` sees the running step number ``first_step + i + 1``."""
    run = Steps()
    it = iter(batches)
    start = None
    i = 0
    while n is None or i < n:
        if not fetch_in_clock:
            try:
                batch = next(it)
            except StopIteration:
                break
        k = first_step + i
        warm_up = cold and i <= discard  # the cold step and the discarded warm-up
        if start is None and not warm_up:
            start = clock.now_ns()
        if warm_up or k % sample_every == 1 % sample_every:
            model.sync()
            if fetch_in_clock:
                out, secs = clock.timed(lambda: step(next(it)), model.sync)
            else:
                out, secs = clock.timed(lambda b=batch: step(b), model.sync)
            if cold and i == 0:
                run.first_s = secs
            elif not warm_up:
                run.samples.append(secs)
        else:
            out = step(next(it) if fetch_in_clock else batch)
        run.last = out
        if keep_outputs:
            run.outputs.append(out)
        i += 1
        if progress:
            progress(first_step + i)
    run.steps = i
    if i:
        model.sync(run.last)
    if start is not None:
        run.wall_s = (clock.now_ns() - start) / 1e9
    return run


def clocks_of(run: Steps, batch_size: int, sample_every: int = 1, **extra: float) -> dict:
    """The record's ``clocks`` for a loop: the cold first step, the steady state's summary and
    raw samples, how they were sampled, ``extra`` (``end_to_end_s`` or ``timed_s``) and the
    throughput at the median step."""
    stats = clock.summarize(run.samples)
    return {
        "first_step_s": run.first_s,
        "steady": stats.as_dict(),
        "steady_raw_s": run.samples,
        "sample_every": sample_every,
        **extra,
        "throughput_samples_per_s": batch_size / stats.median,
    }
