"""The report's one ordering of workloads and backends, and each workload's title, from the spec.

Workloads are ordered by their spec's ``order:`` (lower first), then by name; their tables are
captioned with the spec's ``title:``. A workload whose spec cannot be loaded (a record of a
workload that is no longer in the models folder) comes last, titled by its name. Backends come in
registry order (the reference first), then alphabetically. Nothing here imports pandas, so the
bench summary (``rosetta.report.summary``) can use it without the report's extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

UNKNOWN_ORDER = 10**9  # a workload without a loadable spec: after every spec'd one


@lru_cache(maxsize=256)
def _spec_place(workload: str) -> tuple[int, str]:
    from rosetta.errors import RosettaError
    from rosetta.spec import get_workload

    try:
        w = get_workload(workload)
    except RosettaError:
        return UNKNOWN_ORDER, workload
    return w.order, w.title


def workload_key(workload: str) -> tuple[int, str]:
    """Sort key of a workload: (spec ``order``, name)."""
    return _spec_place(str(workload))[0], str(workload)


def workload_title(workload: str) -> str:
    """The spec's ``title`` of a workload (its name where the spec has none or cannot load)."""
    return _spec_place(str(workload))[1]


def workload_order(names: Iterable[str]) -> list[str]:
    """The distinct workloads of ``names`` in the report's order."""
    return sorted({str(n) for n in names}, key=workload_key)


def backend_key(backend: str) -> tuple[int, str]:
    """Sort key of a backend: registry position (the reference first), then name."""
    from rosetta import backends

    reg = backends.names()
    return (reg.index(backend) if backend in reg else len(reg), str(backend))


def backend_order(names: Iterable[str]) -> list[str]:
    """The distinct backends of ``names`` in the report's order (the reference first)."""
    return sorted({str(n) for n in names}, key=backend_key)


def row_key(run_rank: Mapping[str, int], row: Mapping) -> tuple:
    """Sort key of one cell row (a record, a frame row): run (in ``run_rank``'s order), workload,
    backend, then its point (batch, precision, threads) and round where the row has them."""
    point = tuple(
        (v is None or v != v, v if isinstance(v, int | float) and v == v else str(v))
        for v in (row.get("batch_size"), row.get("precision"), row.get("threads"))
    )
    rnd = row.get("round")
    return (
        run_rank.get(row.get("run_id"), 0),
        *workload_key(row["workload"]),
        backend_key(row["backend"]),
        point,
        rnd if isinstance(rnd, int | float) and rnd == rnd else 0,
    )
