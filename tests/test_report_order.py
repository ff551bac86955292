"""Titles and the order of workloads come from the specs: a new workload edits no report code."""

from __future__ import annotations

import shutil

import pytest

from rosetta.errors import RosettaError
from rosetta.report import order
from rosetta.spec import load_workload, models_dir


@pytest.fixture
def own_models(tmp_path, monkeypatch):
    """A models folder with the three shipped specs plus ``alpha`` (a copy of the gru), order 0."""
    for p in models_dir().glob("*.yaml"):
        shutil.copy(p, tmp_path / p.name)
    text = (tmp_path / "gru.yaml").read_text()
    text = text.replace("\nname: gru\n", "\nname: alpha\n", 1)
    text = text.replace('title: "GRU (IMDB): training time"', 'title: "Alpha, first of all"')
    text = text.replace("\norder: 3", "\norder: 0", 1)
    (tmp_path / "alpha.yaml").write_text(text)
    monkeypatch.setenv("ROSETTA_MODELS", str(tmp_path))
    order._spec_place.cache_clear()
    yield tmp_path
    order._spec_place.cache_clear()


def test_shipped_order_and_titles_come_from_the_specs():
    assert order.workload_order(["gru", "resnet50", "cnn"]) == ["cnn", "resnet50", "gru"]
    assert order.workload_title("resnet50") == (
        "ResNet-50 feature extraction: average time per 1000 images"
    )
    # a workload whose spec is gone (an old record) comes last, titled by its name
    assert order.workload_order(["gone", "gru"]) == ["gru", "gone"]
    assert order.workload_title("gone") == "gone"


def test_a_new_spec_places_and_titles_itself(own_models):
    assert order.workload_order(["gru", "alpha", "cnn"]) == ["alpha", "cnn", "gru"]
    assert order.workload_title("alpha") == "Alpha, first of all"


@pytest.mark.parametrize(
    "line,field",
    [('title: "two\\nlines"', "title"), ("title: 12", "title"), ("order: -1", "order")],
)
def test_bad_title_or_order_is_one_line_naming_the_field(tmp_path, line, field):
    src = (models_dir() / "cnn.yaml").read_text()
    key = line.split(":")[0]
    lines = [x for x in src.splitlines() if not x.startswith(f"{key}:")]
    lines.insert(lines.index("name: cnn") + 1, line)
    path = tmp_path / "cnn.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RosettaError) as err:
        load_workload(path)
    msg = str(err.value)
    assert "\n" not in msg and field in msg and "cnn.yaml" in msg


def test_title_and_order_are_optional(tmp_path):
    src = (models_dir() / "cnn.yaml").read_text()
    lines = [x for x in src.splitlines() if not x.startswith(("title:", "order:"))]
    (tmp_path / "cnn.yaml").write_text("\n".join(lines) + "\n")
    w = load_workload(tmp_path / "cnn.yaml")
    assert (w.title, w.order) == ("cnn", 1000)
