"""The runner: clocks, append-only records, one cell end to end, and a matrix that loses nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner import clock, records
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig
from rosetta.runner.matrix import run_matrix


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """Synthetic IMDB and CIFAR-10 just big enough for the ci profiles (512 train / 256 test)."""
    from rosetta import datasets

    d = tmp_path_factory.mktemp("data")
    datasets.write_synthetic_imdb(d, n_train=1000, n_test=500)
    datasets.write_synthetic_cifar10(d, n_train=1000, n_test=500)
    return d


def test_summarize_median_interval_and_quartiles():
    times = [1.0, 2.0, 3.0, 4.0, 100.0]
    s = clock.summarize(times)
    assert s.median == 3.0 and s.n == 5
    assert s.ci95_low <= s.median <= s.ci95_high
    assert (s.q25, s.q75) == (2.0, 4.0)
    assert s.mean == pytest.approx(22.0)
    with pytest.raises(ValueError):
        clock.summarize([])


def test_records_are_append_only(tmp_path):
    path = records.record_path(tmp_path, "r1", "numpy_ref", "gru")
    rec = records.make_record(backend="numpy_ref", workload="gru", profile="ci", status="ok")
    records.write_record(path, rec)
    with pytest.raises(RosettaError, match="append-only"):
        records.write_record(path, {**rec, "status": "failed"})
    assert json.loads(path.read_text())["status"] == "ok"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    assert records.read_records(path.parent)[0]["schema_version"] == records.SCHEMA_VERSION


def test_gru_cell_end_to_end_on_synthetic_data(small_data):
    rec = run_cell(CellConfig("numpy_ref", "gru", "ci", data_dir=str(small_data)))
    assert rec["status"] == "ok" and rec["equivalence"]["equivalent"]
    c, m = rec["clocks"], rec["metrics"]
    assert m["steps"] == 512 // 64  # complete batches only
    assert len(c["steady_raw_s"]) == m["steps"] - 1  # the first step belongs to the cold start
    assert c["steady"]["ci95_low"] <= c["steady"]["median"] <= c["steady"]["ci95_high"]
    assert c["cold_start_s"] >= c["import_build_s"] > 0
    assert c["end_to_end_s"] >= sum(c["steady_raw_s"])
    assert m["test_samples"] == 256 and 0.0 <= m["test_accuracy"] <= 1.0
    man = rec["manifest"]
    assert man["data_source"] == "synthetic" and man["data_checksum"].startswith("sha256:")
    assert (
        man["profile"] == "ci" and man["precision"] == "float32" and man["numpy"] == np.__version__
    )


def test_matrix_records_skips_failures_and_timeouts_and_resumes(tmp_path, small_data, monkeypatch):
    out = tmp_path / "results"
    empty = tmp_path / "no-data"
    empty.mkdir()
    seen: list[str] = []
    # torch made unusable here (it has a lowering now): its cells are skipped with the reason
    real_version = backends._version
    monkeypatch.setattr(backends, "_version", lambda d: "" if d == "torch" else real_version(d))
    # a cell whose data is missing fails with the loader's one-line reason; torch is skipped
    run_matrix(
        ["numpy_ref", "torch"],
        ["cnn"],
        "ci",
        run_id="r",
        results_dir=out,
        data_dir=str(empty),
        echo=seen.append,
    )
    # a cell that outlives its timeout is killed and recorded
    run_matrix(
        ["numpy_ref"],
        ["resnet50"],
        "ci",
        run_id="r",
        results_dir=out,
        timeout_s=0.5,
        echo=seen.append,
    )
    recs = {(r["backend"], r["workload"]): r for r in records.read_records(out / "r")}
    assert recs[("numpy_ref", "cnn")]["status"] == "failed"
    error = recs[("numpy_ref", "cnn")]["error"]
    assert "cifar-10-python.tar.gz" in error and "rosetta data synth" in error
    assert not error.startswith("rosetta: error")
    assert recs[("torch", "cnn")]["status"] == "skipped"
    assert recs[("numpy_ref", "resnet50")]["status"] == "timeout"
    # resuming the same run id keeps every record and runs nothing again
    before = {p.name: p.read_text() for p in (out / "r").iterdir()}
    run_matrix(
        ["numpy_ref", "torch"],
        ["cnn"],
        "ci",
        run_id="r",
        results_dir=out,
        data_dir=str(small_data),
        echo=seen.append,
    )
    assert {p.name: p.read_text() for p in (out / "r").iterdir()} == before
    assert sum("already recorded" in s for s in seen) == 2


def test_bench_command_runs_and_summarises(tmp_path, small_data, capsys):
    from rosetta.cli import main

    code = main(
        [
            "bench",
            "--backends",
            "numpy_ref,chainer",
            "--workloads",
            "gru",
            "--run-id",
            "t",
            "--data-dir",
            str(small_data),
            "--results-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("gru       numpy_ref"))
    assert " ok " in row and " yes " in row and "(synthetic)" in row
    assert "gru       chainer     skipped" in out
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == [
        "chainer__gru.json",
        "numpy_ref__gru.json",
    ]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--backends", "mxnet"], "unknown backend 'mxnet'; valid: numpy_ref, torch"),
        (["--workloads", "lstm"], "unknown workload 'lstm'; valid: cnn, gru, resnet50"),
        (["--profile", "huge"], "unknown profile 'huge'; valid: ci, smoke, full"),
    ],
)
def test_bench_rejects_bad_names_before_running_anything(tmp_path, capsys, args, message):
    from rosetta.cli import main

    assert main(["bench", "--results-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rosetta: error: ") and message in err and "\n" not in err
    assert not any(tmp_path.iterdir())


def test_interrupted_bench_keeps_records_and_says_how_to_resume(
    tmp_path, small_data, monkeypatch, capsys
):
    import subprocess

    from rosetta.cli import main

    real_run = subprocess.run
    calls = []

    def interrupt_second_cell(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", interrupt_second_cell)
    code = main(["bench", "--backends", "numpy_ref", "--workloads", "gru,cnn", "--run-id", "i",
                 "--data-dir", str(small_data), "--results-dir", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "interrupted; the records written so far are kept" in err and "--run-id i" in err
    # gru (first) was recorded; cnn (interrupted) left no record, partial or otherwise
    assert sorted(p.name for p in (tmp_path / "i").iterdir()) == ["numpy_ref__gru.json"]
