"""How the report writes numbers: seconds, milliseconds, percentages, intervals, "-" for none."""

from __future__ import annotations

import math

DASH = "-"
REAL_SOURCES = ("official", "user-provided")


def missing(v: object) -> bool:
    """None, NaN or an empty string."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or v == ""


def _adaptive(v: float, digits: tuple[int, int, int, int]) -> str:
    """Fixed-point with fewer decimals as the number grows (>= 100, >= 10, >= 1, below)."""
    for limit, d in zip((100, 10, 1), digits, strict=False):
        if abs(v) >= limit:
            return f"{v:.{d}f}"
    return f"{v:.{digits[3]}f}"


def fmt_s(v: object) -> str:
    """Seconds for a table: 123.4 / 12.34 / 1.234 / 0.1234."""
    return DASH if missing(v) else _adaptive(float(v), (1, 2, 3, 4))


def fmt_ms(v: object) -> str:
    """A step time given in seconds, shown in milliseconds: 6068 / 452 / 79.4 / 1.23 / 0.123."""
    return DASH if missing(v) else _adaptive(float(v) * 1e3, (0, 1, 2, 3))


def fmt_pct(v: object, digits: int = 1) -> str:
    """A fraction as a percentage."""
    return DASH if missing(v) else f"{float(v) * 100:.{digits}f}%"


def fmt_num(v: object, spec: str = ".3g") -> str:
    """Any number with a format spec; ``inf`` (a non-finite gate error) shown as such."""
    if missing(v):
        return DASH
    return "inf" if math.isinf(float(v)) else format(float(v), spec)


def fmt_interval(v: object, lo: object, hi: object, f=fmt_ms) -> str:
    """``v [lo, hi]`` (``v`` alone where the interval is unknown)."""
    if missing(v):
        return DASH
    if missing(lo) or missing(hi):
        return f(v)
    return f"{f(v)} [{f(lo)}, {f(hi)}]"


def source_mark(source: object) -> str:
    """'real' for the official files, 'real, user-provided' for a user's accepted copy (its
    bytes differ from the official checksum), 'synthetic'/'generated' as recorded."""
    if missing(source):
        return ""
    if source == "user-provided":
        return "real, user-provided"
    return "real" if source in REAL_SOURCES else str(source)
