"""The report shows the gate's per-op drift as a heat map (ops x backends) and the float64 gate
as a column, from real records: drift visible even where everything passes."""

from __future__ import annotations

import json

from rosetta.report import load_tables, write_report
from rosetta.report.sections import drift_class
from rosetta.runner import records
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig


def test_drift_heat_map_and_float64_column_from_real_records(tmp_path, small_data):
    run = tmp_path / "results" / "r1"
    for backend in ("numpy_ref", "torch"):
        rec = run_cell(CellConfig(backend, "gru", "ci", run_id="r1", data_dir=str(small_data)))
        records.write_record(run / f"{backend}__gru.json", json.loads(records.dumps(rec)))
        drift = {d["op"]: d["violation"] for d in rec["equivalence"]["drift"]}
        assert set(drift) == {"embedding", "gru", "fc"}  # every parameterised op, by name
        assert all(0 <= v <= 1 for v in drift.values())  # passing: within the bound
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "profile": "ci"}))
    cells = load_tables([run]).cells
    assert cells["violation_float64"].notna().all()  # the float64 gate ran for training cells
    page = (write_report([run], tmp_path / "report")).read_text()
    assert 'id="drift-gru"' in page
    table = page[page.index('id="drift-gru"') :].split("</table>")[0]
    for op in ("embedding", "gru", "fc"):
        assert f"<td>{op}</td>" in table
    assert table.count('class="num drift') == 6  # 3 ops x 2 backends


def test_drift_classes_are_decades_up_to_the_bound():
    assert [drift_class(v) for v in (0, 5e-4, 5e-3, 0.05, 0.5, 1.0, 3.0)] == [
        "drift0", "drift1", "drift2", "drift3", "drift4", "drift4", "drift5"
    ]  # fmt: skip
    assert drift_class(None) == "drift-na" and drift_class(float("nan")) == "drift-na"
