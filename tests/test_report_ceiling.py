"""Of ceiling, roofline and reference fractions: a planted FLOP rate (a known step time) against
a planted ceiling, checked through the report's tables and the bench's summary; the matmul probe
standing in where the run measured no ceiling, stated; a broken reference file is one line."""

from __future__ import annotations

import html as htmllib
import json

import pytest
from report_fixtures import write_run
from test_report import Tables as Page

from rosetta.report import load_tables, references, write_report
from rosetta.report.ceilings import Ceiling, Ceilings
from rosetta.report.summary import summary
from rosetta.runner import records
from rosetta.spec import get_workload
from rosetta.spec.traffic import step_traffic

STEP_S = 0.100  # the cnn torch cell's median step: 64 / 0.1 = 640 samples/s
CELLS = {
    ("cnn", "torch"): dict(status="ok", step=STEP_S, e2e=123.45, acc=0.77),
    ("cnn", "numpy_ref"): dict(status="ok", step=1.0, e2e=700.0, acc=0.51),
}
CEILING = {
    "method": "fma kernel",
    "why": "",
    "threads": 2,
    "source": {"file": "ceiling.c", "sha256": "ab" * 32},
    "compiler": {"path": "/usr/bin/cc", "version": "cc 12.2.0", "flags": ["-O2"]},
    "fp32": {"kernel": "fma512", "gflops": 1000.0, "flop_per_cycle": 32.0},
    "bf16": {"kernel": "dpbf16", "gflops": 2000.0, "flop_per_cycle": 64.0},
    "bandwidth": {"gbs": 20.0, "how": "C STREAM triad"},
}
NO_COMPILER = "no C compiler found (tried cc, gcc, clang on PATH; set CC to one)"


def _gflops() -> float:
    """The planted rate: 640 samples/s x the spec's forward FLOPs x 3 (training)."""
    return 64 / STEP_S * get_workload("cnn").flops_per_sample((3, 32, 32)) * 3 / 1e9


def _intensity() -> float:
    t = step_traffic(get_workload("cnn"), 64)
    return 64 * get_workload("cnn").flops_per_sample() * 3 / t.total


def _run(tmp_path, ceiling: dict | None, name: str = "r", cpu: str = "Test EPYC"):
    """A fixture run on a machine of the kind ``_reference_file`` names (its CPU name and ISA;
    another ``cpu`` is another kind of machine)."""
    d = write_run(tmp_path / "results", name, CELLS)
    info = json.loads((d / "run.json").read_text())
    if ceiling is not None:
        info["peaks"] = {"ceiling": ceiling, "cpu_flags": ["avx2", "avx512f"]}
    info["environment"] = {**info.get("environment", {}), "cpu": cpu}
    (d / "run.json").write_text(json.dumps(info))
    return d, info


def _tables(d, tmp_path):
    text = write_report([d], tmp_path / "report").read_text()
    page = Page(text)
    eff = {r[2]: r for r in page.tables["efficiency-table"][1:] if r[1] == "cnn"}
    roof = {r[2]: r for r in page.tables["roofline-table"][1:] if r[1] == "cnn"}
    return htmllib.unescape(text), eff, roof


def test_of_ceiling_is_the_planted_rate_over_the_planted_ceiling(tmp_path):
    d, _ = _run(tmp_path, CEILING)
    t = load_tables([d])
    torch = t.cells[(t.cells["workload"] == "cnn") & (t.cells["backend"] == "torch")].iloc[0]
    assert torch["gflops"] == pytest.approx(_gflops(), rel=1e-9)
    assert torch["peak_fraction"] == pytest.approx(_gflops() / 1000.0, rel=1e-9)
    page, eff, _ = _tables(d, tmp_path)
    assert eff["torch"][7] == f"{_gflops() / 1000.0:.1%}" and eff["torch"][8] == "1000 fp32 FMA"
    assert "r: 1000 GFLOP/s fp32 FMA ceiling (fma512, 2 cores); 2000 GFLOP/s bf16" in page


def test_the_roofline_bound_follows_the_planted_bandwidth(tmp_path):
    # at 20 GB/s the ridge is 1000 / 20 = 50 FLOP/B, below the CNN step's ~110: compute-bound
    assert 60 < _intensity() < 500
    d, _ = _run(tmp_path, CEILING, "fast-memory")
    _, _, roof = _tables(d, tmp_path / "a")
    assert roof["torch"][3] == f"{_intensity():.3g}" and roof["torch"][7] == "compute-bound"
    assert roof["torch"][5] == "1e+03"  # attainable: the compute ceiling
    # at 0.5 GB/s the memory line (intensity x 0.5 < 1000) is the lower roof: memory-bound
    slow = {**CEILING, "bandwidth": {"gbs": 0.5, "how": "planted"}}
    d, _ = _run(tmp_path, slow, "slow-memory")
    _, _, roof = _tables(d, tmp_path / "b")
    assert roof["torch"][7] == "memory-bound"
    assert roof["torch"][5] == f"{_intensity() * 0.5:.3g}"
    assert roof["torch"][6] == f"{_gflops() / (_intensity() * 0.5):.1%}"


def test_above_the_ceiling_is_explained_beside_the_figure(tmp_path):
    low = {**CEILING, "fp32": {"kernel": "fma512", "gflops": _gflops() / 2}}
    d, info = _run(tmp_path, low)
    _, eff, _ = _tables(d, tmp_path)
    assert eff["torch"][7].startswith("200.0%") and "fewer multiplications" in eff["torch"][7]
    text = summary(records.read_records(d, []), info)
    assert "200.0% *" in text and "Winograd" in text
    # against a matmul probe, a figure above 100% says a framework can beat the probe
    probe = {**CEILING, "method": "matmul probe", "fp32": {"gflops": _gflops() / 2}}
    d, _ = _run(tmp_path, probe, "probe")
    _, eff, _ = _tables(d, tmp_path / "probe")
    assert "can beat the probe's library" in eff["torch"][7]


def test_no_compiler_falls_back_to_the_matmul_probe_stated(tmp_path):
    probe = {**CEILING, "method": "matmul probe", "why": NO_COMPILER, "compiler": None}
    probe["fp32"] = {"kernel": None, "gflops": 500.0, "what": "numpy 1024x1024 fp32 matmul"}
    probe["bf16"] = {"kernel": None, "gflops": None, "why": "no C compiler"}
    d, info = _run(tmp_path, probe)
    page, eff, _ = _tables(d, tmp_path)
    assert (
        eff["torch"][7] == f"{_gflops() / 500.0:.1%}" and eff["torch"][8] == "500 fp32 matmul probe"
    )
    assert f"fp32 matmul probe (numpy 1024x1024 fp32 matmul) ({NO_COMPILER})" in page
    assert (
        eff["torch"][10] == "not comparable (matmul probe)"
    )  # references are of measured ceilings
    text = summary(records.read_records(d, []), info)
    assert "matmul probe" in text and NO_COMPILER in text
    # a run that recorded no ceiling at all (older runs) reads its matmul probe, saying so
    d, _ = _run(tmp_path, None, "old")
    page, eff, _ = _tables(d, tmp_path / "old")
    assert eff["torch"][8] == "800 fp32 matmul probe"  # run.json's peak_gflops
    said = "old: 800 GFLOP/s fp32 matmul probe (NumPy 2048x2048 fp32 matmul) "
    assert said + "(this run recorded no measured ceiling)" in page


def test_a_cell_on_fewer_threads_is_held_to_its_share_of_the_cores():
    fp32 = Ceiling("fp32", 200.0, "fp32 FMA ceiling", True, cores=4)
    one = fp32.on(1)
    assert one.gflops == 50.0 and "scaled to 1 of 4 cores" in one.label
    assert fp32.on(4) is fp32 and fp32.on(None) is fp32 and fp32.on(8) is fp32
    probe = Ceiling("fp32", 200.0, "fp32 matmul probe", False, cores=4)
    assert probe.on(1) is probe  # a probe's rate does not scale by cores: left as measured


def test_bf16_without_its_own_ceiling_is_held_to_fp32s():
    fp32 = Ceiling("fp32", 200.0, "fp32 FMA ceiling", True)
    assert Ceilings((fp32,), 20.0).of("bf16") is fp32
    bf16 = Ceiling("bf16", 400.0, "bf16 dot-product ceiling", True)
    assert Ceilings((fp32, bf16), 20.0).of("bf16") is bf16


def _reference_file(path, fraction: float, **extra):
    doc = {
        "schema": 1,
        "machines": [
            {
                "cpu": "Test EPYC",
                "isa": ["avx2", "avx512f"],
                "flop_per_cycle_fp32": 32.0,
                "run": {"profile": "smoke", "placeholder": False},
                "fractions": [
                    {
                        "workload": "cnn",
                        "backend": "torch",
                        "precision": "fp32",
                        "batch": 64,
                        "fraction": fraction,
                    },
                    *extra.get("more", []),
                ],  # fmt: skip
            }
        ],
    }
    path.write_text(json.dumps(doc))
    return path


def test_a_cell_far_below_its_references_is_said_so(tmp_path, monkeypatch):
    frac = _gflops() / 1000.0
    d, info = _run(tmp_path, CEILING)
    monkeypatch.setattr(references, "DATA", _reference_file(tmp_path / "in.json", frac * 1.2))
    page, eff, _ = _tables(d, tmp_path / "in")
    assert eff["torch"][9] == f"{frac * 1.2:.0%}"
    assert "reference fractions from: Test EPYC (avx512f)" in page
    assert eff["torch"][10] == "in line" and eff["numpy_ref"][10] == "no reference"
    monkeypatch.setattr(references, "DATA", _reference_file(tmp_path / "far.json", frac * 3))
    _, eff, _ = _tables(d, tmp_path / "far")
    assert eff["torch"][10] == "far below"
    assert "far below" in summary(records.read_records(d, []), info)


def test_a_run_on_another_kind_of_machine_has_no_reference(tmp_path, monkeypatch):
    """Issue 50 item 6: a Zen 5 run was judged by the Zen 4's fractions ("far below" on every
    cell). A run whose machine kind (CPU name, family, ISA) has no entry gets none, and the page
    and the summary say how to make one; the same CPU name in another family is another kind."""
    frac = _gflops() / 1000.0
    monkeypatch.setattr(references, "DATA", _reference_file(tmp_path / "in.json", frac * 3))
    d, info = _run(tmp_path, CEILING, name="other", cpu="Test Other CPU")
    page, eff, _ = _tables(d, tmp_path / "other")
    assert eff["torch"][10] == "no reference"
    assert ("other ran on Test Other CPU (avx512f), 32.0 FLOP/cycle fp32 measured: no reference "
            "for this machine") in page  # fmt: skip
    assert "python -m benchmarks reference_fractions" in page
    text = summary(records.read_records(d, []), info)
    assert "far below" not in text and "no reference for this machine" in text
    # the same name and ISA, another family (Zen 4 is 25, Zen 5 26): no reference either
    d2, info2 = _run(tmp_path, CEILING, name="fam")
    info2["environment"]["cpu_family"] = {"family": 26, "model": 2}
    (d2 / "run.json").write_text(json.dumps(info2))
    doc = json.loads((tmp_path / "in.json").read_text())
    doc["machines"][0]["family"] = 25
    (tmp_path / "fam.json").write_text(json.dumps(doc))
    monkeypatch.setattr(references, "DATA", tmp_path / "fam.json")
    _, eff, _ = _tables(d2, tmp_path / "famrep")
    assert eff["torch"][10] == "no reference"


def test_a_broken_reference_file_is_one_line_not_a_crash(tmp_path, monkeypatch):
    d, _ = _run(tmp_path, CEILING)
    bad = _reference_file(tmp_path / "bad.json", 0.1, more=[{"workload": "cnn", "fraction": "x"}])
    monkeypatch.setattr(references, "DATA", bad)
    page, eff, _ = _tables(d, tmp_path / "bad")
    assert eff["torch"][10] in ("in line", "far below", "above the references")
    assert "bad.json: Test EPYC (avx512f): a fraction entry is malformed" in page
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    monkeypatch.setattr(references, "DATA", garbage)
    page, eff, _ = _tables(d, tmp_path / "garbage")
    assert eff["torch"][10] == "no reference"
    assert "garbage.json: unreadable (JSONDecodeError); no reference fractions" in page


def test_refreshing_a_machines_fractions_keeps_its_run_to_run_spread(tmp_path):
    """``benchmarks.reference_fractions`` replaces a machine's fractions; the run-to-run spread
    measured from other runs (``between_runs``, rosetta.report.rerun) stays with the machine."""
    from benchmarks.reference_fractions import main as refresh

    d, _ = _run(tmp_path, CEILING)
    data = tmp_path / "ref.json"
    assert refresh([str(d), "--data", str(data)]) == 0
    doc = json.loads(data.read_text())
    spread = {"sd_log": 0.05, "cells": 15, "pairs": [["a", "b"]], "note": "measured"}
    doc["machines"][0]["between_runs"] = spread
    data.write_text(json.dumps(doc))
    assert refresh([str(d), "--data", str(data)]) == 0
    (machine,) = json.loads(data.read_text())["machines"]
    assert machine["between_runs"] == spread and machine["fractions"]
