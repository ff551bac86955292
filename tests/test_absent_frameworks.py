"""The frameworks of the older comparisons that cannot run here: ``rosetta list`` shows each one
with its reason (through the command a user types), and the README's table says the same, from
the one table in ``rosetta/backends/absent.py``."""

from __future__ import annotations

from rosetta import backends
from rosetta.backends.absent import ABSENT
from rosetta.cli import main
from rosetta.runtime import package_root


def test_rosetta_list_shows_every_absent_framework_with_its_reason(capsys):
    main(["list"])
    out = capsys.readouterr().out
    _, heading, section = out.partition("Frameworks of the older comparisons that cannot run here:")
    assert heading, out
    section = section.split("Executors")[0]
    for row in ABSENT:
        line = next((ln for ln in section.splitlines() if ln.split()[:1] == [row.name]), "")
        assert row.framework in line and row.reason in line, (row.name, section)
    assert len(section.strip().splitlines()) == len(ABSENT)


def test_an_absent_framework_is_not_also_a_backend():
    """A framework that gained a backend folder leaves the table (it cannot be both)."""
    assert not {row.name for row in ABSENT} & set(backends.names())


def test_the_readme_table_says_what_the_data_says():
    readme = (package_root() / "README.md").read_text(encoding="utf-8")
    for row in ABSENT:
        assert f"| `{row.name}` | {row.framework} | {row.reason} |" in readme, row.name
