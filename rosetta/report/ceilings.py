"""Where a cell stands: its achieved GFLOP/s against the run's measured ceilings, its roofline
bound, and the fractions other machines reached (:mod:`rosetta.report.references`).

The ceilings come from ``run.json`` (``peaks.ceiling``, :mod:`rosetta.runner.ceiling`): the fp32
FMA kernel, the bf16 dot-product kernel (a bf16 cell without one is held to fp32's), and the
STREAM triad's bandwidth. A run that recorded no ceiling (older runs; the tests' stubbed probes)
falls back to its matmul probe (``peak_gflops``), and says so. GPU cells have no CPU ceiling.

The roofline: a step's arithmetic intensity is its spec FLOPs over the bytes it must move at
least (:mod:`rosetta.spec.traffic`); what the machine allows at that intensity is
``min(ceiling, intensity x bandwidth)``, and a cell is *memory-bound* where the bandwidth's line
is the lower one (intensity below the ridge, ceiling / bandwidth), else *compute-bound*.

Pandas-free: the bench's text summary and the HTML report read the same figures from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rosetta.report.references import Reference, machine_of, reference_for, verdict
from rosetta.spec.facts import TRAIN_FLOP_FACTOR

ABOVE = (
    "above 100%: fewer multiplications than the spec counts (Winograd, FFT), or a ceiling "
    "measured under more load than the cell"
)
PROBE_VERDICT = "not comparable (matmul probe)"  # references are fractions of a measured ceiling
ABOVE_PROBE = (
    "above 100% of a matmul probe: a framework's own kernels can beat the probe's library "
    "(no measured ceiling here)"
)


@dataclass(frozen=True)
class Ceiling:
    """One precision's compute ceiling of a run."""

    precision: str
    gflops: float
    label: str  # what it is, e.g. "fp32 FMA ceiling (fma512, 2 cores)"
    measured: bool  # True: the compiled kernel; False: a matmul probe standing in
    note: str = ""  # why it is the probe, or why bf16 is held to fp32
    cores: int | None = None  # the cores it ran on (the kernel: one thread per usable core)

    @property
    def short(self) -> str:
        """``"FMA"``, ``"dot-product"`` or ``"matmul probe"``, and the cores where scaled."""
        kind = "matmul probe" if not self.measured else "FMA" if self.precision == "fp32" else "dot"
        return f"{self.precision} {kind}" + (", scaled" if "scaled to" in self.label else "")

    def on(self, threads: int | None) -> Ceiling:
        """This ceiling for a cell on ``threads`` of its cores: the measured kernel scaled by
        threads / cores (each core has its own FMA pipes); itself otherwise."""
        if not (self.measured and self.cores and threads and 0 < threads < self.cores):
            return self
        return replace(
            self,
            gflops=self.gflops * threads / self.cores,
            label=f"{self.label}, scaled to {threads} of {self.cores} cores",
        )


@dataclass(frozen=True)
class Ceilings:
    """A run's ceilings: compute per precision and the memory bandwidth."""

    compute: tuple[Ceiling, ...]
    bandwidth_gbs: float | None
    bandwidth_how: str = ""
    #: the machine that measured them (``references.machine_of``): whose reference fractions apply
    machine: dict = field(default_factory=dict)

    def of(self, precision: str) -> Ceiling | None:
        """The ceiling a cell of ``precision`` is held to (bf16 without its own: fp32's)."""
        by = {c.precision: c for c in self.compute}
        return by.get(precision) or by.get("fp32")


def run_ceilings(info: dict, environment: dict | None = None) -> Ceilings:
    """The ceilings recorded in a run's ``run.json`` (``{}`` gives none) and the machine they
    were measured on (``environment``, else ``run.json``'s); every value is checked (the file is
    data: a wrong type is no ceiling, never a crash)."""
    peaks = info.get("peaks") if isinstance(info.get("peaks"), dict) else {}
    rec = peaks.get("ceiling") if isinstance(peaks.get("ceiling"), dict) else {}
    out: list[Ceiling] = []
    measured = rec.get("method") == "fma kernel"
    threads = _num(rec.get("threads"))
    cores = f", {threads:.0f} cores" if threads else ""
    n = int(threads) if threads else None
    fp32 = rec.get("fp32") if isinstance(rec.get("fp32"), dict) else {}
    if measured and _pos(fp32.get("gflops")):
        out.append(
            Ceiling(
                "fp32",
                float(fp32["gflops"]),
                f"fp32 FMA ceiling ({_kernel(fp32)}{cores})",
                True,
                _text(rec.get("warning")),  # a probe that ran on a busy machine says so
                cores=n,
            )
        )
    else:
        probe = _pos(fp32.get("gflops")) or _pos(info.get("peak_gflops"))
        if probe:
            why = _text(rec.get("why")) or "this run recorded no measured ceiling"
            what = _text(fp32.get("what")) or "NumPy 2048x2048 fp32 matmul"
            out.append(Ceiling("fp32", probe, f"fp32 matmul probe ({what})", False, why))
    bf16 = rec.get("bf16") if isinstance(rec.get("bf16"), dict) else {}
    if measured and _pos(bf16.get("gflops")):
        out.append(
            Ceiling(
                "bf16",
                float(bf16["gflops"]),
                f"bf16 dot-product ceiling ({_kernel(bf16)}{cores})",
                True,
                _text(rec.get("warning")),
                cores=n,
            )
        )
    bw = rec.get("bandwidth") if isinstance(rec.get("bandwidth"), dict) else {}
    env = environment if isinstance(environment, dict) and environment else info.get("environment")
    machine = machine_of(env if isinstance(env, dict) else {}, info)
    return Ceilings(tuple(out), _pos(bw.get("gbs")), _text(bw.get("how")), machine)


@dataclass(frozen=True)
class Standing:
    """One cell against the ceilings, the roofline and the reference fractions."""

    gflops: float
    ceiling: Ceiling | None
    fraction: float | None  # of the ceiling
    above: str  # the explanation where ``fraction`` exceeds 1
    intensity: float | None  # spec FLOPs per byte a step must move
    attainable: float | None  # min(ceiling, intensity x bandwidth), GFLOP/s
    bound: str  # "compute" | "memory" | "" (unknown)
    reference: Reference | None
    verdict: str  # "in line", "far below", "above the references", "no reference", ""

    @property
    def of_attainable(self) -> float | None:
        """The achieved rate over what the roofline allows at this intensity."""
        return self.gflops / self.attainable if self.attainable else None


def achieved_gflops(task: str | None, throughput: float | None, flops_per_sample) -> float | None:
    """Spec FLOPs per second: samples/s x forward FLOPs per sample (x 3 for training)."""
    if throughput is None or not flops_per_sample:
        return None
    factor = TRAIN_FLOP_FACTOR if task == "train" else 1
    return throughput * flops_per_sample * factor / 1e9


def standing(
    ceilings: Ceilings,
    *,
    gflops: float,
    workload: str,
    profile: str,
    backend: str,
    precision: str,
    batch: int | None,
    device: str = "cpu",
    threads: int | None = None,
    intensity: float | None = None,
) -> Standing:
    """Where a cell achieving ``gflops`` on ``threads`` threads stands (GPU cells: no CPU
    ceiling, no roofline); ``intensity`` is its step's FLOPs per byte moved, as its record
    states them (``spec.flops_per_step / spec.bytes_per_step``)."""
    on_cpu = not device or device.startswith("cpu")
    ceil = ceilings.of(precision) if on_cpu else None
    ceil = ceil.on(threads) if ceil else None
    fraction = gflops / ceil.gflops if ceil else None
    attainable = None
    bound = ""
    if ceil and intensity and ceilings.bandwidth_gbs and on_cpu:
        memory_roof = intensity * ceilings.bandwidth_gbs
        attainable = min(ceil.gflops, memory_roof)
        bound = "memory" if memory_roof < ceil.gflops else "compute"
    ref = (
        reference_for(workload, backend, precision, batch, machine=ceilings.machine)
        if on_cpu
        else None
    )
    return Standing(
        gflops=gflops,
        ceiling=ceil,
        fraction=fraction,
        above=(ABOVE if ceil.measured else ABOVE_PROBE) if ceil and fraction > 1.0 else "",
        intensity=intensity,
        attainable=attainable,
        bound=bound,
        reference=ref,
        verdict=(verdict(fraction, ref) if ceil.measured else PROBE_VERDICT) if ceil else "",
    )


def _kernel(part: dict) -> str:
    return _text(part.get("kernel")) or "kernel"


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _pos(v: object) -> float | None:
    x = _num(v)
    return x if x is not None and x > 0 else None


def _text(v: object) -> str:
    return str(v).splitlines()[0][:300] if isinstance(v, str) and v.strip() else ""
