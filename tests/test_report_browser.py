"""The generated report opened in a real browser: headless Chromium over the DevTools protocol.

Asserts that the page rendered, the headline tables hold the fixture's numbers, every chart has
a non-zero size, the notebook links resolve to files and nothing was requested from the network
(every ``Network.requestWillBeSent`` is recorded from before navigation; a second test proves
that this recorder does catch sub-resource requests). The screenshot is kept as a test artifact
in ``$ROSETTA_TEST_ARTIFACTS`` (default ``report/_artifacts/``).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from report_fixtures import EXPECTED, write_fixture_runs, write_rounds_run, write_sweep_run

from tests.browser import Browser, find_chromium

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium binary (scripts/install_chromium.sh installs Debian's chromium; "
    "or set ROSETTA_CHROMIUM)",
)
ARTIFACTS = Path(
    os.environ.get(
        "ROSETTA_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "report/_artifacts"
    )
)

PROBE = """(() => {
  const tables = {};
  for (const t of document.querySelectorAll('table.headline')) {
    tables[t.dataset.workload] = [...t.querySelectorAll('tbody tr')].map(
      tr => [...tr.children].map(td => td.innerText.trim()));
  }
  const charts = [...document.querySelectorAll('figure svg.chart')].map(s => {
    const r = s.getBoundingClientRect();
    return {id: s.closest('figure').id, width: r.width, height: r.height};
  });
  const links = [...document.querySelectorAll('a.notebook')].map(a => a.href);
  return {title: document.title, textLength: document.body.innerText.length,
          sections: [...document.querySelectorAll('main > section')].map(s => s.id),
          tables, charts, links};
})()"""


def test_report_in_headless_chromium(tmp_path):
    from rosetta.report import write_report

    runs = write_fixture_runs(tmp_path / "results")
    index = write_report(list(runs), tmp_path / "report" / "fixture")
    url = index.resolve().as_uri()
    with Browser(CHROMIUM) as browser:
        visit = browser.visit(url, probe_js=PROBE, full_page=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report_browser_test.png"
    shot.write_bytes(visit.screenshot)
    assert visit.screenshot.startswith(b"\x89PNG") and len(visit.screenshot) > 10_000

    p = visit.probe
    # rendered: the title, every section, a page full of text, no script errors
    assert p["title"] == "Rosetta report: run-a vs run-b"
    assert {"headline", "steady", "ratios", "cold", "efficiency", "losses", "equivalence"} <= set(
        p["sections"]
    )
    assert p["textLength"] > 2000 and visit.console_errors == []
    # the headline tables with the fixture's numbers (run A, then run B)
    cnn = {r[0]: r[1:] for r in p["tables"]["cnn"]}
    assert cnn["torch"][:2] == [
        EXPECTED["cnn_torch_time"],
        f"{EXPECTED['cnn_torch_acc']} synthetic",
    ]
    assert cnn["jax"][1].endswith("not equivalent") and cnn["chainer"][0] == "failed"
    res = {r[0]: r[1:] for r in p["tables"]["resnet50"]}
    assert res["torch"][0].startswith(EXPECTED["resnet_torch_per1000"])
    gru = {r[0]: r[1:] for r in p["tables"]["gru"]}
    assert gru["torch"][:2] == [
        EXPECTED["gru_torch_time"],
        f"{EXPECTED['gru_torch_acc']} synthetic",
    ]
    # every chart has a size: steps and cold start per workload, losses per training run, a
    # roofline per workload and run
    assert "roofline" in p["sections"]
    assert len(p["charts"]) == 3 + 3 + 2 * 2 + 3 * 2
    assert all(c["width"] > 100 and c["height"] > 50 for c in p["charts"]), p["charts"]
    # the notebook links resolve to files
    assert len(p["links"]) == 2 * 8
    for link in p["links"]:
        u = urlparse(link)
        assert u.scheme == "file" and Path(unquote(u.path)).is_file(), link
    # nothing but the page itself was requested
    assert visit.requests[0] == url
    assert visit.external_requests(url) == []


@pytest.mark.slow  # quick-tier budget (stop 55): CI's slow tier runs it
def test_rounds_and_scaling_render_in_headless_chromium(tmp_path):
    """The per-round chart and the scaling section's charts render, fetch nothing, raise no
    script error (the page keeps its default-src 'none' policy)."""
    from rosetta.report import write_report

    runs = [write_rounds_run(tmp_path / "results"), write_sweep_run(tmp_path / "results")]
    index = write_report(runs, tmp_path / "report" / "rounds")
    url = index.resolve().as_uri()
    with Browser(CHROMIUM) as browser:
        visit = browser.visit(url, probe_js=PROBE, full_page=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "report_rounds_browser_test.png").write_bytes(visit.screenshot)
    p = visit.probe
    assert "scaling" in p["sections"] and visit.console_errors == []
    ids = {c["id"] for c in p["charts"]}
    assert {"rounds-cnn", "rounds-gru", "batch-cnn-sweep", "threads-cnn-sweep"} <= ids
    assert all(c["width"] > 100 and c["height"] > 50 for c in p["charts"]), p["charts"]
    assert visit.external_requests(url) == []


def test_the_request_recorder_catches_a_fetch(tmp_path):
    """The network check is not vacuous: a page that loads a stylesheet and an image from the
    network (even one its CSP blocks, as the report's would) shows both requests."""
    page = tmp_path / "leaky.html"
    page.write_text(
        "<!DOCTYPE html><html><head>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        '<link rel="stylesheet" href="http://127.0.0.1:9/style.css"></head>'
        '<body><img src="http://127.0.0.1:9/chart.png"><p>leaky</p></body></html>'
    )
    url = page.as_uri()
    with Browser(CHROMIUM) as browser:
        visit = browser.visit(url)
    assert sorted(visit.external_requests(url)) == [
        "http://127.0.0.1:9/chart.png",
        "http://127.0.0.1:9/style.css",
    ]
