"""The gate runs once per function and run: the other batch sizes, thread counts and rounds of
the same (backend, workload, dtype, precision) reuse the first passing verdict and name it; a
verdict that failed, or that belongs to another function, is never reused."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest

from rosetta.runner import localise, records
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig
from rosetta.runner.gate import Check, GateResult
from rosetta.runner.matrix import Plan, latency_cells, round_cells, round_orders
from tests.bench_helpers import bench, run_records


def reference_run(tmp_path, data, run_id: str, *args: str) -> dict[str, dict]:
    """A ci run of the reference on the GRU (python executor); its records by key."""
    assert bench(tmp_path, data, "--backends", "numpy_ref", "--workloads", "gru", "--executor",
                 "python", "--run-id", run_id, *args) == 0  # fmt: skip
    return run_records(tmp_path, run_id)


def test_a_verdict_survives_its_json_form_and_names_where_it_came_from():
    gate = GateResult(
        False, "float32", 4, 3,
        (Check("forward", 0.25, "out"), Check("grads", float("inf"), "w", "w (infx)")),
        "a note", "first at op 2 gru", (localise.OpError("2 gru", 3.5),),
        (localise.OpError("0 embedding", 0.1),),
    )  # fmt: skip
    back = GateResult.from_dict(json.loads(json.dumps(gate.as_dict())), "jax__gru__b16")
    assert back == replace(gate, reused_from="jax__gru__b16")
    assert back.divergence == gate.divergence and not back.equivalent
    assert back.as_dict()["reused_from"] == "jax__gru__b16"


def test_the_gate_identity_ignores_the_point_and_keeps_the_function():
    base = CellConfig("torch", "cnn", out="a.json", run_id="r")
    same = replace(base, batch_size=16, threads=1, round=3, out="b.json", gate_from="a.json")
    assert same.gate_identity() == base.gate_identity()
    changes = [{"precision": "bf16"}, {"dtype": "float64"}, {"backend": "jax"}, {"seed": 1}]
    changes += [{"workload": "gru"}, {"device": "cuda"}, {"profile": "smoke"}]
    for change in changes:
        assert replace(base, **change).gate_identity() != base.gate_identity(), change


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_batch_sizes_and_rounds_reuse_the_first_gate_and_gate_every_point_opts_out(
    tmp_path, small_data
):
    # points of the batch axis (the thread axis is the same code path: gate_identity ignores both;
    # two thread counts would oversubscribe the one core a test worker owns)
    recs = reference_run(tmp_path, small_data, "once", "--batch-sizes", "32,64", "--repeat", "2")
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs.values())
    order = json.loads((tmp_path / "results" / "once" / "run.json").read_text())["round_orders"]
    first = order[0][0]  # the first cell to run gates; every other names it
    assert recs[first]["equivalence"]["reused_from"] == ""
    for key in order[0][1:] + order[1]:
        assert recs[key]["equivalence"]["reused_from"] == first, key
        assert recs[key]["equivalence"]["equivalent"]
    every = reference_run(
        tmp_path, small_data, "every", "--batch-sizes", "32,64", "--gate-every-point"
    )
    assert {k: r["equivalence"]["reused_from"] for k, r in every.items()} == {
        "numpy_ref__gru__b32": "",
        "numpy_ref__gru__b64": "",
    }
    assert all(r["config"]["gate_from"] == "" for r in every.values())


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_a_failed_or_foreign_verdict_is_not_reused_and_the_cell_gates_itself(tmp_path, small_data):
    cfg = CellConfig("numpy_ref", "gru", profile="ci", data_dir=str(small_data), threads=1,
                     out=str(tmp_path / "src.json"))  # fmt: skip
    source = run_cell(cfg)
    assert source["equivalence"]["equivalent"]
    failed = json.loads(json.dumps(source))
    failed["equivalence"]["equivalent"] = False
    foreign = json.loads(json.dumps(source))
    foreign["config"]["seed"] = 5  # another seed: other weights, another function
    forged = json.loads(json.dumps(source))  # rewritten after the run took its digest
    forged["equivalence"]["checks"][0]["violation"] = 148.0
    cases = {
        "failed": (failed, "holds no passing gate"),
        "foreign": (foreign, "gated another function"),
        "missing": (None, "could not be read"),
        "forged": (forged, "changed since the run read its verdict"),
    }
    for name, (rec, why) in cases.items():
        path = tmp_path / f"{name}.json"
        if rec is not None:
            path.write_text(json.dumps(source if name == "forged" else rec))
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""
        if name == "forged":
            path.write_text(json.dumps(forged))
        out = run_cell(replace(cfg, batch_size=64, gate_from=str(path), gate_sha256=digest))
        eq = out["equivalence"]
        assert eq["reused_from"] == "" and eq["equivalent"], name
        assert [c["what"] for c in eq["checks"]] == [
            c["what"] for c in source["equivalence"]["checks"]
        ]
        assert any(f.startswith("gated in this cell:") and why in f for f in out["flags"]), name
    # and a sound one is reused, checks and violations as recorded
    path = tmp_path / "sound.json"
    path.write_text(json.dumps(source))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    out = run_cell(replace(cfg, batch_size=64, gate_from=str(path), gate_sha256=digest))
    assert out["equivalence"]["reused_from"] == "numpy_ref__gru__t1"
    got = [c["violation"] for c in out["equivalence"]["checks"]]
    assert np.allclose(got, [c["violation"] for c in source["equivalence"]["checks"]])
    assert not [f for f in out["flags"] if f.startswith("gated in this cell")]


def test_latency_is_measured_once_per_function_and_thread_count_in_round_zero():
    plan = Plan(("torch", "jax"), ("cnn",), CellConfig("", "", seed=4), repeat=2,
                batch_sizes=(16, 64), precisions=("fp32", "bf16"), threads=(1, None))  # fmt: skip
    orders = round_orders(plan)
    by_key = {records.cell_key(c): c for r in range(2) for c in round_cells(plan, r)}
    chosen = latency_cells(orders, by_key)
    assert len(chosen) == 2 * 2 * 2  # backend x precision x threads
    assert all(by_key[k].round == 0 for k in chosen)
    for key in chosen:  # the first of its function and thread count to run in round 0
        c = by_key[key]
        same = [k for k in orders[0] if by_key[k].gate_identity() == c.gate_identity()
                and by_key[k].threads == c.threads]  # fmt: skip
        assert same[0] == key and len(same) == 2
