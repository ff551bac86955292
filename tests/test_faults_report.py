"""Issue 21, item 3: ``rosetta report`` survives any record (mathtext names, 1e308 and inf,
non-UTF-8, deep nesting: each shown as unreadable, the rest rendered), never writes outside
``--out-dir``, links no notebook outside the run, and neutralises CSV injection and terminal
escapes in what it writes and prints."""

from __future__ import annotations

import copy
import csv
import json

import pytest
from report_fixtures import CELLS_A, record, write_run

from rosetta.cli import main
from rosetta.safetext import csv_cell, plain

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

GRU = {k: v for k, v in CELLS_A.items() if k[0] == "gru"}  # five cells: three ok


def _hostile_run(root):
    run = write_run(root, "run-a", GRU)
    ok = record("run-a", "gru", "numpy_ref", GRU[("gru", "numpy_ref")], source="synthetic", seed=0)
    huge = copy.deepcopy(ok)
    huge["backend"] = "huge"
    huge["clocks"]["steady"]["median"] = 1e308
    (run / "huge__gru.json").write_text(json.dumps(huge))
    inf = copy.deepcopy(ok)
    inf["backend"] = "inf"
    inf["clocks"]["steady"]["median"] = float("inf")
    (run / "inf__gru.json").write_text(json.dumps(inf))  # Python writes Infinity: not strict JSON
    math_name = copy.deepcopy(ok)
    math_name["backend"] = r"$\undefinedcommand{x}$"
    (run / "mathtext__gru.json").write_text(json.dumps(math_name))
    (run / "latin1__gru.json").write_bytes(json.dumps(ok).encode().replace(b"smoke", b"sm\xf6ke"))
    (run / "deep__gru.json").write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    escapes = copy.deepcopy(ok)
    escapes.update(backend="esc", status="failed", error="=HYPERLINK(1)\x1b]0;pwned\x07\x1b[31m")
    del escapes["clocks"]
    (run / "esc__gru.json").write_text(json.dumps(escapes))
    outside = copy.deepcopy(ok)
    outside.update(backend="outside", notebook="../../../../etc/passwd")
    (run / "outside__gru.json").write_text(json.dumps(outside))
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "run_id": ".."}))
    return run


def test_hostile_records_are_unreadable_and_the_rest_renders(tmp_path, capsys):
    _hostile_run(tmp_path / "results")
    out = tmp_path / "deep" / "out"
    code = main(["report", "--results-dir", str(tmp_path / "results"), "--out-dir", str(out),
                 "run-a", "--export", "csv"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert not (out.parent / "index.html").exists()  # run_id '..' did not climb out
    page = (out / "run-a" / "index.html").read_text()
    for name in ("huge__gru.json", "inf__gru.json", "mathtext__gru.json", "latin1__gru.json",
                 "deep__gru.json"):  # fmt: skip
        assert f"{name}:" in captured.err, name  # one line each on stderr ...
        assert name in page  # ... and listed in the page
    assert "not a plausible time" in captured.err and "not strict JSON" in captured.err
    assert "not UTF-8" in captured.err and "nested too deeply" in captured.err
    assert "is not a plain name" in captured.err
    assert "Traceback" not in captured.err and "\x1b" not in captured.err + captured.out
    for backend in ("numpy_ref", "torch", "tensorflow"):  # the good cells rendered
        assert backend in page
    assert "passwd" not in page.split("<body", 1)[1].split("href=")[-1]  # no link out of the run
    assert "/etc/passwd" not in page
    assert not list(out.rglob(".*.partial"))
    with open(out / "run-a" / "rosetta.csv", newline="") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert not any(c[:1] in ("=", "+", "-", "@") and not _number(c) for c in cells)


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_report_name_and_run_id_never_leave_the_out_dir(tmp_path, capsys):
    write_run(tmp_path / "results", "run-a", GRU)
    out = tmp_path / "a" / "b" / "out"
    for name in ("../../x", "..", ".hidden", "x/y"):
        code = main(["report", "--results-dir", str(tmp_path / "results"), "--out-dir", str(out),
                     "--name", name, "run-a"])  # fmt: skip
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and "is not a plain folder name" in err[-1], (name, err)
    assert not (tmp_path / "x").exists() and not (tmp_path / "a" / "x").exists()
    assert not any(p.name == "index.html" for p in tmp_path.rglob("*"))


def test_mathtext_in_a_chart_label_is_plain_text():
    from rosetta.report import charts

    plt = charts.pyplot()
    fig, ax = plt.subplots()
    ax.barh([0], [1.0])
    ax.set_yticks([0], [r"$\undefinedcommand{x}$"])  # crashes matplotlib's mathtext parser
    svg = charts.to_svg(fig, "m")
    assert r"\undefinedcommand{x}" in svg


def test_summary_and_csv_neutralise_injection_and_escapes(tmp_path):
    from rosetta.cli.bench import summary, write_csv
    from rosetta.runner import records

    rec = records.make_record(backend="fault", workload="gru", profile="ci", status="failed",
                              error="=cmd|'/c calc'!A1 \x1b]0;title\x07\x1b[2J")  # fmt: skip
    rec["flags"] = ["@SUM(1)", "+1", "-2"]
    text = summary([rec])
    assert "\x1b" not in text and "\x07" not in text and "=cmd" in text
    with open(write_csv([rec], tmp_path / "s.csv"), newline="") as fh:
        row = next(csv.DictReader(fh))
    assert row["error"].startswith("'=cmd") and "\x1b" not in row["error"]
    assert row["flags"].startswith("'@SUM")
    assert csv_cell(-2.5) == -2.5 and csv_cell("-2") == "'-2"  # numbers stay numbers
    assert plain("a\x1b[1mb\x1b[0m\tc\n") == "ab\tc\n"


def test_the_report_writer_leaves_no_partial_file_on_a_full_disk(tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    from rosetta.errors import RosettaError
    from rosetta.report import load_tables
    from rosetta.report.html import write_html

    run = write_run(tmp_path / "results", "run-a", GRU)
    tables = load_tables([run])
    real = Path.write_text

    def full(self, *a, **k):
        if self.name.endswith(".partial"):
            real(self, "<html>half", encoding="utf-8")  # part of it landed, then the disk filled
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(RosettaError, match="No space left on device.*free space"):
        write_html(tables, tmp_path / "out")
    assert not list((tmp_path / "out").iterdir())  # neither index.html nor .partial


@pytest.mark.parametrize(
    "field,values,why",
    [
        ("steady_raw_s", [1e308, 0.1], "clocks.steady_raw_s holds 1e+308"),
        ("losses", [1e308, -1e308], "metrics.losses holds 1e+308"),  # matplotlib: singular matrix
    ],
)
def test_huge_series_are_unreadable_and_the_report_is_written(tmp_path, capsys, field, values, why):
    run = write_run(tmp_path / "results", "run-a", GRU)
    path = run / "torch__gru.json"
    rec = json.loads(path.read_text())
    (rec["clocks"] if field == "steady_raw_s" else rec["metrics"])[field] = values
    path.write_text(json.dumps(rec))
    code = main(["report", "--results-dir", str(tmp_path / "results"), "--out-dir",
                 str(tmp_path / "out"), "run-a"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0 and why in err and "torch__gru.json" in err
    assert (tmp_path / "out" / "run-a" / "index.html").is_file()


def test_a_chart_that_cannot_be_drawn_leaves_the_rest_of_the_page(tmp_path, monkeypatch):
    from rosetta.report import charts, load_tables
    from rosetta.report.html import write_html

    def loss_chart(*args):
        raise ValueError("planted: Singular matrix")

    monkeypatch.setattr(charts, "loss_chart", loss_chart)
    run = write_run(tmp_path / "results", "run-a", GRU)
    page = write_html(load_tables([run]), tmp_path / "out").read_text()
    assert "chart loss_chart not drawn (ValueError: planted: Singular matrix)" in page
    assert "numpy_ref" in page and "<svg" in page  # the step-time charts are still there
