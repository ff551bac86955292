"""Issue 21, item 4: ``bench --resume`` survives crafted records. An ok record without clocks, a
string median or an integer workload is one line naming the file (the record is set aside to
``attempts/`` and the cell runs again), never a ``KeyError``/``TypeError``."""

from __future__ import annotations

import json

import pytest

from rosetta.cli import main
from rosetta.errors import RosettaError
from rosetta.runner import records


def _ok_record() -> dict:
    return records.make_record(
        backend="numpy_ref", workload="gru", profile="ci", status="ok",
        clocks={"cold_start_s": 1.0, "end_to_end_s": 3.0,
                "steady": {"median": 0.1, "ci95_low": 0.09, "ci95_high": 0.11}},
        equivalence={"equivalent": True}, metrics={"test_accuracy": 0.5},
    )  # fmt: skip


CRAFTED = {
    "ok without clocks": (lambda r: r.pop("clocks"), "no clocks"),
    "string median": (lambda r: r["clocks"]["steady"].update(median="fast"), "median is str"),
    "integer workload": (lambda r: r.update(workload=7), "workload is int"),
    "median 1e308": (lambda r: r["clocks"]["steady"].update(median=1e308), "not a plausible"),
    "no verdict": (lambda r: r.pop("equivalence"), "no equivalence verdict"),
    "flags a string": (lambda r: r.update(flags="x"), "flags is not a list"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_record_is_one_line_naming_the_file(tmp_path, case):
    craft, why = CRAFTED[case]
    path = tmp_path / "numpy_ref__gru.json"
    good = _ok_record()
    path.write_text(json.dumps(good))
    assert records.read_record(path)["status"] == "ok"  # the uncrafted record reads
    rec = _ok_record()
    craft(rec)
    path.write_text(json.dumps(rec))
    with pytest.raises(RosettaError) as info:
        records.read_record(path)
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"{path}: malformed record (") and why in line


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_resume_over_a_crafted_record_sets_it_aside_and_completes(tmp_path, small_data, capsys):
    argv = ["bench", "--profile", "ci", "--results-dir", str(tmp_path / "results"), "--data-dir",
            str(small_data), "--no-report", "--executor", "python", "--backends", "numpy_ref",
            "--workloads", "gru"]  # fmt: skip
    assert main([*argv, "--run-id", "c"]) == 0
    path = tmp_path / "results" / "c" / "numpy_ref__gru.json"
    rec = json.loads(path.read_text())
    rec["clocks"]["steady"]["median"] = "0.1"  # a string median
    path.unlink()
    path.write_text(json.dumps(rec))
    capsys.readouterr()
    assert main([*argv, "--resume", "c"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if str(path) in line]
    assert len(notes) == 1 and "clocks.steady.median is str" in notes[0], captured.err
    assert "Traceback" not in captured.err
    assert json.loads(path.read_text())["clocks"]["steady"]["median"] > 0  # measured again
    assert list((path.parent / "attempts").glob("numpy_ref__gru.corrupt.*.json"))
