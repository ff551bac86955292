"""Repetition rounds: every cell R times, each in a fresh process, round by round, in an order
shuffled per round from the run's seed and recorded, read back by the report as one group;
resume and retry per round. The suite's one ``--repeat`` run through papermill is here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from rosetta.runner.config import CellConfig
from rosetta.runner.matrix import Plan, round_orders
from rosetta.runner.profiles import BENCH_PROFILES
from tests.bench_helpers import bench, fault_env


def plan(backends, workloads, repeat, seed=0, **axes) -> Plan:
    return Plan(tuple(backends), tuple(workloads), CellConfig("", "", seed=seed), repeat=repeat,
                **axes)  # fmt: skip


def ran_order(out: str) -> list[str]:
    """The cells in the order the bench finished them (its one line per cell)."""
    cell = re.compile(r"^  (\S+ x \S+(?: \[[^\]]+\])?)\s")
    return [m.group(1) for m in map(cell.match, out.splitlines()) if m]


def label_key(label: str) -> str:
    """``numpy_ref x gru [r1]`` -> ``numpy_ref__gru__r1`` (the display's name -> the cell key)."""
    base, _, suffix = label.partition(" [")
    backend, _, workload = base.partition(" x ")
    key = f"{backend}__{workload}"
    return f"{key}__{suffix.rstrip(']')}" if suffix else key


def test_round_orders_are_permutations_reproducible_from_the_seed_and_differ():
    p = plan(["numpy_ref", "torch", "jax"], ["cnn", "gru"], repeat=4, seed=7,
             batch_sizes=(16, 64))  # fmt: skip
    orders = round_orders(p)
    assert len(orders) == 4
    for r, order in enumerate(orders):
        assert len(order) == len(set(order)) == 3 * 2 * 2  # every cell once per round
        assert all(k.endswith(f"-r{r}") if r else "-r" not in k for k in order)
    strip = [[k.rsplit("-r", 1)[0] if r else k for k in o] for r, o in enumerate(orders)]
    assert len({tuple(o) for o in strip}) > 1  # 12 cells: rounds in one order has p ~ 1e-26
    assert round_orders(p) == orders  # reproducible from the seed recorded in run.json
    assert round_orders(plan(["numpy_ref", "torch", "jax"], ["cnn", "gru"], 4, seed=8,
                             batch_sizes=(16, 64))) != orders  # fmt: skip
    one = round_orders(plan(["numpy_ref", "torch"], ["cnn", "gru"], repeat=1))
    assert one == [["numpy_ref__cnn", "torch__cnn", "numpy_ref__gru", "torch__gru"]]


# the slow tier's, for the quick tier's 6 minutes (issue 28): rounds are quick in the resume test
@pytest.mark.slow
def test_training_run_through_papermill_then_timing_rounds_in_the_recorded_order(
    tmp_path, small_data, monkeypatch, capsys
):
    """``--repeat 3``: round 0 is each cell's training run (papermill, its notebook, all epochs,
    accuracy, losses, latency), rounds 1 and 2 are timing rounds (a fresh ``python -m
    rosetta.runner.cell`` process each: the cold step, the warm-up, the timed steps, nothing
    else), round by round in the order recorded in run.json; the report's interval is taken over
    the timing rounds."""
    fault_env(monkeypatch, "raise")  # the fault cell fails fast; its records carry rounds too
    cells = ["numpy_ref", "fault"]
    seed = next(  # two cells: a seed whose first two rounds run in different orders
        s for s in range(50)
        if [k.split("__")[0] for k in round_orders(plan(cells, ["gru"], 3, seed=s))[0]]
        != [k.split("__")[0] for k in round_orders(plan(cells, ["gru"], 3, seed=s))[1]]
    )  # fmt: skip
    code = bench(tmp_path, small_data, "--backends", "numpy_ref,fault", "--workloads", "gru",
                 "--repeat", "3", "--seed", str(seed), "--run-id", "rr")  # fmt: skip
    assert code == 1
    out = capsys.readouterr().out
    run = tmp_path / "results" / "rr"
    stored = json.loads((run / "run.json").read_text())
    assert stored["config"]["repeat"] == 3 and stored["config"]["seed"] == seed
    prof = BENCH_PROFILES["ci"]
    assert stored["config"]["timing"] == {"warmup": prof.timing_warmup, "steps": prof.timing_steps}
    orders = stored["round_orders"]
    assert [label_key(x) for x in ran_order(out)] == orders[0] + orders[1] + orders[2]
    assert [k.split("__")[0] for k in orders[0]] != [k.split("__")[0] for k in orders[1]]
    train = json.loads((run / "numpy_ref__gru.json").read_text())
    assert train["status"] == "ok" and train["executor"] == "papermill"
    assert train["point"]["kind"] == train["config"]["kind"] == "training"
    assert (run / train["notebook"]).is_file() and train["point"]["round"] == 0
    assert "test_accuracy" in train["metrics"] and "latency" in train["metrics"]
    assert train["clocks"]["end_to_end_s"] > 0 and train["metrics"]["losses"]
    pids = {train["pid"]}
    for r in (1, 2):
        rec = json.loads((run / f"numpy_ref__gru__r{r}.json").read_text())
        assert rec["status"] == "ok" and rec["point"] == {**rec["point"], "round": r,
                                                          "kind": "timing"}  # fmt: skip
        assert "executor" not in rec and "notebook" not in rec  # no kernel, no notebook
        assert not (run / f"numpy_ref__gru__r{r}.ipynb").exists()
        assert len(rec["clocks"]["steady_raw_s"]) == prof.timing_steps
        assert rec["metrics"]["timing_warmup"] == prof.timing_warmup
        assert "end_to_end_s" not in rec["clocks"] and rec["clocks"]["cold_start_s"] > 0
        assert not {"test_accuracy", "losses", "latency"} & set(rec["metrics"])
        assert rec["equivalence"]["reused_from"] == "numpy_ref__gru"  # the gate once
        pids.add(rec["pid"])
        bad = json.loads((run / f"fault__gru__r{r}.json").read_text())
        assert bad["status"] == "failed" and bad["point"]["round"] == r
    assert len(pids) == 3 and os.getpid() not in pids  # each round in a fresh process
    index = json.loads((run / "index.json").read_text())["cells"]
    assert set(index) == set(orders[0] + orders[1] + orders[2])
    # the report reads the rounds back as one group: the steady state of the timing rounds, the
    # end to end and accuracy of the training run
    from rosetta.report import load_tables, write_report

    t = load_tables([run])
    mine = t.cells[t.cells["backend"] == "numpy_ref"]
    assert sorted(mine["round"]) == [0, 1, 2]
    assert list(mine.sort_values("round")["kind"]) == ["training", "timing", "timing"]
    (g,) = [g for _, g in t.groups.iterrows() if g["backend"] == "numpy_ref"]
    assert g["rounds"] == 3 and g["method"] == "rounds" and len(g["round_medians"]) == 2
    timing_meds = [json.loads((run / f"numpy_ref__gru__r{r}.json").read_text())["clocks"]
                   ["steady"]["median"] for r in (1, 2)]  # fmt: skip
    assert g["round_medians"] == pytest.approx(tuple(timing_meds))
    assert g["end_to_end_s"] == pytest.approx(train["clocks"]["end_to_end_s"])
    assert g["test_accuracy"] == pytest.approx(train["metrics"]["test_accuracy"])
    assert g["steady_low"] <= g["steady_median"] <= g["steady_high"]
    html = write_report([run], tmp_path / "rr-report").read_text()
    assert 'id="rounds-gru"' in html and "3 rounds" not in html  # one backend ok: no verdict
    from rosetta.report.summary import summary

    text = summary([json.loads(p.read_text()) for p in run.glob("numpy_ref__gru*.json")])
    assert text.count("timing round") == 2


def test_resume_completes_a_half_done_multi_round_run(tmp_path, small_data, monkeypatch, capsys):
    real_wait = subprocess.Popen.wait
    started: list[str] = []

    def wait(self, timeout=None):  # Ctrl-C arrives while the second cell to run is running
        if self.args[:3] == [sys.executable, "-m", "rosetta.runner.cell"]:
            cfg = json.loads(self.args[-1])
            if cfg["out"] not in started:
                started.append(cfg["out"])
                if len(started) == 2:  # once: the handler's own wait must go through
                    raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    args = ["--backends", "numpy_ref", "--workloads", "gru", "--executor", "python",
            "--repeat", "2", "--seed", "3"]  # fmt: skip
    assert bench(tmp_path, small_data, *args, "--run-id", "half") == 2
    run = tmp_path / "results" / "half"
    first = os.path.basename(started[0])
    kept = (run / first).read_text()
    assert json.loads(kept)["status"] == "ok"
    second = json.loads((run / os.path.basename(started[1])).read_text())
    assert second["status"] == "interrupted" and second["point"]["round"] == 1
    monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
    capsys.readouterr()
    assert bench(tmp_path, small_data, *args, "--resume", "half") == 0
    assert (run / first).read_text() == kept  # the done round is kept as it was
    done = {p.name: json.loads(p.read_text()) for p in run.glob("numpy_ref__gru*.json")}
    assert {n: r["status"] for n, r in done.items()} == {
        "numpy_ref__gru.json": "ok",
        "numpy_ref__gru__r1.json": "ok",
    }
    assert [p.name.split(".")[1] for p in (run / "attempts").glob("*.json")] == ["interrupted"]
    # another --repeat on the same run is refused in one line
    capsys.readouterr()
    other = [a if a != "2" else "3" for a in args]  # --repeat 3
    assert bench(tmp_path, small_data, *other, "--resume", "half") == 2
    err = capsys.readouterr().err.strip()
    assert "was made with repeat=2, not 3" in err and "\n" not in err


def test_repeat_whose_timing_rounds_would_run_for_hours_is_refused_up_front(tmp_path, capsys):
    """smoke's 15 cells at ~8 s a timing round: 39 timing rounds are ~1.3 h, over the hour the
    rounds may take; one line with the estimate and the largest --repeat that fits, nothing
    made."""
    from rosetta.cli import main

    results = tmp_path / "results"
    argv = [
        "bench",
        "--profile",
        "smoke",
        "--backends",
        "numpy_ref,torch,tensorflow,jax,chainer",
        "--workloads",
        "cnn,gru,resnet50",
        "--results-dir",
        str(results),
        "--no-report",
    ]
    assert main([*argv, "--repeat", "40"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "rosetta: error: --repeat 40: 600 cells, about 1.5 h (15 training runs at ~40 s and 585 "
        "timing rounds at ~8 s a cell, smoke); the timing rounds alone would run 1.3 h, over the "
        "bound of 1.0 h; valid: --repeat 1..31, or add --allow-large-run"
    )
    assert not results.exists()


def test_a_run_made_before_timing_rounds_is_not_resumed_into_timing_rounds(tmp_path):
    """A run whose rounds all ran in full (no ``timing`` pin) is not completed with timing rounds:
    one line; a run of one round (the training run only) pins nothing new and resumes."""
    from rosetta.errors import RosettaError
    from rosetta.runner.rundir import RunDir

    p = plan(["numpy_ref"], ["gru"], repeat=3)
    new = p.pinned()
    assert new["timing"] == {"warmup": p.timing_warmup, "steps": p.timing_steps}
    old = {k: v for k, v in new.items() if k != "timing"}
    RunDir(tmp_path, "old", old, create=True).close()
    with pytest.raises(RosettaError, match=r"made with timing=None, not \{'warmup': 1"):
        RunDir(tmp_path, "old", new, create=False)
    one = plan(["numpy_ref"], ["gru"], repeat=1).pinned()
    assert "timing" not in one
    RunDir(tmp_path, "one", one, create=True).close()
    RunDir(tmp_path, "one", one, create=False).close()


@pytest.mark.slow
def test_a_feature_timing_round_times_its_batches_and_nothing_else():
    from rosetta.runner.cell import run_cell
    from rosetta.runner.records import record_problem

    rec = run_cell(CellConfig("torch", "resnet50", "ci", round=2, kind="timing", timing_steps=2,
                              timing_warmup=1))  # fmt: skip
    assert rec["status"] == "ok" and record_problem(rec) == ""
    assert rec["point"]["kind"] == "timing" and len(rec["clocks"]["steady_raw_s"]) == 2
    assert "end_to_end_s" not in rec["clocks"] and "time_per_1000_images_s" not in rec["metrics"]
    assert rec["clocks"]["timed_s"] == pytest.approx(sum(rec["clocks"]["steady_raw_s"]))


def test_a_cell_config_of_an_unknown_kind_or_an_empty_timing_round_is_one_line():
    from rosetta.errors import RosettaError

    good = CellConfig("numpy_ref", "gru", kind="timing", timing_steps=3, timing_warmup=1)
    assert CellConfig.from_json(good.to_json()) == good
    for bad, why in (
        ({"kind": "bench"}, "unknown kind 'bench'; valid: training, timing"),
        ({"kind": "timing", "timing_steps": 0}, "needs timing_steps >= 1"),
    ):
        text = CellConfig("numpy_ref", "gru", **bad).to_json()
        with pytest.raises(RosettaError, match=why):
            CellConfig.from_json(text)
