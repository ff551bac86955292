"""A run spanning several machines: groups, ratios and headlines per machine, a Machines section.

The planted run: three rounds of the cnn and the gru. On node-a torch's cnn runs every round and
tensorflow's cnn rounds 1-2, 10% behind torch; tensorflow's third cnn round ran on node-b, twice
as fast (a faster machine). The gru's torch ran only on node-a and its tensorflow only on node-b.
Mixing machines would pull tensorflow's cnn ahead and give the gru a ratio; the report must do
neither.
"""

from __future__ import annotations

import json
import socket

import pytest
from report_fixtures import (
    BATCH,
    ROUND_CELLS,
    ROUND_DRIFT,
    _run_dir,
    record,
    write_point_record,
    write_rounds_run,
)
from test_report import Tables

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

from rosetta.report import compare, load_tables, write_report  # noqa: E402
from rosetta.report.headline import APART, headlines  # noqa: E402
from rosetta.report.html import lede  # noqa: E402
from rosetta.report.sections import machine_rows, ratio_rows  # noqa: E402

NODE_A = {"hostname": "node-a", "cpu": "Alpha CPU 1", "cpu_count": 8, "load_avg": [1.5, 1, 1]}
NODE_B = {
    "hostname": "node-b",
    "cpu": "Beta CPU 2",
    "cpu_count": 16,
    "load_avg": [0.25, 0, 0],
    "gpu": {"gpus": [{"name": "Test GPU 7", "driver": "1", "memory": "1 MiB"}]},
}
FASTER_B = 0.5  # node-b's step time relative to node-a's


def _where(workload: str, backend: str, rnd: int) -> dict:
    """The planted placement (see the module docstring)."""
    if backend == "tensorflow" and (workload == "gru" or rnd == 2):
        return NODE_B
    return NODE_A


def _write(results, run_id: str, place) -> object:
    """``ROUND_CELLS`` (torch and tensorflow) over three rounds, each record's ``manifest.node``
    from ``place(workload, backend, round)`` (None: no node, as old records), node-b's steps
    scaled by ``FASTER_B``."""
    run_dir = _run_dir(results, run_id, len(ROUND_DRIFT))
    cells = {k: v for k, v in ROUND_CELLS.items() if k[1] != "numpy_ref"}
    for rnd, drift in enumerate(ROUND_DRIFT):
        for i, ((w, b), spec) in enumerate(cells.items()):
            rec = record(run_id, w, b, spec, source="synthetic", seed=100 * rnd + i)
            node = place(w, b, rnd)
            if node is not None:
                rec["manifest"]["node"] = dict(node)
            speed = FASTER_B if node is NODE_B else 1.0
            write_point_record(
                run_dir,
                rec,
                rnd=rnd,
                batch=BATCH[w],
                precision="fp32",
                threads=2,
                drift=drift * speed,
            )
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("machines")
    return {
        "span": _write(root, "span", _where),
        "span2": _write(root, "span2", _where),
        # the same run written twice (same id): once naming node-a, once as old records did
        "one": _write(root / "one", "solo", lambda w, b, r: NODE_A),
        "old": _write(root / "old", "solo", lambda w, b, r: None),
    }


def test_cells_name_their_machine_and_groups_split_by_it(runs):
    t = load_tables([runs["span"]])
    assert set(t.cells["machine"]) == {"node-a", "node-b"}
    g = t.groups[t.groups["workload"] == "cnn"].set_index(["backend", "machine"])
    assert sorted(g.index) == [
        ("tensorflow", "node-a"),
        ("tensorflow", "node-b"),
        ("torch", "node-a"),
    ]
    assert g.loc[("tensorflow", "node-a"), "rounds"] == 2
    assert g.loc[("tensorflow", "node-b"), "rounds"] == 1
    for _, grp in t.groups.iterrows():  # no group holds cells of two machines
        assert t.cells.loc[grp["cells"], "machine"].nunique() == 1


def test_no_ratio_between_machines_and_the_faster_machine_changes_nothing(runs):
    t = load_tables([runs["span"]])
    r = compare.ratios_to_fastest(t)
    groups = t.groups.set_index(["workload", "backend", "machine"])
    for _, x in r.iterrows():  # both sides of every ratio ran on the ratio's machine
        for b in (x["backend"], x["fastest"]):
            cells = groups.loc[(x["workload"], b, x["machine"]), "cells"]
            assert set(t.cells.loc[cells, "machine"]) == {x["machine"]}
    a = r[(r["workload"] == "cnn") & (r["machine"] == "node-a")].set_index("backend")
    # node-a alone: torch fastest, tensorflow 10% behind, whatever node-b's 2x-faster round says
    assert a.loc["torch", "verdict"].startswith("fastest")
    assert a.loc["tensorflow", "ratio"] == pytest.approx(1.1, rel=1e-9)
    assert a.loc["tensorflow", "verdict"] == "1.10x slower"
    assert a.loc["tensorflow", "stability"] == "held in 2 of 2 rounds"
    # the gru's backends never shared a machine: each is alone, no ratio across machines
    gru = r[r["workload"] == "gru"]
    assert set(gru["backend"] == gru["fastest"]) == {True}


def test_mixing_the_machines_would_change_the_verdict(runs):
    """The plant can fail: with the machines ignored, node-b's round pulls tensorflow ahead."""
    t = load_tables([runs["span"]])
    t.cells["machine"] = ""
    from rosetta.report.groups import group_frame

    mixed = compare.ratios_to_fastest(t, group_frame(t))
    cnn = mixed[mixed["workload"] == "cnn"].set_index("backend")
    assert cnn.loc["tensorflow", "verdict"] != "1.10x slower"
    assert len(mixed[mixed["workload"] == "gru"]) == 2  # and the gru would get a ratio


def test_headline_names_the_machine_or_says_there_is_no_verdict(runs):
    t = load_tables([runs["span"]])
    heads = {h.workload: h for h in headlines(t)}
    (line,) = heads["cnn"].stability
    assert line.startswith("cnn on node-a: 3 rounds; torch fastest, 1.10x [")
    assert heads["gru"].stability == (f"gru: {APART}",)
    assert "span (cpu) on node-a" in heads["cnn"].columns
    assert "span (cpu) on node-b" in heads["cnn"].columns
    glance = lede(t)
    assert f"gru: {APART}" in glance
    assert any(p.startswith("cnn on node-a: torch fastest, 1.10x") for p in glance)


def test_machines_section_lists_both_machines_and_their_cells(runs, tmp_path):
    t = load_tables([runs["span"]])
    rows = {m["hostname"]: m for m in machine_rows(t)}
    assert set(rows) == {"node-a", "node-b"}
    assert rows["node-b"]["cpu"] == "Beta CPU 2" and rows["node-b"]["cores"] == "16"
    assert rows["node-b"]["gpu"] == "Test GPU 7" and rows["node-a"]["gpu"] == "-"
    assert len(rows["node-a"]["cells"]) == 3 + 2 + 3  # torch cnn, tf cnn, torch gru
    assert any(
        c.startswith("tensorflow x cnn (") and "round 2" in c for c in rows["node-b"]["cells"]
    )
    html = write_report([runs["span"]], tmp_path / "span").read_text()
    assert 'id="machines"' in html and 'href="#machines"' in html
    page = Tables(html)
    hosts = [r[1] for r in page.tables["machines-table"][1:]]
    assert hosts == ["node-a", "node-b"]
    assert any(r[1].endswith("on node-a") for r in page.tables["ratio-table"][1:])
    assert ">tensorflow on node-b</text>" in html  # the step-time chart: one bar per machine


def test_two_runs_spanning_machines_compare_machine_by_machine(runs):
    t = load_tables([runs["span"], runs["span2"]])
    c, _ = compare.compare_runs(t, "span", "span2")
    cnn = c[c["workload"] == "cnn"]
    assert sorted(zip(cnn["backend"], cnn["machine"], strict=True)) == [
        ("tensorflow", "node-a"),
        ("tensorflow", "node-b"),
        ("torch", "node-a"),
    ]
    tf_b = cnn[(cnn["backend"] == "tensorflow") & (cnn["machine"] == "node-b")].iloc[0]
    # node-b timed only tensorflow: its own common backend, its plain ratio between the runs
    assert tf_b["verdict"] == "common backend" and tf_b["ratio"] == pytest.approx(1.0, rel=0.05)
    assert cnn[cnn["machine"] == "node-a"].set_index("backend").loc["torch", "common"] == "torch"


def test_one_machine_renders_as_before(runs, tmp_path):
    one, old = load_tables([runs["one"]]), load_tables([runs["old"]])
    assert set(one.cells["machine"]) == {"node-a"} and set(old.cells["machine"]) == {""}
    assert set(one.groups["machine"]) == {""}  # not keyed by machine
    assert machine_rows(one) == [] and machine_rows(old) == []

    def shown(t):
        return [(h.title, h.columns, h.rows, h.stability) for h in headlines(t)]

    assert shown(one) == shown(old)
    assert lede(one) == lede(old) and ratio_rows(one) == ratio_rows(old)
    html = write_report([runs["one"]], tmp_path / "one").read_text()
    assert 'id="machines"' not in html and "node-a" not in html
    before = write_report([runs["old"]], tmp_path / "old").read_text()
    assert _body(html, runs["one"]) == _body(before, runs["old"])


def _body(html: str, run_dir) -> str:
    """The page without what differs between two renderings: its time and the run's folder."""
    html = html.replace(str(run_dir), "RUN").replace(str(run_dir.resolve()), "RUN")
    return "\n".join(line for line in html.splitlines() if "generated" not in line)


def test_old_and_odd_records_load(runs, tmp_path):
    run_dir = write_rounds_run(tmp_path, "odd")
    for path in sorted(run_dir.glob("torch__*.json")):
        rec = json.loads(path.read_text())
        rec["manifest"]["node"] = "not a mapping"
        path.write_text(json.dumps(rec))
    t = load_tables([run_dir, runs["old"]])
    assert set(t.cells["machine"]) == {""}
    assert machine_rows(t) == []
    assert write_report([run_dir], tmp_path / "odd-report").is_file()


def test_a_real_local_cell_names_its_machine(small_data):
    from rosetta.runner.cell import run_cell
    from rosetta.runner.config import CellConfig

    rec = run_cell(CellConfig("numpy_ref", "gru", "ci", data_dir=str(small_data)))
    node = rec["manifest"]["node"]
    assert node["hostname"] == socket.gethostname()
    assert node["cpu"] and node["cpu_count"] >= 1


# -- the scaling section never pools machines -------------------------------------------------
BF16_ON = {"node-a": 0.7, "node-b": 0.9}  # planted bf16 / fp32 step ratio per machine


def test_scaling_rows_are_per_machine(tmp_path):
    from rosetta.report import scaling

    run_dir = _run_dir(tmp_path / "results", "sw2", len(ROUND_DRIFT))
    spec = ROUND_CELLS[("cnn", "torch")]
    for rnd, drift in enumerate(ROUND_DRIFT):
        for node in (NODE_A, NODE_B):
            speed = FASTER_B if node is NODE_B else 1.0
            for prec in ("fp32", "bf16"):
                rec = record("sw2", "cnn", "torch", spec, source="synthetic", seed=rnd)
                rec["manifest"]["node"] = dict(node)
                k = BF16_ON[node["hostname"]] if prec == "bf16" else 1.0
                write_point_record(run_dir, rec, rnd=rnd, batch=BATCH["cnn"], precision=prec,
                                   threads=2, drift=drift * speed * k)  # fmt: skip
                stem = f"torch__cnn__b{BATCH['cnn']}-{prec}-t2-r{rnd}"
                (run_dir / f"{stem}.json").rename(run_dir / f"{stem}-{node['hostname']}.json")
    (part,) = scaling.sections(load_tables([run_dir]))
    rows = {r["backend"]: r for r in part["precision"]}
    assert set(rows) == {"torch on node-a", "torch on node-b"}
    for host, k in BF16_ON.items():
        ratio = float(rows[f"torch on {host}"]["ratio"].split()[0])
        assert ratio == pytest.approx(k, abs=0.01), (host, rows[f"torch on {host}"]["ratio"])
