"""Issue 33, item 1: spec text is data. A hostile layer name or description never becomes code in
a generated file (even when it bypasses the loader), and the loader refuses it in the first place
with one line, through ``rosetta list --spec FILE``.

Proof that no code runs: every generated file compiles, and its syntax tree holds no name
``__import__`` and no attribute ``system`` (the payload, were it code anywhere in the file,
would parse into both); the NumPy file is also executed (top level, ``build()`` and a ``check``
of forward, loss, gradients and one step) and its results match the file generated from the same
model under plain names, while the payload's marker file is never created."""

from __future__ import annotations

import ast
import dataclasses
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from rosetta import codegen
from rosetta.cli import main
from rosetta.spec import canonical_weights, load_workload, ops
from rosetta.spec.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "tests/workloads/mlp.yaml"
MODELS = ROOT / "rosetta/models"


def _payloads(marker: str) -> list[str]:
    run = f'__import__("os").system("touch {marker}")'
    return [
        f'x" + str({run})[:0] + "',  # breaks out of a hand-built "..." literal
        f'd"""; {run}; """',  # breaks out of a docstring
        f"t'''; {run}; '''",
        f"b\\'; {run} #\\",  # backslashes
        f"n\n{run}\n",  # newlines
        f"u\u2028{run}\u2028",  # a line separator to str.splitlines
        f"{{x}}{{s}}{{0}}{{}}; {run}",  # format braces and the renderers' own {x} templates
        f"a=1;{run};b",  # an assignment statement were it pasted into `self.NAME = ...`
    ]


def _renamed(nodes: tuple, names: list[str], taken: list[str]) -> tuple:
    out = []
    for node in nodes:
        if isinstance(node, ops.Residual):
            body = _renamed(node.body, names, taken)
            shortcut = _renamed(node.shortcut, names, taken)
            out.append(dataclasses.replace(node, body=body, shortcut=shortcut))
        elif hasattr(node, "name"):
            name = f"{names[len(taken) % len(names)]}{len(taken)}"
            taken.append(name)
            out.append(dataclasses.replace(node, name=name))
        else:
            out.append(node)
    return tuple(out)


def _hostile(w: Workload, marker: str) -> Workload:
    """``w`` built directly (past the loader) with hostile layer names and description."""
    names = _payloads(marker)
    graph = _renamed(w.graph, names, [])
    return dataclasses.replace(w, graph=graph, description=" ".join(names))


def _assert_no_code_from_spec(text: str, where: str) -> ast.Module:
    tree = ast.parse(compile(text, where, "exec", ast.PyCF_ONLY_AST))
    compile(tree, where, "exec")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "__import__" not in names, f"{where}: spec text became code"
    assert "system" not in attrs, f"{where}: spec text became code"
    return tree


@pytest.mark.parametrize(
    "workload", [MLP, MODELS / "resnet50.yaml", MODELS / "gru.yaml"], ids=["mlp", "resnet50", "gru"]
)
@pytest.mark.parametrize("backend", codegen.BACKENDS)
def test_hostile_names_and_description_stay_data_in_every_backend(backend, workload, tmp_path):
    marker = tmp_path / "MARKER"
    w = _hostile(load_workload(workload), str(marker))
    gen = codegen.generate(w, backend)
    tree = _assert_no_code_from_spec(gen.text, gen.name)
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert w.description in constants  # carried whole, as a string literal
    assert {p.name for p in w.param_specs} <= constants  # every canonical name, exactly
    assert "/" not in gen.name and gen.name.endswith(f"_{backend}.py")
    assert not marker.exists()


def _run_numpy_file(w: Workload, weights: dict, x, y, monkeypatch) -> tuple:
    """Import the generated NumPy file as a module, then run its ``check``."""
    module = types.ModuleType(f"generated_{id(w)}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # its dataclasses look it up
    exec(compile(codegen.generate(w, "numpy_ref").text, module.__name__, "exec"), module.__dict__)  # noqa: S102
    return module, module.check(weights, x, y, 1, "float64")


def test_the_numpy_file_runs_hostile_names_as_data(tmp_path, monkeypatch):
    """Executed, the NumPy file under hostile names computes what it computes under plain ones."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    plain = load_workload(MLP)
    hostile = _hostile(plain, str(marker))
    weights = canonical_weights(plain, seed=0, dtype="float64")
    rename = {p.name: q.name for p, q in zip(plain.param_specs, hostile.param_specs, strict=True)}
    x = np.random.default_rng(0).standard_normal((4, *plain.input.shape))
    y = np.array([0, 3, 9, 1])
    _, want = _run_numpy_file(plain, weights, x, y, monkeypatch)
    ns, got = _run_numpy_file(
        hostile, {rename[k]: v for k, v in weights.items()}, x, y, monkeypatch
    )
    assert ns.DESCRIPTION == hostile.description
    assert set(ns.SHAPES) == set(rename.values())
    for key, value in want.items():
        kind, _, name = key.partition(":")
        other = f"{kind}:{rename[name]}" if name else key
        np.testing.assert_array_equal(got[other], value)
    assert not marker.exists()


def _spec_with(tmp_path, old: str, new: str):
    text = MLP.read_text()
    assert old in text
    path = tmp_path / "mlp.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


DESC = "description: 3072-256-10 multilayer perceptron trained on CIFAR-10 (SGD with momentum)"
HOSTILE_DESC = r'description: "d\"\"\"; __import__(\"os\").system(\"touch M\"); \"\"\"\nx"'


@pytest.mark.parametrize(
    ("old", "new", "field", "rule"),
    [
        (DESC, HOSTILE_DESC, "description", "one line of printable text"),
        (DESC, r'description: "a\u2028b"', "description", "printable"),
        (DESC, "description: " + "x" * 501, "description", "at most 500 characters"),
        (
            "name: fc1",
            r"""name: 'x" + str(__import__("os").system("touch M"))[:0] + "'""",
            "layers[1].name",
            "[A-Za-z_][A-Za-z0-9_]{0,63}",
        ),  # fmt: skip
        ("name: fc1", r'name: "fc\n1"', "layers[1].name", "[A-Za-z_]"),
        ("name: fc1", "name: '{x}'", "layers[1].name", "[A-Za-z_]"),
        ("name: fc1", "name: f" + "c" * 64, "layers[1].name", "<= 64"),
    ],
    ids=["triple-quote", "u2028", "long", "quote-payload", "newline", "braces", "long-name"],
)
def test_list_spec_refuses_hostile_text_in_one_line(tmp_path, capsys, old, new, field, rule):
    path = _spec_with(tmp_path, old, new)
    assert main(["list", "--spec", str(path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert f"field '{field}'" in err and rule in err and "got " in err
    assert len(err) < 400  # the offending value shown cut, not whole
