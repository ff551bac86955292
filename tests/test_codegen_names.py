"""Issue 50 item 5: every name the spec accepts gives a generated file that runs. A layer called
``forward``, ``params`` or ``__class__`` replaced a method of the generated model class (torch,
Paddle) or broke Chainer's link registration, while the bench ran the spec ok and equivalent;
now such names are mangled (``rosetta.backends.snippet.attr``). Each file is executed and its
``check`` (forward, loss, gradients, one step, float64) compared with the same model under plain
names; numpy_ref and torch here, every other installed backend in the slow tier (its four
files in one fresh interpreter)."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import io
import keyword
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from rosetta import backends, codegen
from rosetta.backends.snippet import MODEL_ATTRIBUTES, attr
from rosetta.spec import canonical_weights, load_workload

MLP = Path(__file__).resolve().parent / "workloads" / "mlp.yaml"
#: names that broke a generated file (torch, Paddle, Chainer: the model's own attributes), the
#: issue's (np, self, x: the files' own locals), keywords, soft keywords, builtins and dunders
NAMES = [
    "forward",
    "params",
    "np",
    "self",
    "x",
    "__class__",
    "__init__",
    "training",
    "name",
    "children",
    "to",
    "type",
    "match",
    "print",
    "list",
    "weights",
    "call",
    "setup",
]
FAST = ("numpy_ref", "torch")


def _usable(backend: str) -> str:
    st = backends.status(backend)
    if not st.usable:
        pytest.skip(f"{backend}: {st.reason}")
    return backend


def _run(cases: dict, backend: str, x, y, folder: Path) -> dict:
    """Each case's (workload, weights) file's ``check`` outputs, by case: executed here for the
    fast two, else all of one backend's in one fresh interpreter (``tests/conformance/
    generated_run.py``'s ``run_files``: frameworks do not share one process well; one framework's
    files run one after another, each as ``__main__``)."""
    if backend not in FAST:
        from tests.conformance.generated_run import run_files

        jobs = {key: (codegen.generate(w, backend), w, weights, x, y)
                for key, (w, weights) in cases.items()}  # fmt: skip
        outs = run_files(jobs, "float64", folder, k=1)
        failed = {key: out for key, out in outs.items() if isinstance(out, str)}
        assert not failed, f"{backend}: {failed}"
        return outs
    return {key: _exec_here(w, backend, weights, x, y) for key, (w, weights) in cases.items()}


def _exec_here(w, backend: str, weights: dict, x, y) -> dict:
    gen = codegen.generate(w, backend)
    module = types.ModuleType(f"generated_{backend}_{id(w)}")
    sys.modules[module.__name__] = module  # its dataclasses look themselves up
    try:
        exec(compile(gen.text, module.__name__, "exec"), module.__dict__)  # noqa: S102
        with contextlib.redirect_stdout(io.StringIO()):
            return module.check(weights, x, y, 1, "float64")
    finally:
        del sys.modules[module.__name__]


def _named(plain, names: dict[str, str]):
    graph = tuple(dataclasses.replace(n, name=names[n.name]) if getattr(n, "name", "") in names
                  else n for n in plain.graph)  # fmt: skip
    return dataclasses.replace(plain, graph=graph)


@pytest.mark.parametrize(
    "backend", [b if b in FAST else pytest.param(b, marks=pytest.mark.slow)
                for b in codegen.BACKENDS],
)  # fmt: skip
def test_a_layer_named_like_the_files_own_names_runs_as_data(backend, tmp_path):
    _usable(backend)
    plain = load_workload(MLP)
    weights = canonical_weights(plain, seed=0, dtype="float64")
    x = np.random.default_rng(0).standard_normal((4, *plain.input.shape))
    y = np.array([0, 3, 9, 1])
    # every name here in process; the six, two a file, in one fresh process elsewhere
    names = NAMES if backend in FAST else ["__class__", "forward", "params", "np", "self", "x"]
    renames = [{"fc1": fc1, "fc2": fc2} for fc1, fc2 in zip(names[::2], names[1::2], strict=True)]

    def renamed(tensor: str, rename: dict) -> str:
        layer, _, rest = tensor.partition(".")
        return f"{rename.get(layer, layer)}.{rest}"

    cases = {"plain": (plain, weights)}
    for i, rename in enumerate(renames):
        cases[f"named{i}"] = (_named(plain, rename),
                              {renamed(k, rename): v for k, v in weights.items()})  # fmt: skip
    outs = _run(cases, backend, x, y, tmp_path)
    want = outs["plain"]
    for i, rename in enumerate(renames):
        got = outs[f"named{i}"]
        for key, value in want.items():
            kind, _, tensor = key.partition(":")
            other = f"{kind}:{renamed(tensor, rename)}" if tensor else key
            where = f"{backend}, layers {rename['fc1']!r}, {rename['fc2']!r}: {key}"
            np.testing.assert_allclose(got[other], value, rtol=1e-10, atol=1e-12, err_msg=where)


@pytest.mark.parametrize("wname", ["None", "class", "self", "np"])
def test_a_workload_named_like_a_keyword_and_a_description_with_percent_run(wname, capsys):
    """The class name of a workload called ``None`` or ``class``, and a description holding
    ``%(prog)s %d`` (argparse %-formats it), in the NumPy file: ``--help`` prints it as text."""
    plain = load_workload(MLP)
    w = dataclasses.replace(plain, name=wname, description="100%(prog)s %d % done")
    module = types.ModuleType(f"generated_{wname}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(codegen.generate(w, "numpy_ref").text, module.__name__, "exec"),  # noqa: S102
             module.__dict__)  # fmt: skip
        with pytest.raises(SystemExit) as e:
            module.main(["--help"])
    finally:
        del sys.modules[module.__name__]
    assert e.value.code == 0
    assert "100%(prog)s %d % done" in " ".join(capsys.readouterr().out.split())  # unwrapped


def test_reserved_names_are_mangled_and_plain_ones_kept():
    for name in [*keyword.kwlist, *keyword.softkwlist, "__class__", "__dict__", *MODEL_ATTRIBUTES]:
        got = attr(name)
        assert got != name and got.isidentifier() and not keyword.iskeyword(got), name
    assert attr("forward") != attr("forward_")  # two names stay apart
    for name in ("fc1", "conv1", "layer1.0.conv1", "embedding", "gru", "attn", "ln_final"):
        assert attr(name) == name.replace(".", "_")
    assert not {n for n in dir(builtins) if n.startswith("__")} - {
        n for n in dir(builtins) if attr(n) != n
    }  # builtins' dunders too


@pytest.mark.slow  # imports torch, paddle, chainer and keras
def test_the_frameworks_module_attributes_are_all_reserved():
    """The list is written out (the render face imports no framework): a framework upgrade that
    adds a module attribute fails here, naming it."""
    found = set()
    if backends.status("torch").usable:
        import torch

        found |= set(dir(torch.nn.Module()))
    if backends.status("paddle").usable:
        import paddle

        found |= set(dir(paddle.nn.Layer()))
    if backends.status("chainer").usable:
        from rosetta.backends.chainer import compat

        found |= set(dir(compat.load().Chain()))
    if backends.status("keras_jax").usable:
        import keras

        found |= set(dir(keras.layers.Layer()))
    public = {n for n in found if not n.startswith("_")}
    assert public, "no framework installed to read"
    assert public <= MODEL_ATTRIBUTES, sorted(public - MODEL_ATTRIBUTES)
