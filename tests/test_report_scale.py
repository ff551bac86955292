"""Issue 33, item 8 (and item 10's round numbers): ``rosetta report`` names its folder and its
title after the run folders (a copied run never overwrites another run's report, a comparison
of two copies is not ``r4_vs_r4``), says what it is doing on large runs, computes its bootstrap
exactly as before but faster, and numbers rounds as the record files do."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from report_fixtures import CELLS_A, write_rounds_run, write_run

from rosetta.cli import main
from rosetta.report import load
from rosetta.report.stats import _boot_medians
from rosetta.runner import records

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

GRU = {k: v for k, v in CELLS_A.items() if k[0] == "gru"}


def _title(page: str) -> str:
    return page.split("<title>", 1)[1].split("</title>", 1)[0]


def test_a_copied_run_is_reported_under_its_own_folder_name(tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "report"
    write_run(results, "r4", GRU)
    shutil.copytree(results / "r4", results / "r4-copy")  # run.json still says run_id r4
    assert json.loads((results / "r4-copy" / "run.json").read_text())["run_id"] == "r4"
    argv = ["report", "--results-dir", str(results), "--out-dir", str(out)]
    assert main([*argv, "r4"]) == 0
    before = (out / "r4" / "index.html").read_bytes()
    assert main([*argv, "r4-copy"]) == 0
    assert (out / "r4" / "index.html").read_bytes() == before  # not overwritten by the copy
    assert _title((out / "r4-copy" / "index.html").read_text()).endswith(": r4-copy")
    assert main([*argv, "r4", "r4-copy"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out / "r4_vs_r4-copy" / "index.html")
    assert _title((out / "r4_vs_r4-copy" / "index.html").read_text()).endswith(": r4 vs r4-copy")
    assert not (out / "r4_vs_r4").exists()


def test_two_runs_of_one_name_in_two_folders_are_told_apart(tmp_path, capsys):
    write_run(tmp_path / "a", "r4", GRU)
    write_run(tmp_path / "b", "r4", GRU)
    out = tmp_path / "report"
    code = main(["report", "--out-dir", str(out), str(tmp_path / "a" / "r4"),
                 str(tmp_path / "b" / "r4")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert (out / "r4_vs_b-r4" / "index.html").exists()
    a, b = tmp_path / "a" / "r4", tmp_path / "b" / "r4"
    assert load.run_names([a, b, b]) == ["r4", "b-r4", "b-r4-2"]


def test_a_large_run_says_what_the_report_is_doing(tmp_path, capsys, monkeypatch):
    from rosetta.cli import report
    from rosetta.report import frame

    write_run(tmp_path / "results", "run-a", GRU)  # five records
    monkeypatch.setattr(load, "PROGRESS_EVERY", 2)
    monkeypatch.setattr(frame, "PROGRESS_EVERY", 2)
    monkeypatch.setattr(report, "LARGE", 5)
    code = main(["report", "--results-dir", str(tmp_path / "results"), "--out-dir",
                 str(tmp_path / "out"), "run-a"])  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    assert err == [
        "rosetta report: read 2 of 5 records of run-a",
        "rosetta report: read 4 of 5 records of run-a",
        "rosetta report: tabulated 2 of 5 records",
        "rosetta report: tabulated 4 of 5 records",
        "rosetta report: writing the page of 5 records (5 rows)",
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 60, 61, 500])
def test_the_rank_bootstrap_is_numpys_median_of_the_same_draws(n):
    for seed in range(3):
        t = np.random.default_rng(seed + 10).lognormal(size=n)
        if seed == 2:
            t = np.round(t, 1)  # ties
        want = np.median(np.random.default_rng(seed).choice(t, size=(500, n)), axis=1)
        rng = np.random.default_rng(seed)
        got = _boot_medians(t, rng, 500)
        np.testing.assert_array_equal(got, want)
        after = np.random.default_rng(seed)
        after.choice(t, size=(500, n))
        assert rng.random() == after.random()  # the generator left in the same state


def test_rounds_are_numbered_as_their_record_files(tmp_path):
    """Round n is ``__...-rn.json`` on disk, ``"round": n`` in the record, ``round n`` in the
    report and ``rn`` in the bench's summary (all from 0: the first round is round 0)."""
    from rosetta.report.summary import summary

    run = write_rounds_run(tmp_path / "results", "rounds")
    out = tmp_path / "report"
    assert main(["report", "--results-dir", str(tmp_path / "results"), "--out-dir", str(out),
                 "rounds"]) == 0  # fmt: skip
    page = (out / "rounds" / "index.html").read_text()
    lines = summary([records.read_record(p) for p in sorted(run.glob("*__*.json"))]).splitlines()
    for path in run.glob("torch__gru__*.json"):
        n = int(path.stem.rsplit("-r", 1)[1])
        assert json.loads(path.read_text())["point"]["round"] == n
        assert f"torch (round {n})" in page
        named = [ln for ln in lines if ln.split()[:2] == ["gru", "torch"] and f"r{n}" in ln.split()]
        assert len(named) == (1 if n else 0)  # round 0 is the default cell: no suffix
    assert "torch (round 3)" not in page  # three rounds: 0, 1 and 2
