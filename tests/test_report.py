"""The report: fixture records -> frames, statistics, tables and the HTML page, numbers asserted."""

from __future__ import annotations

import math
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_fixtures import CELLS_A, EXPECTED, PEAK_GFLOPS, STEPS, write_fixture_runs

from rosetta.errors import RosettaError
from rosetta.spec import get_workload

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

from rosetta.report import (  # noqa: E402
    compare,
    load_tables,
    write_report,
)
from rosetta.report.headline import headlines  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    return write_fixture_runs(root)


@pytest.fixture(scope="module")
def tables_a(runs):
    return load_tables([runs[0]])


@pytest.fixture(scope="module")
def tables_ab(runs):
    return load_tables(list(runs))


class Tables(HTMLParser):
    """Every <table> of a page: id -> rows of cell texts (th and td, whitespace collapsed)."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.links: list[str] = []
        self._stack: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._n = 0
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._n += 1
            self._stack.append(a.get("id") or f"table{self._n}")
            self.tables[self._stack[-1]] = []
        elif tag == "tr" and self._stack:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "a" and "href" in a:
            self.links.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "table" and self._stack:
            self._stack.pop()
        elif tag == "tr" and self._row is not None:
            self.tables[self._stack[-1]].append(self._row)
            self._row = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def row(table: list[list[str]], first: str) -> list[str]:
    return next(r for r in table if r and r[0] == first)


# -- the frame ---------------------------------------------------------------------------------
def test_cells_frame_has_one_row_per_cell_with_the_records_numbers(tables_a):
    c = tables_a.cells
    assert len(c) == len(CELLS_A) == 15
    torch_cnn = c[(c.backend == "torch") & (c.workload == "cnn")].iloc[0]
    assert torch_cnn["end_to_end_s"] == 123.45 and torch_cnn["test_accuracy"] == 0.7712
    assert torch_cnn["steady_median"] == pytest.approx(0.100, rel=1e-12)
    assert torch_cnn["steady_low"] <= 0.100 <= torch_cnn["steady_high"]
    # cold start split: import 0.5, build 0.25 (import_build 0.75), first step 1.25 (cold 2.0)
    assert (torch_cnn["import_s"], torch_cnn["build_s"], torch_cnn["first_step_s"]) == (
        0.5,
        0.25,
        1.25,
    )
    assert torch_cnn["data_source"] == "synthetic" and torch_cnn["device"] == "cpu"
    failed = c[(c.backend == "chainer") & (c.workload == "cnn")].iloc[0]
    assert failed["status"] == "failed" and "out of memory" in failed["error"]
    assert math.isnan(failed["steady_median"])
    assert set(c["status"]) == {"ok", "failed", "timeout", "interrupted", "skipped", "killed"}


def test_efficiency_uses_spec_flops_training_three_times_forward(tables_a):
    c = tables_a.cells.set_index(["workload", "backend"])
    cnn = c.loc[("cnn", "torch")]
    fwd = get_workload("cnn").flops_per_sample((3, 32, 32))
    expected = 64 / cnn["steady_median"] * fwd * 3 / 1e9
    assert cnn["gflops"] == pytest.approx(expected, rel=1e-12)
    assert cnn["peak_fraction"] == pytest.approx(expected / PEAK_GFLOPS, rel=1e-12)
    res = c.loc[("resnet50", "torch")]  # features: forward only
    fwd = get_workload("resnet50").flops_per_sample((3, 224, 224))
    assert res["gflops"] == pytest.approx(32 / res["steady_median"] * fwd / 1e9, rel=1e-12)


def test_tidy_frame_one_row_per_cell_and_measure_and_raw_samples_kept(tables_a):
    t = tables_a.tidy
    key = (t.backend == "torch") & (t.workload == "cnn")
    assert not t[key].duplicated("measure").any()
    steady = t[key & (t.measure == "steady_step_s")].iloc[0]
    assert steady["low"] <= steady["value"] <= steady["high"] and steady["unit"] == "s"
    assert t[key & (t.measure == "end_to_end_s")]["value"].item() == 123.45
    skipped = t[(t.backend == "chainer") & (t.workload == "gru")]
    assert list(skipped["measure"]) == ["status", "wall_s"]  # it keeps its reason and wall time
    assert "not installed" in skipped[skipped.measure == "status"]["note"].item()
    # raw step times and losses stay available for the charts
    s = tables_a.steps
    assert len(s[(s.backend == "torch") & (s.workload == "cnn")]) == STEPS
    losses = tables_a.losses
    assert len(losses[(losses.backend == "torch") & (losses.workload == "gru")]) == 64


# -- statistics (the statistics themselves: tests/test_stats.py) ------------------------------
def test_ratios_to_fastest_ignore_not_equivalent_and_give_no_verdict_on_one_round(tables_a):
    """One round per cell: the ratios are there, their intervals and verdicts are not (the
    verdicts over rounds: tests/test_report_rounds.py)."""
    r = compare.ratios_to_fastest(tables_a)
    cnn = r[r.workload == "cnn"].set_index("backend")
    assert set(cnn["fastest"]) == {"torch"}  # jax is faster but failed the gate
    assert cnn.loc["torch", "verdict"] == "fastest; too few rounds for an interval"
    assert cnn.loc["numpy_ref", "ratio"] == pytest.approx(10.0, rel=1e-9)
    assert math.isnan(cnn.loc["numpy_ref", "low"]) and math.isnan(cnn.loc["numpy_ref", "high"])
    assert not cnn["clear"].any() and not cnn.loc["jax", "equivalent"]
    assert set(cnn.drop(index="torch")["verdict"]) == {"too few rounds for an interval"}
    gru = r[r.workload == "gru"].set_index("backend")
    assert gru.loc["tensorflow", "ratio"] == pytest.approx(1.5, rel=1e-9)
    assert gru.loc["tensorflow", "verdict"] == "too few rounds for an interval"


def test_compare_runs_flags_only_changes_outside_the_noise(tables_ab):
    c, machines = compare.compare_runs(tables_ab, "run-a", "run-b")
    c = c.set_index(["workload", "backend"])
    assert len(c) == 9  # cells timed in both runs
    # the ratio of ratios to the common backend (the reference: same medians in both runs)
    assert set(c["common"]) == {"numpy_ref"}
    assert c.loc[("cnn", "numpy_ref"), "verdict"] == "common backend"
    k, lo, hi = machines  # 8 of 9 cells kept their median, torch's CNN 0.8x
    assert k == pytest.approx(0.8 ** (1 / 9), rel=1e-9) and (lo, hi) == pytest.approx((0.8, 1.0))
    # one round in each run: the ratio of ratios is there, no interval, nothing called changed
    assert c.loc[("cnn", "torch"), "ratio"] == pytest.approx(0.8, rel=1e-9)
    assert c.loc[("cnn", "torch"), "verdict"] == "too few rounds for an interval"
    assert not c["changed"].any()
    assert set(c["verdict"]) == {"too few rounds for an interval", "common backend"}


# -- tables and the page -----------------------------------------------------------------------
def test_headline_tables_numbers_and_marks(tables_a):
    heads = {h.workload: h for h in headlines(tables_a)}
    assert list(heads) == ["cnn", "resnet50", "gru"]
    cnn = dict(heads["cnn"].rows)
    assert heads["cnn"].columns == ("run-a (cpu)",)
    torch = cnn["torch"][0]
    assert (torch.value, torch.accuracy, torch.source, torch.equivalent) == (
        EXPECTED["cnn_torch_time"],
        EXPECTED["cnn_torch_acc"],
        "synthetic",
        True,
    )
    assert cnn["jax"][0].equivalent is False
    assert cnn["chainer"][0].status == "failed"
    res = dict(heads["resnet50"].rows)
    assert res["torch"][0].value == EXPECTED["resnet_torch_per1000"]
    assert res["torch"][0].source == "generated"
    assert res["tensorflow"][0].status == "timeout" and res["jax"][0].status == "interrupted"
    assert list(cnn) == ["numpy_ref", "torch", "tensorflow", "jax", "chainer"]  # registry order


def test_report_html_has_the_tables_numbers(runs, tmp_path):
    path = write_report([runs[0]], tmp_path / "rep")
    assert path == tmp_path / "rep" / "index.html"
    html = path.read_text()
    t = Tables(html)
    cnn = t.tables["headline-cnn"]
    assert row(cnn, "torch")[1:3] == [
        EXPECTED["cnn_torch_time"],
        f"{EXPECTED['cnn_torch_acc']} synthetic",
    ]
    assert row(cnn, "tensorflow")[1] == EXPECTED["cnn_tensorflow_time"]
    assert row(cnn, "jax")[1:3] == [EXPECTED["cnn_jax_time"], "10.4% synthetic not equivalent"]
    assert row(cnn, "chainer")[1] == "failed"
    res = t.tables["headline-resnet50"]
    assert row(res, "numpy_ref")[1] == f"{EXPECTED['resnet_numpy_per1000']} generated"
    assert row(res, "tensorflow")[1] == "timeout" and row(res, "chainer")[1] == "skipped"
    gru = t.tables["headline-gru"]
    assert row(gru, "torch")[1:3] == [
        EXPECTED["gru_torch_time"],
        f"{EXPECTED['gru_torch_acc']} synthetic",
    ]
    assert row(gru, "jax")[1] == "killed"
    # ratio table: one round, so the ratio without an interval and no verdict
    ratios = [r for r in t.tables["ratio-table"] if r[1] == "cnn"]
    assert {r[2]: r[7] for r in ratios}["tensorflow"] == "too few rounds for an interval"
    assert {r[2]: r[6] for r in ratios}["numpy_ref"] == "10.00"
    assert {r[2]: r[5] for r in ratios}["numpy_ref"] == "1"  # one round
    assert {r[2]: r[4] for r in ratios}["numpy_ref"] == "-"  # one round: no rerun interval
    assert {r[2]: r[8] for r in ratios}["numpy_ref"] == "-"  # no "held in" without a verdict
    # equivalence: the failing cell and its worst check
    eq = {(r[1], r[2]): r for r in t.tables["equivalence-table"][1:]}
    assert eq[("cnn", "jax")][3] == "NOT EQUIVALENT" and eq[("cnn", "jax")][6] == "3.25"
    assert eq[("cnn", "jax")][7] == "inf"  # a null violation (nan/inf) is shown as inf
    assert eq[("cnn", "torch")][3:8] == ["pass", "0.02", "0.01", "0.3", "0.2"]
    # every cell that did not finish, with its reason
    probs = {(r[1], r[2]): (r[3], r[4]) for r in t.tables["problem-table"][1:]}
    assert probs[("cnn", "chainer")] == ("failed", "RuntimeError: out of memory in conv2")
    assert probs[("resnet50", "jax")][0] == "interrupted" and len(probs) == 6
    # efficiency: GFLOP/s and share of the run's recorded peak
    eff = {(r[1], r[2]): r for r in t.tables["efficiency-table"][1:]}
    fwd = get_workload("cnn").flops_per_sample((3, 32, 32))
    gf = 64 / 0.100 * fwd * 3 / 1e9
    assert eff[("cnn", "torch")][6] == f"{gf:.3g}"
    assert eff[("cnn", "torch")][7] == f"{gf / PEAK_GFLOPS * 100:.1f}%"
    # charts are inline SVG; nothing points off the page except the notebook links
    # steps, cold start, losses (cnn, gru), rooflines (cnn, gru, resnet50)
    assert html.count("<svg") == 3 + 3 + 2 + 3
    assert "http://" not in html.replace("http://www.w3.org/", "")
    assert "https://" not in html
    assert "<script" not in html and "Content-Security-Policy" in html
    nb = [h for h in t.links if h.endswith(".ipynb")]
    assert len(nb) == 9 - 1  # every ok cell's notebook but the one recorded and missing
    assert all((path.parent / h).resolve().is_file() for h in nb)
    assert "recorded but missing: tensorflow__gru.ipynb" in html
    assert "a_field_from_the_future" not in html  # unknown fields are ignored
    # the runner's noise flag gives way to the report's judgement (1% noise: nothing to flag)
    assert "steady-state CV 14%" not in html
    cond = {(r[1], r[2]): r for r in t.tables["conditions-table"][1:]}
    assert cond[("cnn", "tensorflow")][-1] == "-" and cond[("cnn", "tensorflow")][-2].endswith("%")


def test_two_runs_report_compares_them(runs, tmp_path):
    html = write_report(list(runs), tmp_path / "cmp").read_text()
    t = Tables(html)
    cmp = {(r[0], r[1]): r for r in t.tables["compare-1"][1:]}
    assert cmp[("cnn", "torch")][2] == "numpy_ref"  # relative to the common backend
    assert cmp[("cnn", "torch")][5] == "0.80"  # one round each: no interval, no verdict
    assert cmp[("cnn", "torch")][6] == "too few rounds for an interval"
    assert cmp[("cnn", "numpy_ref")][6] == "common backend"
    assert "<strong>0 of 6</strong>" in html  # 9 cells in both runs, 3 of them the common one
    assert "the machines differ by 0.98x" in html
    cnn = t.tables["headline-cnn"]
    assert cnn[0][1:] == ["run-a (cpu)", "run-b (cpu)"]
    assert row(cnn, "torch")[1:5] == ["123.5", "77.1% synthetic", "99.87", "77.3% real"]


# -- bad input -------------------------------------------------------------------------------
def _run_cli(*argv: str, capsys) -> tuple[int, str, str]:
    from rosetta.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_empty_results_directory_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    code, out, err = _run_cli(
        "report",
        "--results-dir",
        str(tmp_path / "results"),
        "--out-dir",
        str(tmp_path),
        capsys=capsys,
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no runs in" in err and "rosetta bench" in err


def test_unknown_run_id_is_one_clear_line(runs, tmp_path, capsys):
    results = runs[0].parent
    code, _, err = _run_cli(
        "report", "nope", "--results-dir", str(results), "--out-dir", str(tmp_path), capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1 and "run 'nope' does not exist" in err
    # next to a real run: one line, and the report is still written
    code, out, err = _run_cli(
        "report",
        "run-a",
        "nope",
        "--results-dir",
        str(results),
        "--out-dir",
        str(tmp_path),
        capsys=capsys,
    )
    assert code == 0 and err.count("\n") == 1 and "'nope' does not exist" in err
    index = Path(out.strip())
    assert index == tmp_path / "run-a" / "index.html" and index.is_file()
    assert "nope" in index.read_text()  # listed in the page's problems too


def test_unknown_schema_and_truncated_record_are_one_line_each_rest_still_written(
    runs, tmp_path, capsys
):
    import shutil

    run = tmp_path / "results" / "bad-run"
    shutil.copytree(runs[0], run)
    text = (run / "torch__cnn.json").read_text()
    (run / "torch__cnn.json").write_text(text[: len(text) // 2])  # truncated mid-write
    future = (
        (run / "torch__gru.json")
        .read_text()
        .replace('"schema_version": 2', '"schema_version": 7', 1)
    )
    (run / "torch__gru.json").write_text(future)
    code, out, err = _run_cli(
        "report",
        "bad-run",
        "--results-dir",
        str(tmp_path / "results"),
        "--out-dir",
        str(tmp_path / "rep"),
        capsys=capsys,
    )
    lines = err.strip().splitlines()
    assert code == 0 and len(lines) == 2
    assert "torch__cnn.json: truncated" in lines[0] and "cell left out" in lines[0]
    assert "torch__gru.json: schema_version 7 is not one this report reads" in lines[1]
    html = Path(out.strip()).read_text()
    t = Tables(html)
    assert row(t.tables["headline-cnn"], "tensorflow")[1] == EXPECTED["cnn_tensorflow_time"]
    assert row(t.tables["headline-cnn"], "torch")[1] == "unreadable"  # shown, without a number
    assert "schema_version 7" in html and "truncated" in html


def test_minimal_non_ok_record_and_nothing_readable(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "torch__gru.json").write_text(
        '{"schema_version": 2, "run_id": "r", "backend": "torch", "workload": "gru",'
        ' "profile": "ci", "status": "interrupted", "error": "stopped"}'
    )
    html = write_report([run], tmp_path / "out").read_text()
    assert row(Tables(html).tables["headline-gru"], "torch")[1] == "interrupted"
    (run / "torch__gru.json").write_text("{")
    with pytest.raises(RosettaError, match="nothing to report.*truncated"):
        write_report([run], tmp_path / "out2")


def test_export_csv_round_trips_the_tidy_frame(runs, tmp_path, capsys):
    code, out, _ = _run_cli(
        "report",
        "run-a",
        "--results-dir",
        str(runs[0].parent),
        "--out-dir",
        str(tmp_path),
        "--export",
        "csv",
        capsys=capsys,
    )
    html, csv = (Path(p) for p in out.split())
    assert code == 0 and html.name == "index.html" and csv.name == "rosetta.csv"
    frame = pd.read_csv(csv)
    sel = frame[(frame.backend == "torch") & (frame.workload == "cnn")]
    assert sel[sel.measure == "end_to_end_s"]["value"].item() == 123.45
    assert set(frame.columns) >= {"run_id", "measure", "value", "low", "high", "unit"}


def test_export_parquet_writes_or_names_the_missing_engine(runs, tmp_path, capsys):
    code, out, err = _run_cli(
        "report",
        "run-a",
        "--results-dir",
        str(runs[0].parent),
        "--out-dir",
        str(tmp_path),
        "--export",
        "parquet",
        capsys=capsys,
    )
    try:
        import pyarrow  # noqa: F401

        have_engine = True
    except ImportError:
        have_engine = False
    if have_engine:
        assert code == 0 and pd.read_parquet(out.split()[1]).shape[0] > 0
    else:
        assert code == 2 and err.count("\n") == 1 and "pyarrow" in err
        assert (tmp_path / "run-a" / "index.html").is_file()  # the HTML was still written


def test_rosetta_list_does_not_import_the_report_libraries():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from rosetta.cli import main\n"
        "main(['list'])\n"
        "libs = ('pandas', 'matplotlib', 'jinja2')\n"
        "print('IMPORTED:' + ','.join(m for m in libs if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "IMPORTED:"


def test_no_run_id_reports_the_newest_run(runs, tmp_path, capsys):
    import os
    import shutil

    results = tmp_path / "results"
    for i, run in enumerate(runs):  # run-b made later than run-a, whatever the copy order
        shutil.copytree(run, results / run.name)
        os.utime(results / run.name / "run.json", (1_000_000 + i, 1_000_000 + i))
    (results / "not-a-run").mkdir()  # a stray folder is not a run
    code, out, _ = _run_cli(
        "report", "--results-dir", str(results), "--out-dir", str(tmp_path / "rep"), capsys=capsys
    )
    assert code == 0 and Path(out.strip()) == tmp_path / "rep" / "run-b" / "index.html"
    code, out, _ = _run_cli(
        "report",
        "run-a",
        "run-b",
        "--results-dir",
        str(results),
        "--out-dir",
        str(tmp_path / "rep"),
        capsys=capsys,
    )
    assert Path(out.strip()) == tmp_path / "rep" / "run-a_vs_run-b" / "index.html"


def test_the_report_reads_the_spec_facts_its_record_states_not_the_current_yaml(tmp_path):
    """A record's ``spec`` is the spec as it ran: an edit of the YAML afterwards (planted here as
    FLOPs the current cnn.yaml does not have) never changes the old run's GFLOP/s, and the
    cold start's parts and the flag codes are read as recorded."""
    from rosetta.report.frame import cell_row
    from rosetta.report.load import Run
    from rosetta.runner import records
    from tests.report_fixtures import CELLS_A, record

    rec = records.migrate(
        record("r", "cnn", "torch", CELLS_A[("cnn", "torch")], source="synthetic", seed=1)
    )
    planted = {**rec["spec"], "flops_per_sample": 10**9, "profile_batch": 50}
    rec = {**rec, "spec": planted, "flag_codes": ["noisy"], "flags": ["steady-state spread 40%"]}
    rec["clocks"] = {**rec["clocks"], "first_step_s": 0.125, "build_s": 0.5}
    row = cell_row(Run("r", tmp_path, {}, (rec,)), rec)
    assert row["flops_per_sample"] == 10**9 and row["profile_batch"] == 50
    assert row["gflops"] == pytest.approx(3 * 10**9 * row["throughput"] / 1e9)  # training: 3x
    assert row["first_step_s"] == 0.125 and row["build_s"] == 0.5
    assert row["flag_list"] == (("noisy", "steady-state spread 40%"),)
