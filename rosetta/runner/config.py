"""One cell's configuration: a frozen value passed whole to the child process (as JSON).

The matrix builds one ``CellConfig`` per (backend, workload) and hands it to the child as a
single JSON argument, so a new option is one field here instead of a flag copied through every
signature between the CLI and the measurement.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from rosetta.errors import RosettaError

#: fields that do not change what the gate checks (``CellConfig.gate_identity``)
_NOT_GATED = frozenset(
    {
        "batch_size",
        "threads",
        "round",
        "out",
        "run_id",
        "gate_from",
        "gate_sha256",
        "sample_every",
        "data_source",
        "latency",
        "kind",
        "timing_steps",
        "timing_warmup",
    }
)
#: what a cell measures: the training run (round 0: all the profile's epochs or batches, end to
#: end, accuracy, losses) or a timing round (rounds >= 1: a fixed number of steps, nothing else)
KINDS = ("training", "timing")


@dataclass(frozen=True)
class CellConfig:
    """Everything one cell needs: what to run, where, and where its record goes."""

    backend: str
    workload: str
    profile: str = "ci"
    run_id: str = "adhoc"
    out: str = ""  # the record's path ("" = return it without writing)
    data_dir: str | None = None
    dtype: str = "float32"
    device: str = "auto"  # cpu | cuda | auto: a request, resolved once by the cell (Runtime)
    seed: int = 0  # weights, sample order and dropout, in every backend
    threads: int | None = None  # None: all usable cores (the Runtime records the number)
    # the backend's framework settings asked for, by name (rosetta.backends.options: opaque
    # here, checked by the backend's declaration; the runtime in effect holds every one)
    options: dict[str, str] = field(default_factory=dict)
    # the lane: "fast" (Rosetta's fast path) or "default" (the framework's own plain defaults:
    # its package's LANES["default"] options, merged into ``options`` by the plan)
    lane: str = "fast"
    precision: str = "fp32"  # numeric policy (rosetta.runtime.PRECISIONS)
    tf32: bool = False  # allow TF32 on CUDA (recorded; refused on the CPU)
    sample_every: int | None = None  # steady state: time every n-th step (None: 1 CPU, 4 CUDA)
    data_source: str = ""  # what bench verified before the run (for records of failed cells)
    batch_size: int | None = None  # None: the profile's batch size (a sweep axis otherwise)
    round: int = 0  # repetition round, 0-based (each round runs every cell once)
    kind: str = "training"  # KINDS: round 0 is the training run, rounds >= 1 timing rounds
    timing_steps: int = 0  # a timing round: steps timed after its first step and the warm-up
    timing_warmup: int = 0  # a timing round: untimed steps after its first (cold) one
    latency: bool = True  # measure batch-1 latency in round 0 (bench: once per function, threads)
    gate_from: str = ""  # a record of this run whose passing gate this cell reuses ("": gate here)
    gate_sha256: str = ""  # that record's sha256 when the run read it: any other bytes gate here

    def to_json(self) -> str:
        """The config as one JSON string (what the child receives)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CellConfig:
        """Parse ``to_json``'s output; unknown or missing fields are a one-line error."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RosettaError(f"cell config is not valid JSON ({exc})") from None
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise RosettaError(f"cell config has unknown fields {unknown}; valid: {sorted(known)}")
        config = cls(**raw)
        config.check_kind()
        return config

    def check_kind(self) -> None:
        """A kind this runner knows, and a timing round with at least one timed step."""
        if self.kind not in KINDS:
            valid = ", ".join(KINDS)
            raise RosettaError(f"cell config: unknown kind {str(self.kind)[:40]!r}; valid: {valid}")
        if self.kind == "timing" and not (
            isinstance(self.timing_steps, int) and self.timing_steps >= 1
            and isinstance(self.timing_warmup, int) and self.timing_warmup >= 0
        ):  # fmt: skip
            raise RosettaError(
                f"cell config: a timing round needs timing_steps >= 1 and timing_warmup >= 0, "
                f"got {self.timing_steps!r} and {self.timing_warmup!r}"
            )

    def precision_unsupported(self) -> str:
        """Why this cell's backend cannot run its precision on its device, or ``""``
        (``rosetta.backends.precision_unsupported``: the one place that decides)."""
        from rosetta import backends

        return backends.precision_unsupported(self.backend, self.precision, self.device, self.dtype)

    def unsupported(self) -> str:
        """Why this cell does not run here, or ``""``: a dtype its backend does not run, a
        precision it does not run on its device (:meth:`precision_unsupported`), or an op of the
        workload its backend's op table does not lower yet. The matrix
        skips such a cell. (A training workload on a forward-only backend, a serving engine, is
        not skipped: the cell gates and times its forward pass, ``Cell._forward``.)"""
        from rosetta import backends
        from rosetta.spec import get_workload

        return (
            backends.dtype_unsupported(self.backend, self.dtype)
            or self.precision_unsupported()
            or backends.lowering_unsupported(self.backend, get_workload(self.workload))
        )

    def runtime_request(self):
        """The ``Runtime`` this config asks for (validated: bad values are one line, and so is a
        precision the backend does not run, so that no cell computes fp32 while claiming bf16)."""
        from rosetta.errors import BackendError
        from rosetta.runtime import Runtime

        why = self.precision_unsupported()
        if why:
            raise BackendError(f"{why}; run it with --precisions fp32")
        why = self.unsupported()
        if why:
            raise BackendError(why)
        return Runtime.request(
            self.backend,
            device=self.device,
            threads=self.threads,
            dtype=self.dtype,
            precision=self.precision,
            tf32=self.tf32,
            seed=self.seed,
            options=self.options,
        )

    def gate_identity(self) -> tuple:
        """What fixes the function the gate checks: every field but the point's batch size,
        threads and round (the gate runs its own fixed batch through the same step, so those
        change the timing, not the function) and the bookkeeping ones. Two cells of one run
        with the same identity gate the same program; ``rosetta bench`` gates it once."""
        d = {**self.as_dict(), "options": tuple(sorted(self.options.items()))}
        return tuple((k, d[k]) for k in sorted(d) if k not in _NOT_GATED)

    def as_dict(self) -> dict:
        """Plain-dict form for the record."""
        return asdict(self)
