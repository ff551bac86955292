"""Whether this CPU has bfloat16 arithmetic, read from ``/proc/cpuinfo`` (no framework import):
what decides, before any cell runs, whether OpenVINO's bf16 cells run or are skipped."""

from __future__ import annotations

from pathlib import Path

#: CPU flags under which OpenVINO's CPU plugin computes in bfloat16 (AVX-512 BF16, AMX)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The first processor's flags (empty where the file is not there: not Linux)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def has_bf16(flags: set[str] | None = None) -> bool:
    """Whether the CPU computes bfloat16 natively."""
    return any(f in (cpu_flags() if flags is None else flags) for f in BF16_FLAGS)
