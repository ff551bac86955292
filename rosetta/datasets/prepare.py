"""Before a run: make sure every data set a run needs is there, and say which source runs.

Only the default data directory (``<repo root>/data``) is filled with synthetic data
automatically. A directory named explicitly (``--data-dir`` or ``$ROSETTA_DATA_DIR``) that
lacks a data set is an error naming the fix: a mistyped path must never turn into a quiet
benchmark on synthetic data in a freshly created folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from rosetta.datasets import registry
from rosetta.datasets.checksums import GENERATED
from rosetta.datasets.paths import ENV_VAR, remove_stale_temps, repo_root, resolve_data_dir
from rosetta.errors import DataError


def is_default_data_dir(data_dir: str | os.PathLike[str] | None) -> bool:
    """True if ``data_dir`` resolves to ``<repo root>/data`` (whatever named it)."""
    return resolve_data_dir(data_dir) == (repo_root() / "data").absolute()


def prepare_data(
    datasets: Iterable[str],
    data_dir: str | os.PathLike[str] | None,
    *,
    say: Callable[[str], None] = print,
) -> dict[str, str]:
    """Verify (or, in the default data dir only, synthesise) each data set; return its source.

    Returns ``{dataset: source}`` with source ``official`` | ``user-provided`` | ``synthetic`` |
    ``generated`` and prints one line per data set with ``say``. Raises one-line ``DataError``
    for a missing data set in an explicit directory, or a file that fails verification."""
    folder = resolve_data_dir(data_dir)
    if folder.is_dir():
        remove_stale_temps(folder)
    sources: dict[str, str] = {}
    for name in dict.fromkeys(datasets):
        entry = registry.get(name)
        if entry.generated:
            sources[name] = GENERATED
            say(f"data: {name} {GENERATED} ({entry.description})")
            continue
        path = entry.present(folder)
        if path is None:
            if not is_default_data_dir(folder):
                named = "--data-dir" if data_dir is not None else f"${ENV_VAR}"
                raise DataError(
                    f"no {entry.title} in {folder} (named by {named}; only the default data "
                    f"directory is filled with synthetic data automatically): "
                    f"{entry.remote.hint(folder) if entry.remote else ''}"
                )
            say(
                f"no {entry.title} found in {folder}: writing the synthetic one (real data: "
                "`rosetta data fetch`, or your own copy: `rosetta data accept PATH`)"
            )
            assert entry.synthesize is not None
            entry.synthesize(folder)
            path = entry.present(folder)
        assert path is not None and entry.verify is not None
        ver = entry.verify(path)
        sources[name] = ver.source
        say(f"data: {name} {ver.source} ({path}, {ver.algorithm} {ver.digest})")
    return sources
