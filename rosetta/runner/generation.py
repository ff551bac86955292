"""A decoder generating: greedy decoding with a KV cache, gated against the float64 reference,
and timed (time to first token, per-token decode latency, tokens per second).

Every backend exposes the same two calls (``Model.prefill``/``Model.decode``, native values in
and out); this module holds the loop, written once:

- :func:`check_request` refuses what cannot run, one line naming the field: zero new tokens, a
  prompt plus its new tokens longer than the model's context (its position table);
- :func:`greedy` is the loop: the prefill gives the first new token, each decode step one more;
- :func:`gate_generation` checks the logits of the prefill and of every decode step against the
  reference's *on the reference's tokens* (each step is fed the reference's previous token, so a
  flipped near tie cannot move every later comparison), at the workload's forward tolerance for
  the dtype, and then runs the backend's own greedy loop: in float64 its tokens must be the
  reference's; in float32 the first position where they differ is reported, with the
  reference's margin there (its top logit minus its second: a near tie flips legitimately);
- :func:`time_generation` times the loop as a user sees it: the prefill up to the first token
  on the host (TTFT), each decode step synced, tokens per second over the whole generation;
- per batch, the memory: the KV cache the work needs, and the process's resident memory before
  and at its peak during that batch's generations (the high-water mark restarted first, so the
  training run before does not hide it; device memory is the cell's, ``metrics.memory``).

Prompts are the same length in a batch by design (windows of the text stream, no padding): a
batch of unequal prompts is refused by the shape of its array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rosetta.backends.base import Model
from rosetta.errors import BackendError
from rosetta.runner import clock
from rosetta.spec.workload import Tolerance, Workload


@dataclass(frozen=True)
class Generation:
    """A greedy generation's new tokens (N, new) and the logits (N, V) that chose each."""

    tokens: np.ndarray
    logits: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class GenerationGate:
    """The generation gate: the worst logit violation over the steps (<= 1 passes, its step),
    and the token agreement of the backend's own greedy loop with the reference's."""

    logits_violation: float
    worst_step: int
    tokens_equal: bool
    first_divergence: int | None  # the first new-token position that differs, or None
    margin_at_divergence: float | None  # the reference's top-1 minus top-2 logit there
    exact_tokens_required: bool  # float64: the tokens must be the reference's

    @property
    def equivalent(self) -> bool:
        """Every step's logits within tolerance, and (float64) the same tokens."""
        ok = self.logits_violation <= 1.0
        return ok and (self.tokens_equal or not self.exact_tokens_required)


@dataclass(frozen=True)
class GenerationTimes:
    """One timed generation: TTFT, each decode step's latency (s), and its throughput."""

    batch: int
    prompt_len: int
    new_tokens: int
    ttft_s: float
    decode_s: tuple[float, ...]

    @property
    def tokens_per_s(self) -> float:
        """New tokens of the whole batch over the generation's wall time (prefill included)."""
        return self.batch * self.new_tokens / (self.ttft_s + sum(self.decode_s))

    def decode_percentile(self, q: float) -> float | None:
        """The ``q``-th percentile of the per-token decode latency (None: one token only)."""
        return float(np.percentile(self.decode_s, q)) if self.decode_s else None


def context_of(workload: Workload) -> int:
    """The positions a decoder can read: its input length (its position table's)."""
    return int(workload.input.shape[0])


def check_request(workload: Workload, prompt_len: int, new_tokens: int) -> None:
    """Refuse, in one line naming the field, a generation the model cannot run."""
    if new_tokens < 1:
        raise BackendError(f"generation new_tokens: {new_tokens}; ask for at least 1 new token")
    if prompt_len < 1:
        raise BackendError(f"generation prompt_len: {prompt_len}; a prompt holds >= 1 token")
    context = context_of(workload)
    if prompt_len + new_tokens > context:
        raise BackendError(
            f"generation prompt_len + new_tokens: {prompt_len} + {new_tokens} > the context "
            f"{context} of workload {workload.name!r} (its position table); shorten either"
        )


def _prompts(prompts: np.ndarray) -> np.ndarray:
    p = np.asarray(prompts)
    if p.ndim != 2 or not np.issubdtype(p.dtype, np.integer):
        raise BackendError(
            f"generation prompts: an int array (N, P) of equal-length prompts, got {p.dtype} "
            f"{p.shape}"
        )
    return p


def greedy(model: Model, prompts: np.ndarray, new_tokens: int, feed=None) -> Generation:
    """``new_tokens`` greedy tokens after ``prompts`` (N, P); ``feed`` (N, new - 1), where
    given, is fed instead of the model's own tokens (the gate's teacher forcing)."""
    prompts = _prompts(prompts)
    check_request(model.workload, prompts.shape[1], new_tokens)
    logits, nxt = model.prefill(prompts)
    steps = [model.to_numpy(logits)]
    tokens = [model.to_numpy(nxt)]
    for i in range(new_tokens - 1):
        logits, nxt = model.decode(nxt if feed is None else feed[:, i])
        steps.append(model.to_numpy(logits))
        tokens.append(model.to_numpy(nxt))
    return Generation(np.stack(tokens, axis=1).astype(np.int64), tuple(steps))


def gate_generation(
    model: Model, reference: Model, prompts: np.ndarray, new_tokens: int, tolerance: Tolerance
) -> GenerationGate:
    """The generation gate (module docstring) of ``model`` against the float64 ``reference``."""
    ref = greedy(reference, prompts, new_tokens)
    forced = greedy(model, prompts, new_tokens, feed=ref.tokens[:, :-1])
    worst, worst_step = 0.0, 0
    for step, (a, b) in enumerate(zip(forced.logits, ref.logits, strict=True)):
        v = tolerance.violation(a, b)
        if not v <= worst:
            worst, worst_step = v, step
    own = greedy(model, prompts, new_tokens)
    differ = np.nonzero((own.tokens != ref.tokens).any(axis=0))[0]
    first = int(differ[0]) if differ.size else None
    margin = None
    if first is not None:
        top2 = np.sort(ref.logits[first], axis=-1)[:, -2:]  # (N, 2)
        margin = float((top2[:, 1] - top2[:, 0]).min())
    return GenerationGate(
        logits_violation=worst,
        worst_step=worst_step,
        tokens_equal=first is None,
        first_divergence=first,
        margin_at_divergence=margin,
        exact_tokens_required=model.dtype == "float64",
    )


def time_generation(model: Model, prompts: np.ndarray, new_tokens: int) -> GenerationTimes:
    """One generation timed as a user sees it: the prefill until the first token is on the
    host (TTFT), then each decode step until its token is (the loop feeds it back natively)."""
    prompts = _prompts(prompts)
    check_request(model.workload, prompts.shape[1], new_tokens)
    t0 = clock.now_ns()
    _, nxt = model.prefill(prompts)
    model.to_numpy(nxt)  # the first token, on the host
    ttft = (clock.now_ns() - t0) / 1e9
    decode = []
    for _ in range(new_tokens - 1):
        t = clock.now_ns()
        _, nxt = model.decode(nxt)
        model.to_numpy(nxt)
        decode.append((clock.now_ns() - t) / 1e9)
    return GenerationTimes(len(prompts), prompts.shape[1], new_tokens, ttft, tuple(decode))


#: timed generations per batch size after one untimed (the first compiles and allocates)
TIMED_GENERATIONS = 3


def kv_cache_bytes(workload: Workload, batch: int, positions: int, dtype: str) -> int:
    """The keys and values a generation must keep: two (N, positions, E) arrays per causal
    attention (what any cache holds for ``positions`` tokens; a static one allocates the
    whole context, so its own allocation can be larger)."""
    from rosetta.spec.graph import walk
    from rosetta.spec.ops import CausalAttention

    widths = [
        in_shape[-1]
        for op, in_shape, _ in walk(workload.graph, workload.input.shape)
        if isinstance(op, CausalAttention)
    ]
    return 2 * batch * positions * sum(widths) * np.dtype(dtype).itemsize


def _status_bytes(field: str) -> int | None:
    """``VmHWM`` or ``VmRSS`` of this process in bytes (Linux ``/proc``), or None elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    """Restart the process's resident-memory high-water mark (Linux: ``clear_refs`` 5), so the
    peak read next is the generation's own, not the training run's before it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _memory(workload: Workload, batch: int, spec, dtype: str, run, model=None) -> dict:
    """Run ``run()`` (one batch size's generations) and the memory it took: the process's
    resident memory before and at its peak during them (None where the peak cannot be
    restarted), the device's peak during them where ``model`` runs on one whose counter it can
    restart (``Model.reset_peak_device_memory``; else None), and the KV cache the work needs
    (:func:`kv_cache_bytes`)."""
    before = _status_bytes("VmRSS")
    windowed = _reset_peak_rss()
    device_windowed = model is not None and model.reset_peak_device_memory()
    run()
    device_peak = model.peak_device_memory_bytes() if device_windowed else None
    return {
        "kv_cache_bytes": kv_cache_bytes(workload, batch, spec.prompt_len + spec.new_tokens, dtype),
        "rss_before_bytes": before,
        "peak_rss_bytes": _status_bytes("VmHWM") if windowed else None,
        "peak_device_bytes": None if device_peak is None else int(device_peak),
    }


def measure(
    model: Model, workload: Workload, spec, prompts_from: np.ndarray, key: str | None = None
) -> dict:
    """A decoder cell's generation figures (``metrics.generation``), after its training run:
    the gate of the trained model against the float64 reference on the same weights (the
    widest batch's prompts), then per batch size ``TIMED_GENERATIONS`` timed generations after
    one untimed; prompts are the first windows of ``prompts_from`` (the test text), cut to
    ``spec.prompt_len``; ``key`` names the tolerance set (the cell's gate's: ``bf16`` under
    mixed precision; default the model's dtype). A backend whose models do not generate gets
    ``skipped`` and why."""
    from rosetta.backends import make, numpy_ref

    if not model.GENERATES:
        return {"skipped": f"backend {model.backend!r} does not generate yet (no KV-cache "
                "decoding: prefill/decode)"}  # fmt: skip
    check_request(workload, spec.prompt_len, spec.new_tokens)
    widest = max(spec.batches)
    if len(prompts_from) < widest:
        raise BackendError(
            f"generation batches: {widest} prompts asked for, the test text has "
            f"{len(prompts_from)} windows; lower the batch or raise test_samples"
        )
    prompts = np.asarray(prompts_from[:widest, : spec.prompt_len])
    reference = make(numpy_ref, workload, model.get_params(), dtype="float64")
    tol = workload.tolerances[key or model.dtype].forward
    gate = gate_generation(model, reference, prompts, spec.new_tokens, tol)
    out = {
        "prompt_len": spec.prompt_len,
        "new_tokens": spec.new_tokens,
        "gate": {
            "equivalent": gate.equivalent,
            "logits_violation": gate.logits_violation,
            "worst_step": gate.worst_step,
            "tokens_equal": gate.tokens_equal,
            "first_divergence": gate.first_divergence,
            "margin_at_divergence": gate.margin_at_divergence,
        },
        "batches": [],
    }
    for b in spec.batches:
        runs: list[GenerationTimes] = []

        def run(b=b, runs=runs) -> None:
            time_generation(model, prompts[:b], spec.new_tokens)  # untimed: allocation, compiles
            runs.extend(time_generation(model, prompts[:b], spec.new_tokens)
                        for _ in range(TIMED_GENERATIONS))  # fmt: skip

        memory = _memory(workload, b, spec, model.dtype, run, model)
        decode = [s for r in runs for s in r.decode_s]
        out["batches"].append({
            "batch": b,
            "ttft_s": float(np.median([r.ttft_s for r in runs])),
            "decode_p50_s": float(np.percentile(decode, 50)) if decode else None,
            "decode_p99_s": float(np.percentile(decode, 99)) if decode else None,
            "tokens_per_s": float(np.median([r.tokens_per_s for r in runs])),
            "memory": memory,
        })  # fmt: skip
    return out
