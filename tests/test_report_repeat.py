"""A ``ci``-profile run with ``--repeat 2`` through papermill, read back by the report.

Needs ``rosetta bench --repeat`` (the rounds of the matrix); skipped with that reason where the
option is not there yet. Two backends would make a paired ratio; only the reference is sure to
be installed, so the run takes numpy_ref on the gru and the test checks what repetition must
give whatever the backends: one group of two rounds, the cross-round method, the per-round
chart, one headline row."""

from __future__ import annotations

import argparse

import pytest

from rosetta.cli import main

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")
pytest.importorskip("papermill")


def _has_repeat() -> bool:
    from rosetta.cli.bench import add_parser

    sub = argparse.ArgumentParser().add_subparsers()
    add_parser(sub)
    bench = sub.choices["bench"]
    return any("--repeat" in a.option_strings for a in bench._actions)


@pytest.mark.skipif(not _has_repeat(), reason="rosetta bench has no --repeat yet (rounds)")
def test_ci_run_with_two_rounds_through_papermill_is_one_group(tmp_path, small_data):
    from rosetta.report import load_tables, write_report

    results = tmp_path / "results"
    code = main(["bench", "--profile", "ci", "--results-dir", str(results), "--data-dir",
                 str(small_data), "--no-report", "--backends", "numpy_ref", "--workloads", "gru",
                 "--run-id", "rep", "--repeat", "2"])  # fmt: skip
    assert code == 0
    run = results / "rep"
    assert len(list(run.glob("numpy_ref__gru*.ipynb"))) == 2  # one executed notebook per round
    t = load_tables([run])
    assert sorted(t.cells["round"]) == [0, 1]
    (g,) = [g for _, g in t.groups.iterrows()]
    assert g["rounds"] == 2 and g["method"] == "rounds" and len(g["round_medians"]) == 2
    assert g["steady_low"] <= g["steady_median"] <= g["steady_high"]
    html = write_report([run], tmp_path / "rep-report").read_text()
    assert 'id="rounds-gru"' in html and "2 rounds" not in html  # one backend: no verdict line
