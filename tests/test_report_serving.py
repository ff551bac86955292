"""The report's serving view: batch-1 latency and throughput per backend, with its program named,
the engine's version and its settings, read from the records (text escaped, never markup)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pandas")
pytest.importorskip("jinja2")

from rosetta.report import load_tables, write_report  # noqa: E402
from rosetta.report.serving import serving_rows  # noqa: E402
from tests.report_fixtures import write_fixture_runs  # noqa: E402


def _add_latency(path, p50, what, settings=None):
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok"
    rec["metrics"]["latency"] = {"batch": 1, "n": 200, "p50": p50, "p90": p50 * 1.2,
                                 "p99": p50 * 1.5, "raw_s": [p50] * 200}  # fmt: skip
    rec["metrics"]["throughput_at_batch"] = {"batch": 32, "samples_per_s": 123.4, "what": what}
    rec["manifest"]["backend_versions"] = {"engine": "9.1", "numpy": "2.0"}
    if settings:
        rec["manifest"]["fast_path"]["engine_settings"] = settings
    path.write_text(json.dumps(rec))


def test_serving_rows_and_the_section(tmp_path):
    first, _ = write_fixture_runs(tmp_path / "results")
    oks = sorted(
        p for p in first.glob("*.json")
        if p.name != "run.json" and json.loads(p.read_text()).get("status") == "ok"
    )  # fmt: skip
    by_workload = {}
    for p in oks:
        by_workload.setdefault(json.loads(p.read_text())["workload"], []).append(p)
    slow, fast = by_workload["resnet50"][:2]
    train = by_workload["cnn"][0]
    _add_latency(slow, 0.050, "predict", {"PERFORMANCE_HINT": "<b>LATENCY</b>"})
    _add_latency(fast, 0.010, "predict", {"intra_op_num_threads": 2})
    _add_latency(train, 0.020, "train step")
    rows = serving_rows(load_tables([first]))
    assert [(r["workload"], r["p50"], r["what"]) for r in rows] == [
        ("cnn", "20.0", "train step"),
        ("resnet50", "10.0", "predict"),
        ("resnet50", "50.0", "predict"),
    ]  # the report's workload order, then the fastest request first
    assert rows[2]["p99"] == "75.0" and rows[2]["versions"] == "engine 9.1"
    assert rows[1]["settings"] == "intra_op_num_threads=2"
    index = write_report([first], tmp_path / "report").read_text()
    section = index[index.index('<section id="serving">') :]
    section = section[: section.index("</section>")]
    assert section.count("<tr>") == 4  # the header and the three rows
    assert "&lt;b&gt;LATENCY&lt;/b&gt;" in section and "<b>LATENCY" not in section
