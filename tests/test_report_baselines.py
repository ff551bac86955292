"""The fast-path table: each cell's form and the measurement that chose it from its manifest, the
shipped lowered / hand-written ratio of the run's kind of machine (another kind's is named, not
shown as this machine's), over 1.05 marked, the run's own fraction of ceiling; and the refresh
(``benchmarks/baselines.py``) replacing a backend x workload's row of one machine kind, keeping the
rest.
"""

from __future__ import annotations

import json

import pytest
from report_fixtures import write_run
from test_report import Tables as Page

from benchmarks.baselines import entries, merge
from rosetta.report import load_tables, write_report
from rosetta.report.fastpaths import fastpath_rows, form_and_reasons
from rosetta.report.fmt import DASH

pytest.importorskip("jinja2")

CELLS = {
    ("cnn", "torch"): dict(status="ok", step=0.1, e2e=123.45, acc=0.77),
    ("gru", "torch"): dict(status="ok", step=0.02, e2e=45.0, acc=0.86),
    ("cnn", "tensorflow"): dict(status="ok", step=0.1, e2e=120.0, acc=0.77),
}
HERE = {"cpu": "Test EPYC", "family": 25, "isa": ["avx2", "avx512f"]}
OTHER = {"cpu": "Other Xeon", "family": 6, "isa": ["avx2"]}
REASON = "measured: compiled/eager 0.80 [0.78, 0.82] <b>bold</b>"  # markup in a record is text
CEILING = {"method": "fma kernel", "threads": 2,
           "fp32": {"kernel": "fma512", "gflops": 1000.0, "flop_per_cycle": 32.0}}  # fmt: skip


def _record(backend: str, workload: str, ratio: float, low: float, high: float) -> dict:
    """A ``benchmarks/_lowering.py`` record of one workload."""
    return {
        "rows": [
            {"name": f"{workload} lowered/handwritten", "ratio": ratio, "low": low,
             "high": high, "median_a": 0.1 * ratio, "median_b": 0.1, "n": 20},
            {"name": f"{workload} NCHW/lowered", "ratio": 1.3, "low": 1.2, "high": 1.4,
             "median_a": 0.13, "median_b": 0.1, "n": 20},
        ],
        "notes": {"backend": backend, workload: {"batch": 64, "step": "train",
                  "load_before": [0.31, 0.5, 0.6], "of_ceiling_lowered": 0.4,
                  "of_ceiling_handwritten": 0.38}},
    }  # fmt: skip


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """Torch's cnn (1.01) and gru (1.12, over the target) here; tensorflow's cnn elsewhere."""
    doc = merge({}, HERE, entries(_record("torch", "cnn", 1.01, 0.99, 1.03)), "2026-11-28")
    doc = merge(doc, HERE, entries(_record("torch", "gru", 1.12, 1.08, 1.15)), "2026-11-28")
    doc = merge(doc, OTHER, entries(_record("tensorflow", "cnn", 0.95, 0.9, 1.0)), "2026-11-01")
    path = tmp_path_factory.mktemp("baselines") / "baselines.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = write_run(tmp_path_factory.mktemp("results"), "fp", CELLS)
    info = json.loads((d / "run.json").read_text())
    info["peaks"] = {"ceiling": CEILING, "cpu_flags": HERE["isa"]}
    info["environment"] = {**info["environment"], "cpu": HERE["cpu"],
                           "cpu_family": {"family": 25, "model": 17}}  # fmt: skip
    (d / "run.json").write_text(json.dumps(info))
    for rec_path in d.glob("torch__*.json"):
        rec = json.loads(rec_path.read_text())
        rec["manifest"]["fast_path"]["compile_reason"] = REASON
        rec_path.write_text(json.dumps(rec))
    return d


def test_the_refresh_replaces_one_backends_rows_of_one_machine_kind(baselines):
    doc = json.loads(baselines.read_text())
    here, other = doc["machines"]
    assert [(r["backend"], r["workload"]) for r in here["baselines"]] == [
        ("torch", "cnn"), ("torch", "gru")]  # fmt: skip
    again = merge(doc, HERE, entries(_record("torch", "gru", 0.99, 0.97, 1.01)), "2026-11-29")
    rows = {(r["backend"], r["workload"]): r for r in again["machines"][0]["baselines"]}
    assert set(rows) == {("torch", "cnn"), ("torch", "gru")}  # gru's row replaced, cnn's kept
    assert rows[("torch", "gru")]["ratio"] == 0.99 and rows[("torch", "gru")]["load1"] == 0.31
    assert again["machines"][1] == other  # another kind of machine is kept as it was


def test_rows_name_form_reason_ratio_and_ceiling(run, baselines):
    rows = {(r["workload"], r["backend"]): r for r in fastpath_rows(load_tables([run]), baselines)}
    cnn, gru, tf = rows[("cnn", "torch")], rows[("gru", "torch")], rows[("cnn", "tensorflow")]
    assert cnn["form"].startswith("compile: torch-compile; layout: NCHW")
    assert cnn["chosen_by"] == f"compile: {REASON}"
    assert (cnn["ratio"], cnn["over"]) == ("1.01 [0.99, 1.03]", False)
    assert (gru["ratio"], gru["over"]) == ("1.12 [1.08, 1.15]", True)  # over 1.05
    assert "fused_rnn: yes" in gru["form"] and "load 0.31" in gru["where"]
    assert tf["ratio"] == DASH and "0.95 [0.90, 1.00] on Other Xeon family 6" in tf["where"]
    assert tf["chosen_by"] == DASH  # no *_reason recorded
    # the run's own fraction: 64 samples / 0.1 s x the spec's FLOPs x 3 over 1000 GFLOP/s
    assert cnn["of_ceiling"].endswith("(batch 64)") and cnn["hand_of_ceiling"] == "38.0%"


def test_the_table_renders_record_text_as_text(run, tmp_path):
    page = write_report([run], tmp_path / "report").read_text()
    table = Page(page).tables["fastpath-table"]
    assert len(table) == 1 + len(CELLS)
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_form_lists_each_measured_choice_once():
    form, reasons = form_and_reasons(
        {"compile": "jit", "layout": "NHWC", "layout_reason": "NHWC/NCHW 0.9", "attention": "sdpa",
         "fused_rnn": "n/a"}, "transformer")  # fmt: skip
    assert form == "compile: jit; layout: NHWC; attention: sdpa"
    assert reasons == "layout: NHWC/NCHW 0.9"
