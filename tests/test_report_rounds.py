"""The report over rounds and sweep axes: fixture runs with known drift and known scaling."""

from __future__ import annotations

import numpy as np
import pytest
from report_fixtures import ROUND_DRIFT, write_fixture_runs, write_rounds_run, write_sweep_run
from test_report import Tables, row

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

from rosetta.report import compare, load_tables, write_report  # noqa: E402
from rosetta.report.headline import headlines  # noqa: E402
from rosetta.report.stats import ROUNDS  # noqa: E402


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    return {"rounds": write_rounds_run(root), "sweep": write_sweep_run(root), "root": root}


def test_rounds_are_one_group_with_the_cross_round_estimate(results):
    t = load_tables([results["rounds"]])
    assert len(t.cells) == 6 * len(ROUND_DRIFT)  # one row per record
    g = t.groups.set_index(["workload", "backend"])
    assert len(g) == 6 and set(g["rounds"]) == {3} and set(g["method"]) == {ROUNDS}
    torch = g.loc[("cnn", "torch")]
    assert torch["round_medians"] == pytest.approx(tuple(0.1 * d for d in ROUND_DRIFT))
    assert torch["steady_median"] == pytest.approx(0.1)  # the median of the round medians
    assert torch["end_to_end_s"] == pytest.approx(120.0)  # median over the rounds
    # the interval holds the drift between processes (+12% / -6%), not just one process
    assert torch["steady_low"] < 0.097 and torch["steady_high"] > 0.108


def test_paired_ratios_see_through_the_drift(results):
    t = load_tables([results["rounds"]])
    r = compare.ratios_to_fastest(t).set_index(["workload", "backend"])
    tf = r.loc[("cnn", "tensorflow")]
    assert tf["ratio"] == pytest.approx(1.1, rel=1e-9) and tf["verdict"] == "1.10x slower"
    assert tf["stability"] == "held in 3 of 3 rounds"
    # unpaired, the two cells' cross-round intervals overlap: the drift would hide the 10%
    g = t.groups.set_index(["workload", "backend"])
    assert g.loc[("cnn", "tensorflow"), "steady_low"] < g.loc[("cnn", "torch"), "steady_high"]
    assert r.loc[("gru", "tensorflow"), "verdict"] == "no clear difference"  # a tie


def test_headline_carries_its_stability_and_the_round_chart_shows(results, tmp_path):
    t = load_tables([results["rounds"]])
    heads = {h.workload: h for h in headlines(t)}
    assert heads["cnn"].title == "CNN (VGG-style, CIFAR-10): training time"  # from the spec
    (line,) = heads["cnn"].stability
    assert line.startswith("3 rounds; torch fastest, 1.10x [")
    assert line.endswith("ahead of tensorflow, held in 3 of 3 rounds")
    assert "no clear difference" in heads["gru"].stability[0]
    html = write_report([results["rounds"]], tmp_path / "r").read_text()
    page = Tables(html)
    assert row(page.tables["headline-cnn"], "torch")[1] == "120.0"
    assert 'id="rounds-cnn"' in html and 'id="rounds-gru"' in html
    ratios = {(r[1], r[2]): r for r in page.tables["ratio-table"][1:]}
    assert ratios[("cnn", "tensorflow")][5] == "3"  # after step ms and a rerun's median
    assert ratios[("cnn", "tensorflow")][8] == "held in 3 of 3 rounds"
    cond = [r[2] for r in page.tables["conditions-table"][1:] if r[1] == "cnn"]
    assert "torch (round 1)" in cond and "torch (round 2)" in cond
    assert 'id="scaling"' not in html  # one point: no scaling section


def test_scaling_section_along_each_swept_axis(results, tmp_path):
    html = write_report([results["sweep"]], tmp_path / "s").read_text()
    assert 'id="scaling"' in html and 'id="batch-cnn-sweep"' in html
    assert 'id="threads-cnn-sweep"' in html
    page = Tables(html)
    tables = page.tables
    batch = next(v for v in tables.values() if v and v[0][:3] == ["backend", "at", "batch"])
    torch128 = next(r for r in batch if r[0] == "torch" and r[2] == "128")
    assert torch128[5].startswith("1.25x [") and torch128[6] == "1.25x throughput"
    assert torch128[7] == f"{(1000 + 4 * 128) / 128:.3g}"  # MiB per sample
    tf128 = next(r for r in batch if r[0] == "tensorflow" and r[2] == "128")
    assert tf128[6] == "no clear difference"
    threads = next(v for v in tables.values() if v and v[0][:3] == ["backend", "at", "threads"])
    t2 = next(r for r in threads if r[0] == "torch" and r[2] == "2")
    assert t2[4].startswith("1.80x [") and t2[5] == "90%" and t2[6] == "1.80x speedup"
    prec = next(v for v in tables.values() if v and v[0][:3] == ["backend", "at", "ratio of"])
    (bf16,) = prec[1:]
    assert bf16[2] == "bf16 / fp32" and bf16[5].startswith("0.60 [")
    assert bf16[6] == "1.67x faster"
    lat = next(v for v in tables.values() if v and v[0][:3] == ["backend", "point", "requests"])
    assert lat[1][2:] == ["50", "4.00", "5.50", "9.00"]
    # the headline shows the primary point (fp32, the profile's batch 64, the most threads):
    # torch's 100 s there, drifted 1.0 and 1.12 in the two rounds -> their median 106
    assert row(page.tables["headline-cnn"], "torch")[1] == "106.0"


def test_a_single_point_run_has_no_scaling_section(tmp_path):
    a, _ = write_fixture_runs(tmp_path / "results")
    assert 'id="scaling"' not in write_report([a], tmp_path / "rep").read_text()


def test_bimodal_steps_next_to_a_close_rival_are_flagged_noisy(tmp_path):
    import json

    import numpy as np

    run = write_rounds_run(tmp_path / "results", "noisy")
    path = next(run.glob("tensorflow__cnn__*-r1.json"))
    rec = json.loads(path.read_text())
    half = len(rec["clocks"]["steady_raw_s"]) // 2
    rng = np.random.default_rng(0)
    # two speeds, 0.10 s and 0.13 s: IQR / median ~ 25%, and torch (0.1) lies inside that
    rec["clocks"]["steady_raw_s"] = list(
        np.concatenate([np.full(half, 0.10), np.full(half, 0.13)])
        * (1 + 0.001 * rng.random(2 * half))
    )
    path.write_text(json.dumps(rec))
    t = load_tables([run])
    r = compare.ratios_to_fastest(t).set_index(["workload", "backend"])
    assert r.loc[("cnn", "tensorflow"), "noisy"]
    assert not r.loc[("cnn", "numpy_ref"), "noisy"] and not r.loc[("gru", "torch"), "noisy"]
    html = write_report([run], tmp_path / "rep").read_text()
    assert "1 cell noisy enough to change a verdict" in html
    cond = {r[2]: r for r in Tables(html).tables["conditions-table"][1:] if r[1] == "cnn"}
    assert cond["tensorflow (round 1)"][-1].startswith("noisy: spread could change a verdict")
    assert cond["torch (round 1)"][-1] == "-"
    # the bench's closing line names exactly that cell; the untouched run names none
    from rosetta.cli.bench import noise_line

    assert noise_line(run) == (
        "noise that could change a verdict (1): cnn tensorflow (batch 64, fp32, 2 threads)"
    )
    quiet = write_rounds_run(tmp_path / "results", "calm")
    assert noise_line(quiet) == "noise: no cell's step spread could change a verdict"


def test_the_summary_counts_spread_flags_and_lists_the_others():
    from report_fixtures import ROUND_CELLS, record

    from rosetta.report.summary import summary

    recs = [record("s", w, b, spec, source="synthetic", seed=i)
            for i, ((w, b), spec) in enumerate(ROUND_CELLS.items())]  # fmt: skip
    spread = "steady-state spread (IQR/median) 32% > 10%: uneven steps (the report says ...)"
    recs[0]["flags"] = [spread, "non-finite training loss"]
    recs[1]["flags"] = [spread]
    text = summary(recs)
    assert "32% > 10%" not in text  # not one line per record
    ok = sum(r["status"] == "ok" for r in recs)
    assert f"  * 2 of {ok} ok records have a steady-state spread (IQR/median) above 10%" in text
    assert f"x {recs[0]['workload']}: non-finite training loss" in text  # other flags listed


# -- training run + timing rounds (issue 32) ------------------------------------------------
def test_verdicts_read_the_timing_rounds_and_the_headline_the_training_run(tmp_path):
    from report_fixtures import TIMING_DRIFT, TIMING_OWN, write_timing_run

    run = write_timing_run(tmp_path / "results")
    t = load_tables([run])
    assert sorted(set(t.cells["kind"])) == ["timing", "training"]
    g = t.groups.set_index("backend")
    own = TIMING_OWN["torch"]
    assert g.loc["torch", "round_medians"] == pytest.approx(
        tuple(0.1 * o * d for o, d in zip(own, TIMING_DRIFT, strict=True))
    )  # the four timing rounds, not the training run
    assert g.loc["tensorflow", "end_to_end_s"] == pytest.approx(130.0)  # the training run's
    assert g.loc["tensorflow", "test_accuracy"] == pytest.approx(0.77)
    r = compare.ratios_to_fastest(t).set_index("backend")
    per_round = [1.1 * a / b for a, b in zip(TIMING_OWN["tensorflow"], own, strict=True)]
    # the training run's 1.5x slower steps are not paired in: 1.10x from the timing rounds
    assert r.loc["tensorflow", "ratio"] == pytest.approx(
        float(np.exp(np.mean(np.log(per_round)))), rel=1e-6
    )
    assert r.loc["tensorflow", "verdict"] == "1.10x slower"
    assert r.loc["tensorflow", "stability"] == "held in 4 of 4 rounds"
    (line,) = headlines(t)[0].stability
    assert line.startswith("4 rounds; torch fastest, 1.10x [") and line.endswith("4 of 4 rounds")
    html = write_report([run], tmp_path / "rep").read_text()
    assert row(Tables(html).tables["headline-cnn"], "tensorflow")[1] == "130.0"


def test_held_in_k_of_r_only_beside_a_clear_verdict(results, tmp_path):
    t = load_tables([results["rounds"]])
    r = compare.ratios_to_fastest(t).set_index(["workload", "backend"])
    assert r.loc[("gru", "tensorflow"), "verdict"] == "no clear difference"
    assert r.loc[("gru", "tensorflow"), "stability"] == ""
    heads = {h.workload: h for h in headlines(t)}
    assert "held in" not in heads["gru"].stability[0]
    html = write_report([results["rounds"]], tmp_path / "r").read_text()
    ratios = {(x[1], x[2]): x for x in Tables(html).tables["ratio-table"][1:]}
    assert ratios[("gru", "tensorflow")][8] == "-"


def test_latency_has_its_own_heading_outside_scaling(results, tmp_path):
    html = write_report([results["sweep"]], tmp_path / "s").read_text()
    start = html.index('<section id="scaling">')
    scaling = html[start : html.index("</section>", start)]
    assert "scaling-latency" not in scaling and "p50" not in scaling
    lat = html.index('<section id="latency">')
    assert "<h2>Batch-1 latency</h2>" in html[lat : lat + 200]
    table = Tables(html).tables["latency-1"]
    assert table[1][:3] == ["torch (b64 fp32 t2 round 0)", "batch 64, fp32, 2 threads", "50"]
    assert table[1][3:] == ["4.00", "5.50", "9.00"]


def test_log_axes_get_readable_ticks_within_a_decade():
    from rosetta.report.charts import log_ticks

    for low, high in [(100, 300), (80, 130), (0.5, 2000), (1.2, 9.0), (31, 95)]:
        ticks = log_ticks(low, high)
        assert len(ticks) >= 3 and all(low <= x <= high for x in ticks), (low, high, ticks)
        assert ticks == sorted(set(ticks))
    assert len(log_ticks(0.001, 1e6)) <= 8  # nine decades: thinned
    assert log_ticks(12, 14) == [12.0, 14.0]  # no ladder value fits two apart: the ends


def test_a_many_series_throughput_chart_is_split_into_panels_with_legends_outside(monkeypatch):
    from rosetta.report import charts, scaling

    rows = []
    for b in ("torch", "tensorflow", "jax"):
        for prec, th in (("fp32", 2), ("bf16", 2), ("fp32", 1)):
            for batch, step in ((16, 0.03), (64, 0.1)):
                rows.append(dict(backend=b, machine="", precision=prec, threads=th,
                                 batch_size=batch, steady_median=step, steady_low=step * 0.97,
                                 steady_high=step * 1.03))  # fmt: skip
    figs = []
    real = charts.to_svg
    monkeypatch.setattr(charts, "to_svg", lambda fig, cid: figs.append(fig) or real(fig, cid))
    chart = scaling.throughput_chart("r", "cnn", pd.DataFrame(rows))
    (fig,) = figs
    panels = [ax for ax in fig.axes if ax.get_legend() is not None]
    assert [ax.get_title(loc="left") for ax in panels] == ["torch", "tensorflow", "jax"]
    fig.canvas.draw()
    for ax in panels:  # 3 series a panel, their legend right of the plot, not over its lines
        assert len(ax.get_legend().get_texts()) == 3
        assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    assert chart.svg.count('<g id="legend_') == 3


def test_interval_coverage_script_counts_the_medians_run_a_holds(tmp_path, capsys):
    """The two-run check of issue 32 (``python -m benchmarks interval_coverage A B``): the same
    fixture twice is held everywhere; a run whose tensorflow is 1.5x slower is not, there."""
    import json

    from report_fixtures import write_timing_run

    from benchmarks.interval_coverage import main as coverage

    a, b = write_timing_run(tmp_path, "ta"), write_timing_run(tmp_path, "tb")
    assert coverage([str(a), str(b), "--out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "medians: 2 of 2 groups of tb inside ta's own 95% intervals (100%)" in out
    assert "medians: 2 of 2 inside A's intervals for a rerun's median from its rounds alone" in out
    assert "no run-to-run spread shipped for A's machine" in out  # Test CPU 9000
    assert "this pair's run-to-run spread: sd 0.0000 of log step time over 2 cells" in out
    res = json.loads((tmp_path / "c.json").read_text())
    assert res["ratios_held"] == [1, 1] and res["machine_held"] is None
    for p in b.glob("tensorflow__cnn__*-r*.json"):
        rec = json.loads(p.read_text())
        rec["clocks"]["steady_raw_s"] = [x * 1.5 for x in rec["clocks"]["steady_raw_s"]]
        rec["clocks"]["steady"] = {k: v * 1.5 if k != "n" else v
                                   for k, v in rec["clocks"]["steady"].items()}  # fmt: skip
        p.write_text(json.dumps(rec))
    assert coverage([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "OUT  cnn / tensorflow" in out and "1 of 2 groups" in out
    # a run-to-run spread as large as that shift (log 1.5 = 0.41) holds it as a rerun's median
    assert coverage([str(a), str(b), "--between-sd", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "medians: 2 of 2 inside A's intervals for a rerun's median with the run-to-run " in out


def test_interval_coverage_writes_the_pairs_spread_into_its_machines_entry(tmp_path, capsys):
    """``--write`` pools the pair's estimate into A's machine entry (refusing the same pair
    twice and a machine without an entry); the file then gives the report its rerun interval."""
    import json

    from report_fixtures import write_timing_run

    from benchmarks.interval_coverage import main as coverage
    from rosetta.report import references
    from rosetta.report.rerun import spread_for

    a, b = write_timing_run(tmp_path, "ta"), write_timing_run(tmp_path, "tb")
    for p in b.glob("tensorflow__cnn__*-r*.json"):  # B's tensorflow 10% slower: a shift
        rec = json.loads(p.read_text())
        rec["clocks"]["steady_raw_s"] = [x * 1.1 for x in rec["clocks"]["steady_raw_s"]]
        p.write_text(json.dumps(rec))
    data = tmp_path / "ref.json"
    data.write_text(json.dumps({"schema": references.SCHEMA, "machines": []}))
    assert coverage([str(a), str(b), "--write", "--data", str(data)]) == 2
    assert "has no entry for Test CPU 9000" in capsys.readouterr().err
    machine = {"cpu": "Test CPU 9000", "isa": [], "flop_per_cycle_fp32": None}
    data.write_text(json.dumps({"schema": references.SCHEMA, "machines": [machine]}))
    coverage([str(a), str(b), "--write", "--data", str(data)])
    out = capsys.readouterr().out
    spread, _ = spread_for(machine, data)
    assert f"between_runs sd {spread.sd_log} over 2 cells" in out
    assert spread.pairs == (("ta", "tb"),) and 0.03 < spread.sd_log < 0.08  # log 1.1 / sqrt(4)
    assert coverage([str(a), str(b), "--write", "--data", str(data)]) == 2
    assert "already in" in capsys.readouterr().err


def test_interval_coverage_refuses_bad_input_in_one_line(tmp_path, capsys):
    """Issue 50 item 7: the same run twice (or two copies: zero spread) is never pooled into the
    shipped file; a missing folder, a malformed file and a FIFO named by --data are one line each
    (the FIFO read does not block), and nothing is written."""
    import json
    import os
    import shutil

    from report_fixtures import write_timing_run

    from benchmarks.interval_coverage import main as coverage
    from rosetta.report import references

    a = write_timing_run(tmp_path, "ta")
    b = tmp_path / "tb"
    shutil.copytree(a, b)  # a copy: every median equal, a spread of 0
    machine = {"cpu": "Test CPU 9000", "isa": [], "flop_per_cycle_fp32": None}
    data = tmp_path / "ref.json"
    good = json.dumps({"schema": references.SCHEMA, "machines": [machine]})
    data.write_text(good)

    def refused(args, says):
        assert coverage([*args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err

    refused([str(a), str(a), "--write", "--data", str(data)], "given as both A and B")
    refused([str(a), str(b), "--write", "--data", str(data)], "two copies of one run")
    assert data.read_text() == good  # nothing pooled
    for p in b.glob("tensorflow__cnn__*-r*.json"):  # B's tensorflow 10% slower: a real pair
        rec = json.loads(p.read_text())
        rec["clocks"]["steady_raw_s"] = [x * 1.1 for x in rec["clocks"]["steady_raw_s"]]
        p.write_text(json.dumps(rec))
    refused([str(a), str(tmp_path / "absent")], "not a run folder")
    data.write_text("[1, 2]")
    refused([str(a), str(b), "--write", "--data", str(data)], "not a reference file")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    refused([str(a), str(b), "--write", "--data", str(fifo)], "is a FIFO")
    out = tmp_path / "c.json"
    out.write_text("mine")
    refused([str(a), str(b), "--out", str(out)], "exists; add --force")
    assert out.read_text() == "mine"
