"""The matrix as a surface: sweep axes (batch size, precision, threads), their records and keys,
the refusals before anything runs, skipped precisions, retry per point, the quiet-machine check."""

from __future__ import annotations

import json

import pytest

from rosetta.backends import precision_unsupported
from rosetta.cli import main
from rosetta.errors import RosettaError
from rosetta.runner import quiet, records
from rosetta.runner.config import CellConfig
from rosetta.runner.profiles import (
    BENCH_PROFILES,
    check_batch_size,
    effective_profile,
)
from rosetta.spec import get_workload
from tests.bench_helpers import bench, fault_env
from tests.bench_helpers import run_records as run_files


def busy_reader():
    return quiet.MachineLoad(load1=3.5, cores=2, top_name="stress", top_pid=4242, top_percent=95)


# -- keys, points, profiles: pure functions -----------------------------------------------------


def test_cell_key_is_the_old_name_at_the_default_point_and_names_only_what_is_off_it():
    base = CellConfig("torch", "cnn")
    assert records.cell_key(base) == "torch__cnn"  # runs made before the axes still load
    assert records.cell_key(CellConfig("torch", "cnn", batch_size=16)) == "torch__cnn__b16"
    assert records.cell_key(CellConfig("jax", "gru", threads=2)) == "jax__gru__t2"
    assert records.cell_key(CellConfig("jax", "gru", round=1)) == "jax__gru__r1"
    full = CellConfig("torch", "cnn", batch_size=16, precision="bf16", threads=1, round=2)
    assert records.cell_key(full) == "torch__cnn__b16-bf16-t1-r2"
    assert records.cell_key(full.as_dict()) == records.cell_key(full)
    keys = {
        records.cell_key(CellConfig("torch", "cnn", batch_size=b, precision=p, threads=t, round=r))
        for b in (None, 1, 16)
        for p in ("fp32", "bf16")
        for t in (None, 1, 2)
        for r in (0, 1)
    }
    assert len(keys) == 3 * 2 * 3 * 2  # every point its own record


def test_point_is_the_effective_batch_and_the_report_reads_threads_in_effect():
    from rosetta.report.frame import point_of

    cfg = CellConfig("numpy_ref", "gru", "ci", threads=None).as_dict()
    spec_batch = get_workload("gru").profile("ci").batch_size
    assert records.point(cfg) == {"batch_size": spec_batch, "precision": "fp32", "round": 0,
                                  "kind": "training", "lane": "fast"}  # fmt: skip
    rec = records.make_record(backend="b", workload="gru", profile="ci", status="failed",
                              config={**cfg, "batch_size": 8, "round": 3})  # fmt: skip
    assert rec["point"] == {"batch_size": 8, "precision": "fp32", "round": 3, "kind": "training",
                            "lane": "fast"}  # fmt: skip
    # threads are stored once: the count in effect (an ok record's runtime), else the request
    ok = {**rec, "manifest": {"runtime": {"threads": 2}}, "config": {**cfg, "threads": None}}
    assert point_of(ok, None)["threads"] == 2
    assert point_of({**rec, "config": {**cfg, "threads": 1}}, None)["threads"] == 1
    old = {**rec, "point": {**rec["point"], "threads": 3}}  # a record of the old schema
    assert point_of(old, None)["threads"] == 3


def test_effective_profile_keeps_samples_and_images():
    gru = get_workload("gru")
    prof = gru.profile("ci")
    at16 = effective_profile(prof, 16, "train")
    assert at16.batch_size == 16 and at16.train_samples == prof.train_samples
    assert at16.steps_per_epoch == prof.train_samples // 16
    assert effective_profile(prof, None, "train") is prof
    res = get_workload("resnet50").profile("ci")
    images = res.batches * res.batch_size
    assert effective_profile(res, 16, "features").batches == images // 16
    assert effective_profile(res, images, "features").batches == 1
    with pytest.raises(RosettaError, match=f"larger than the data .* use at most {images}$"):
        check_batch_size(get_workload("resnet50"), res, images + 1)
    limit = min(prof.train_samples, prof.test_samples)
    check_batch_size(gru, prof, limit)  # exactly one batch of each: fine
    with pytest.raises(RosettaError, match=f"use at most {limit}$"):
        check_batch_size(gru, prof, limit + 1)


def test_precision_names_known_supported_and_device():
    from types import SimpleNamespace

    assert precision_unsupported("numpy_ref", "fp32", "cpu") == ""
    assert "does not run precision bf16 (it supports fp32)" in precision_unsupported(
        "numpy_ref", "bf16", "cpu"
    )
    why = precision_unsupported("chainer", "bf16", "cpu")
    assert "Chainer computes in its arrays' dtype" in why  # the package's own reason
    fp16 = SimpleNamespace(PRECISIONS=("fp32", "bf16", "fp16"))  # a backend that runs fp16
    assert "fp16 runs on CUDA only" in precision_unsupported("x", "fp16", "cpu", package=fp16)
    assert precision_unsupported("x", "fp16", "cuda", package=fp16) == ""
    assert precision_unsupported("x", "fp16", "auto", package=fp16) == ""  # decided in the cell
    assert "needs --dtype float32" in precision_unsupported("x", "bf16", "cpu", "float64", fp16)
    with pytest.raises(RosettaError, match="unknown precision 'fp8'; valid: fp32, bf16, fp16"):
        precision_unsupported("numpy_ref", "fp8", "cpu")
    # a cell asked for bf16 on a backend without it refuses to build (never fp32 claiming bf16)
    with pytest.raises(RosettaError, match="does not run precision bf16"):
        CellConfig("numpy_ref", "gru", precision="bf16").runtime_request()


def test_profiles_name_their_rounds_and_the_sweep_grid():
    assert BENCH_PROFILES["ci"].repeat == 1 and BENCH_PROFILES["smoke"].repeat == 6
    assert BENCH_PROFILES["smoke"].timing_rounds == 5  # the training run + 5 timing rounds
    sweep = BENCH_PROFILES["sweep"]
    assert sweep.threads == (1, None) and sweep.precisions == ("fp32", "bf16")
    for name in ("cnn", "gru", "resnet50"):  # every sweep batch fits every workload's data
        w = get_workload(name)
        for b in sweep.batch_sizes:
            check_batch_size(w, w.profile(sweep.spec_profile), b)


def test_the_sweep_grid_leaves_bf16_on_one_thread_out_unless_an_axis_is_given(tmp_path, small_data):
    from rosetta.runner.matrix import round_cells
    from rosetta.runner.plan import BenchOptions, Plan

    def points(**given) -> set:
        opts = BenchOptions(profile="sweep", backends="torch,jax", workloads="gru",
                            data_dir=str(small_data), results_dir=str(tmp_path / "results"),
                            no_report=True, device="cpu", **given)  # fmt: skip
        plan = Plan.from_options(opts)
        cells = round_cells(plan)
        assert len({c.backend for c in cells}) == 2
        assert {c.data_dir for c in cells} == {str(small_data.absolute())}  # resolved once
        return {(c.batch_size, c.precision, c.threads) for c in cells}, plan.axes_text()

    grid, text = points()
    assert grid == {(b, p, t) for b in (16, 64) for p, t in
                    (("fp32", 1), ("fp32", None), ("bf16", None))}  # fmt: skip
    assert text == (
        "batch 16,64 x fp32,bf16 x threads 1,all (without bf16 threads 1) x 1 round "
        "(the training run)"
    )
    product, text = points(threads="1,all")  # an axis given: the whole product
    assert len(product) == 8 and (16, "bf16", 1) in product and "without" not in text


# -- the quiet machine ----------------------------------------------------------------------------


def test_busy_means_load_or_a_hungry_process_and_names_the_top_one():
    assert quiet.busy_reason(quiet.MachineLoad(0.4, 2, "idle", 1, 5.0)) == ""
    why = quiet.busy_reason(quiet.MachineLoad(1.0, 2, "x", 7, 3.0))
    assert why.startswith("machine busy: 1-minute load 1.00 >= 0.5 x 2 cores (1)")
    why = quiet.busy_reason(quiet.MachineLoad(0.1, 2, "stress", 4242, 95.0))
    assert "another process uses 95% CPU > 20%" in why and "stress (pid 4242, 95% CPU)" in why
    assert "\n" not in why


def test_wait_quiet_waits_until_quiet_or_the_limit():
    readings = [busy_reader(), busy_reader(), quiet.MachineLoad(0.2, 2, "idle", 1, 1.0)]
    now = [0.0]

    def sleep(s):
        now[0] += s

    res = quiet.check_quiet(60, reader=lambda: readings.pop(0), sleep=sleep, clock=lambda: now[0])
    assert res["quiet"] and res["warning"] == "" and res["waited_s"] == 2 * quiet.POLL_S
    now[0] = 0.0
    res = quiet.check_quiet(12, reader=busy_reader, sleep=sleep, clock=lambda: now[0])
    assert not res["quiet"] and res["waited_s"] == 12 and "stress" in res["warning"]
    now[0] = 0.0
    res = quiet.check_quiet(0, reader=busy_reader, sleep=sleep, clock=lambda: now[0])
    assert res["waited_s"] == 0 and not res["quiet"]  # no wait asked: one reading, warned


# -- refusals before anything runs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args,message",
    [
        (["--batch-sizes", "0"], "--batch-sizes 0: a batch needs at least 1 sample"),
        (["--batch-sizes", "16,x"], "--batch-sizes 'x': not an integer"),
        (["--batch-sizes", "2.5"], "--batch-sizes '2.5': not an integer"),
        (["--batch-sizes", "100000"], "--batch-sizes 100000: larger than the data of profile"),
        (["--precisions", "fp32,fp8"], "unknown precision 'fp8'; valid: fp32, bf16, fp16"),
        (["--batch-sizes", ""], "--batch-sizes '': no batch size given; give positive integers"),
        (["--precisions", ""], "--precisions '': an empty name; give a comma list of fp32, bf16"),
        (["--precisions", "fp32,"], "--precisions 'fp32,': an empty name"),
    ],
)
def test_bad_axes_are_one_line_and_run_nothing(tmp_path, capsys, args, message):
    code = main(["bench", "--profile", "ci", "--results-dir", str(tmp_path / "results"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err, err
    assert not (tmp_path / "results").exists()


# -- a sweep, through real cell processes ---------------------------------------------------------


def test_a_ci_sweep_records_every_point_and_skips_bf16_with_its_reason(
    tmp_path, small_data, monkeypatch, capsys
):
    monkeypatch.setattr(quiet, "read_load", busy_reader)  # a busy machine, simulated
    args = ["--backends", "numpy_ref", "--workloads", "gru", "--executor", "python",
            "--batch-sizes", "32,64", "--precisions", "fp32,bf16"]  # fmt: skip
    assert bench(tmp_path, small_data, *args, "--run-id", "sw") == 0
    out = capsys.readouterr().out
    assert "warning: machine busy:" in out and "stress (pid 4242, 95% CPU)" in out
    recs = run_files(tmp_path, "sw")
    assert set(recs) == {"numpy_ref__gru__b32", "numpy_ref__gru__b64",
                         "numpy_ref__gru__b32-bf16", "numpy_ref__gru__b64-bf16"}  # fmt: skip
    prof = get_workload("gru").profile("ci")
    for b in (32, 64):
        ok = recs[f"numpy_ref__gru__b{b}"]
        assert ok["status"] == "ok" and ok["equivalence"]["equivalent"]
        assert ok["point"] == {"batch_size": b, "precision": "fp32", "round": 0,
                               "kind": "training", "lane": "fast"}  # fmt: skip
        assert ok["manifest"]["runtime"]["threads"] >= 1  # the count in effect, stored once
        assert "threads" not in ok["manifest"] and "device" not in ok["manifest"]
        assert ok["metrics"]["steps"] == prof.epochs * (prof.train_samples // b)  # samples kept
        flagged = [f for f in ok["flags"] if f.startswith(f"batch {b} ")]
        if b == prof.batch_size:
            assert flagged == []
        else:
            assert flagged == [
                f"batch {b} \u2260 spec batch {prof.batch_size}: throughput only, optimiser "
                f"settings unchanged (learning rate and schedule are the spec's, tuned for "
                f"{prof.batch_size})"
            ]
        skipped = recs[f"numpy_ref__gru__b{b}-bf16"]
        assert skipped["status"] == "skipped" and skipped["point"]["precision"] == "bf16"
        assert "does not run precision bf16 (it supports fp32)" in skipped["error"]
    # the gate ran once: batch 64 computes the function batch 32 gated, and says whose verdict
    first, second = recs["numpy_ref__gru__b32"], recs["numpy_ref__gru__b64"]
    assert first["equivalence"]["reused_from"] == "" and first["config"]["gate_from"] == ""
    assert second["config"]["gate_from"].endswith("numpy_ref__gru__b32.json")
    assert second["equivalence"]["reused_from"] == "numpy_ref__gru__b32"
    assert second["equivalence"]["checks"] == first["equivalence"]["checks"]
    assert second["clocks"]["gate_s"] < first["clocks"]["gate_s"] / 10
    # batch-1 latency once per function and thread count: at the first batch size only, while
    # each point keeps its own throughput at its batch
    assert first["config"]["latency"] and not second["config"]["latency"]
    assert "latency" in first["metrics"] and "latency" not in second["metrics"]
    assert second["metrics"]["throughput_at_batch"]["batch"] == 64
    assert not (tmp_path / "results" / "sw" / ".data-cache").exists()  # decoded data: run-long
    run = json.loads((tmp_path / "results" / "sw" / "run.json").read_text())
    cfg = run["config"]
    assert cfg["batch_sizes"] == [32, 64] and cfg["precisions"] == ["fp32", "bf16"]
    assert cfg["threads"] == [None] and cfg["repeat"] == 1
    assert run["round_orders"] == [["numpy_ref__gru__b32", "numpy_ref__gru__b32-bf16",
                                    "numpy_ref__gru__b64", "numpy_ref__gru__b64-bf16"]]  # fmt: skip
    assert "stress" in run["quiet_checks"][0]["warning"]
    index = json.loads((tmp_path / "results" / "sw" / "index.json").read_text())["cells"]
    assert set(index) == set(recs)
    # a resume with other axes is refused in one line; with the same ones it runs nothing
    capsys.readouterr()
    other = [a if a != "32,64" else "32" for a in args]
    assert bench(tmp_path, small_data, *other, "--resume", "sw") == 2
    err = capsys.readouterr().err.strip()
    assert "was made with batch_sizes=[32, 64], not [32]" in err and "\n" not in err
    before = {k: json.dumps(v) for k, v in recs.items()}
    assert bench(tmp_path, small_data, *args, "--resume", "sw") == 0
    assert {k: json.dumps(v) for k, v in run_files(tmp_path, "sw").items()} == before
    assert len(json.loads((tmp_path / "results" / "sw" / "run.json").read_text())
               ["quiet_checks"]) == 1  # nothing ran: no new reading  # fmt: skip


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_retry_failed_reruns_only_the_failed_point(tmp_path, small_data, monkeypatch, capsys):
    fault_env(monkeypatch, "raise")
    monkeypatch.setenv("ROSETTA_FAULT_THREADS", "1")  # the fault hits the 1-thread point only
    args = ["--backends", "fault", "--workloads", "gru", "--executor", "python",
            "--threads", "1,2", "--oversubscribe"]  # fmt: skip
    assert bench(tmp_path, small_data, *args, "--run-id", "rp") == 1
    recs = run_files(tmp_path, "rp")
    assert recs["fault__gru__t1"]["status"] == "failed"
    assert recs["fault__gru__t1"]["config"]["threads"] == 1  # the request, for a failed cell
    assert recs["fault__gru__t2"]["status"] == "ok"
    kept = (tmp_path / "results" / "rp" / "fault__gru__t2.json").read_text()
    monkeypatch.setenv("ROSETTA_FAULT", "")
    assert bench(tmp_path, small_data, *args, "--resume", "rp", "--retry-failed") == 0
    assert run_files(tmp_path, "rp")["fault__gru__t1"]["status"] == "ok"
    assert (tmp_path / "results" / "rp" / "fault__gru__t2.json").read_text() == kept
    attempts = [p.name for p in (tmp_path / "results" / "rp" / "attempts").glob("*.json")]
    assert len(attempts) == 1 and attempts[0].startswith("fault__gru__t1.failed.")
