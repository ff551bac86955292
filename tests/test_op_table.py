"""The op table is found by convention (``rosetta.backends.driver.discover``): one module per op
in a backend's ``ops/`` folder, named for its op. Planted packages check what it refuses."""

from __future__ import annotations

import textwrap

import pytest

from rosetta.backends.driver import Entry, discover
from rosetta.errors import BackendError
from rosetta.spec import ops

FACES = (
    "def build(op, site, ctx):\n    return 'built'\n\n\n"
    "def render(op, site, ctx):\n    return 'text'\n"
)


def _package(tmp_path, monkeypatch, name: str, modules: dict[str, str], init: str = "") -> str:
    """A package ``name.ops`` under ``tmp_path`` holding ``modules`` (file stem -> source)."""
    root = tmp_path / name / "ops"
    root.mkdir(parents=True)
    (tmp_path / name / "__init__.py").write_text("")
    (root / "__init__.py").write_text(textwrap.dedent(init))
    for stem, text in modules.items():
        (root / f"{stem}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}.ops"


def _discover(package: str):
    compose = Entry("sequence", lambda *a: None)
    return discover("toy", package, compose, compose)


def test_a_module_per_op_is_the_table_and_the_rest_are_gaps(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "toy_a", {"relu": FACES, "gelu": FACES, "_util": ""},
                   'UNSUPPORTED = {"gru": "no recurrent kernel here"}\n')  # fmt: skip
    table = _discover(pkg)
    assert set(table.entries) == {ops.ReLU, ops.GELU}  # _util.py is not an op module
    assert table.rendering().entry(ops.ReLU())(None, None, None) == "text"
    assert table.lowering({"sequence": print}).entry(ops.GELU())(None, None, None) == "built"
    assert table.unsupported == {"gru": "no recurrent kernel here"}
    gaps = table.gaps()
    assert "relu" not in gaps and "gru" not in gaps and "residual" not in gaps
    assert set(gaps) == set(ops.OPS) - {"relu", "gelu", "gru", "residual"}
    with pytest.raises(BackendError, match="backend 'toy' cannot lower op dense; it has: gelu"):
        table.rendering().entry(ops.Dense("fc", 2, True, {}))


@pytest.mark.parametrize(
    ("modules", "init", "message"),
    [
        ({"relu": FACES, "swish": FACES}, "", "swish.py names no op of the spec"),
        ({"residual": FACES}, "", "residual.py names no op of the spec"),
        ({"relu": "def build(op, site, ctx):\n    pass\n"}, "", "relu.py defines no render"),
        ({"relu": FACES}, 'UNSUPPORTED = {"relu": "why"}\n', "lowered .* and listed"),
        ({"relu": FACES}, 'UNSUPPORTED = {"swish": "why"}\n', "UNSUPPORTED names no op .*swish"),
        (
            {
                "relu": FACES + "HELPERS = {'h': 'one'}\n",
                "gelu": FACES + "HELPERS = {'h': 'two'}\n",
            },
            "",
            "two texts for the helper 'h'",
        ),
    ],
)
def test_what_discovery_refuses_is_one_line(tmp_path, monkeypatch, modules, init, message):
    pkg = _package(tmp_path, monkeypatch, f"toy_{abs(hash(message)) % 10**8}", modules, init)
    with pytest.raises(BackendError, match=message) as err:
        _discover(pkg)
    assert "\n" not in str(err.value)
