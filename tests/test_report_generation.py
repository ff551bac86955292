"""The report's generation view: a decoder's TTFT, decode p50/p99 and tokens/s per backend and
batch, the generation gate and the token agreement in words, and a backend that does not
generate with its reason; read from the records (text escaped, never markup)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pandas")
pytest.importorskip("jinja2")

from rosetta.report import load_tables, write_report  # noqa: E402
from rosetta.report.generation import generation_rows  # noqa: E402
from tests.report_fixtures import write_fixture_runs  # noqa: E402


def _generated(path, batches, gate=None, skipped=None):
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok"
    if skipped:
        rec["metrics"]["generation"] = {"skipped": skipped}
    else:
        rec["metrics"]["generation"] = {
            "prompt_len": 32, "new_tokens": 32, "gate": gate,
            "batches": [{"batch": b, "ttft_s": 0.01 * b, "decode_p50_s": 0.002,
                         "decode_p99_s": 0.004, "tokens_per_s": 100.0 * b,
                         "memory": {"kv_cache_bytes": b << 20, "rss_before_bytes": 1 << 30,
                                    "peak_rss_bytes": (1 << 30) + (3 << 19),
                                    "peak_device_bytes": (5 << 20) if b == 8 else None}}
                        for b in batches],
        }  # fmt: skip
    path.write_text(json.dumps(rec))


def test_generation_rows_and_the_section(tmp_path):
    first, _ = write_fixture_runs(tmp_path / "results")
    oks = sorted(
        p for p in first.glob("*.json")
        if p.name != "run.json" and json.loads(p.read_text()).get("status") == "ok"
    )  # fmt: skip
    same = {"equivalent": True, "logits_violation": 0.03, "tokens_equal": True}
    flipped = {"equivalent": True, "logits_violation": 0.2, "tokens_equal": False,
               "first_divergence": 5, "margin_at_divergence": 1.5e-6}  # fmt: skip
    _generated(oks[0], [1, 8], same)
    _generated(oks[1], [8, 1], flipped)
    _generated(oks[2], [], skipped="backend '<i>x</i>' does not generate yet")
    rows = generation_rows(load_tables([first]))
    gen = [r for r in rows if not r["skipped"]]
    assert len(gen) == 4 and len(rows) == 5
    by = {(r["backend"], r["batch"]): r for r in gen}
    one = next(r for r in gen if r["tokens"] == "identical" and r["batch"] == 8)
    assert (one["ttft"], one["p50"], one["p99"], one["tokens_per_s"]) == ("80.0", "2.00", "4.00",
                                                                         "800")  # fmt: skip
    assert any(r["tokens"] == "differ from token 5 (margin 1.5e-06)" for r in by.values())
    assert (one["kv_mib"], one["peak_mib"]) == ("8", "1026")  # bytes as MiB: 1024 + 1.5
    assert one["device_mib"] == "5" and by[(one["backend"], 1)]["device_mib"] == "-"  # none: "-"
    index = write_report([first], tmp_path / "report").read_text()
    section = index[index.index('<section id="generation">') :]
    section = section[: section.index("</section>")]
    assert section.count("<tr>") == 6  # the header and the five rows
    assert "&lt;i&gt;x&lt;/i&gt;" in section and "<i>x</i>" not in section
    assert section.count("<svg") == 1 and "tokens/s per backend and batch" in section
