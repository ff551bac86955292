"""Source generation (``rosetta.codegen``, ``rosetta code``): coverage in step with the lowering
tables, text only, one-line errors, and the layout conversions the files carry checked against
independent NumPy computations. Running the files against the reference is the conformance
suite's job (``tests/conformance/test_generated_source.py``)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from rosetta import backends, codegen
from rosetta.backends import filetext as common
from rosetta.backends.driver import Entry, lower
from rosetta.backends.snippet import RenderCtx
from rosetta.cli import main
from rosetta.errors import BackendError
from rosetta.spec import get_workload, ops, workload_names

STDLIB_OK = {"argparse", "dataclasses", "__future__", "collections", "math", "os", "warnings",
             "contextlib", "io", "sys"}  # fmt: skip


@pytest.mark.parametrize("backend", codegen.BACKENDS)
def test_both_faces_come_from_the_one_op_table(backend):
    """The lowering TABLE (where the framework imports) and RENDER are faces of source.OPS: the
    same op classes, and each build entry is the ``build`` of the op's module (ops/<op>.py)."""
    try:
        lowering = importlib.import_module(f"rosetta.backends.{backend}.lowering")
    except Exception as exc:  # noqa: BLE001 - any import failure is a reason to skip
        pytest.skip(f"{backend}: lowering does not import here ({type(exc).__name__}: {exc})")
    table = codegen.op_table(backend)
    assert set(lowering.TABLE.entries) == set(codegen.render_table(backend).entries)
    for op, module in table.entries.items():
        assert module.__name__.endswith(f".ops.{op.OP}")
        assert lowering.TABLE.entries[op] is module.build


def test_an_op_table_naming_a_missing_build_function_is_one_line():
    """A planted defect: a composing entry whose build function lowering.py lacks fails when
    the table is made, naming the backend and the function."""
    table = codegen.op_table("numpy_ref")
    broken = dataclasses.replace(table, sequence=Entry("sequence_missing", table.sequence.render))
    lowering = importlib.import_module("rosetta.backends.numpy_ref.lowering")
    with pytest.raises(BackendError) as err:
        broken.lowering(vars(lowering))
    msg = str(err.value)
    assert "numpy_ref" in msg and "'sequence_missing'" in msg and "\n" not in msg


def _lowered_pairs() -> list[tuple[str, str]]:
    """Every (workload, backend) whose ops the backend's table lowers."""
    return [(w, b) for w in workload_names() for b in codegen.BACKENDS
            if not backends.missing_ops(b, get_workload(w))]  # fmt: skip


@pytest.mark.parametrize("backend", codegen.BACKENDS)
def test_render_table_covers_every_op_of_the_spec_format(backend):
    """Independent of any port: every op the spec format admits (residual is the driver's), less
    what the backend declares unsupported (``ops/__init__.py``: none, today)."""
    declared = codegen.op_table(backend).unsupported
    spec_ops = {cls for name, cls in ops.OPS.items() if name != "residual" and name not in declared}
    assert set(codegen.render_table(backend).entries) == spec_ops


def test_generating_every_file_imports_no_framework(tmp_path):
    code = (
        "import sys\n"
        "from rosetta import codegen\n"
        f"codegen.write_all({str(tmp_path)!r})\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'tensorflow', 'keras', 'jax', 'flax', 'optax', 'chainer', 'paddle',"
        " 'pytensor'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert len(list(tmp_path.glob("*.py"))) == len(_lowered_pairs())


@pytest.mark.parametrize("backend", codegen.BACKENDS)
@pytest.mark.parametrize("workload", ["cnn", "gru", "resnet50", "transformer"])
def test_generated_file_is_python_importing_only_numpy_and_its_framework(backend, workload):
    why = backends.lowering_unsupported(backend, get_workload(workload))
    if why:  # a backend added beside a workload's new ops: one line naming them, no file
        with pytest.raises(BackendError, match="cannot lower op"):
            codegen.generate(workload, backend)
        pytest.skip(why)
    text = codegen.generate(workload, backend).text
    tree = ast.parse(text)  # a syntax error fails here
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert "rosetta" not in imported
    assert imported - STDLIB_OK <= set(codegen.imports(backend)), imported
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assert {"check", "main", "features_step"} <= defined
    if get_workload(workload).task == "train":
        assert "make_optimizer" in defined


def test_cnn_sources_read_like_their_frameworks():
    torch_src = codegen.generate("cnn", "torch").text
    assert "self.conv2 = nn.Conv2d(50, 50, 3, padding=1)" in torch_src
    assert "torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)" in torch_src
    keras_src = codegen.generate("cnn", "tensorflow").text
    assert 'layers.Conv2D(50, 3, padding="same", name="conv2")' in keras_src
    assert "chw_rows_to_hwc(a, (100, 8, 8))" in keras_src  # fc1 only: after the flatten
    assert "chw_rows_to_hwc(a, (512" not in keras_src


def test_adam_written_out_where_the_framework_differs():
    for backend in ("tensorflow", "chainer"):
        text = codegen.generate("gru", backend).text
        assert "class Adam:" in text and "(sqrt(v_hat) + eps)" in text
    assert "torch.optim.Adam(" in codegen.generate("gru", "torch").text
    assert "optax.adam(" in codegen.generate("gru", "jax").text
    for backend in ("keras_jax", "keras_torch"):  # a keras.optimizers.Optimizer on these engines
        text = codegen.generate("gru", backend).text
        assert "class Adam(keras.optimizers.Optimizer):" in text
        assert "(keras.ops.sqrt(v_hat) + self.eps)" in text


def _helpers(names):
    ns: dict = {"np": np}
    exec(common.helpers_source(names, common.HELPERS), ns)  # noqa: S102 - our own helper text
    return ns


def test_flatten_row_permutation_matches_an_nhwc_flatten():
    """A dense layer on the NHWC flatten with permuted rows equals it on the NCHW flatten."""
    h = _helpers(["chw_rows_to_hwc", "hwc_rows_to_chw"])
    rng = np.random.default_rng(0)
    c, hh, ww, units = 3, 4, 5, 7
    x = rng.standard_normal((2, c, hh, ww))
    kernel = rng.standard_normal((c * hh * ww, units))
    want = x.reshape(2, -1) @ kernel  # the spec: C, H, W flatten
    got = x.transpose(0, 2, 3, 1).reshape(2, -1) @ h["chw_rows_to_hwc"](kernel, (c, hh, ww))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    back = h["hwc_rows_to_chw"](h["chw_rows_to_hwc"](kernel, (c, hh, ww)), (c, hh, ww))
    np.testing.assert_array_equal(back, kernel)


def test_conv_kernel_layouts_round_trip_and_gate_swap():
    h = _helpers(["oihw_to_hwio", "hwio_to_oihw", "swap_rz"])
    k = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    hwio = h["oihw_to_hwio"](k)
    assert hwio.shape == (4, 5, 3, 2) and hwio[1, 2, 0, 1] == k[1, 0, 1, 2]
    np.testing.assert_array_equal(h["hwio_to_oihw"](hwio), k)
    b = np.array([0, 0, 1, 1, 2, 2])  # z z r r h h
    np.testing.assert_array_equal(h["swap_rz"](b, 0), [1, 1, 0, 0, 2, 2])


@dataclass(frozen=True)
class Mystery:
    """An op no renderer knows."""

    def out_shape(self, in_shape):
        return in_shape


def test_unknown_op_is_one_line_naming_it():
    with pytest.raises(BackendError) as err:
        lower(codegen.render_table("torch"), [ops.ReLU(), Mystery()], (3, 8, 8), RenderCtx())
    msg = str(err.value)
    assert "Mystery" in msg and "torch" in msg and "conv2d" in msg and "\n" not in msg


@pytest.mark.parametrize(
    "argv, names",
    [
        (["code", "cnn", "--backend", "caffe"], ["caffe", "torch", "chainer"]),
        (["code", "alexnet", "--backend", "torch"], ["alexnet", "cnn", "gru"]),
        (["code", "cnn"], ["--backend"]),
    ],
)
def test_cli_bad_input_is_one_line(argv, names, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(n in err for n in names), err


def test_cli_prints_one_file_and_writes_all(tmp_path, capsys):
    assert main(["code", "gru", "--backend", "jax"]) == 0
    assert capsys.readouterr().out == codegen.generate("gru", "jax").text
    assert main(["code", "--all", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"{w}_{b}.py" for w, b in _lowered_pairs())
    out = capsys.readouterr().out  # the pairs left out, one line each, naming the ops
    assert out.count("no file: ") == len(workload_names()) * len(codegen.BACKENDS) - len(written)


def test_spec_line_names_the_fields():
    conv = get_workload("cnn").graph[2]
    line = common.spec_line(conv)
    assert line.startswith("{op: conv2d, name: conv2, out_channels: 50, kernel: [3, 3]")


# -- the report's Rosetta page ----------------------------------------------------------------
PAGE_PROBE = """(() => {
  const t = {};
  for (const table of document.querySelectorAll('table.rosetta')) {
    t[table.dataset.workload] = [...table.querySelectorAll('tbody tr')].map(
      tr => [...tr.children].map(td => td.innerText.trim()));
  }
  return {title: document.title, tables: t, scripts: document.scripts.length,
          heads: [...document.querySelectorAll('table.rosetta thead th')].map(th => th.innerText)};
})()"""


# quick-tier budget (stop 58): the slow tier runs it; the report's browser test stays quick
@pytest.mark.slow
def test_rosetta_page_in_headless_chromium(tmp_path):
    pytest.importorskip("jinja2")
    from rosetta.report.rosetta_page import write_rosetta_page
    from tests.browser import Browser, find_chromium

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no chromium binary (scripts/install_chromium.sh)")
    page = write_rosetta_page(tmp_path)
    html = page.read_text()
    assert "default-src 'none'" in html and "<script" not in html
    url = page.resolve().as_uri()
    with Browser(chromium) as browser:
        visit = browser.visit(url, probe_js=PAGE_PROBE, full_page=True)
    p = visit.probe
    assert p["title"].startswith("Rosetta") and p["scripts"] == 0
    assert p["heads"][:7] == [
        "#",
        "spec",
        "NumPy (reference)",
        "PyTorch",
        "Keras",
        "JAX",
        "Chainer",
    ]
    cnn = {row[0]: row[1:] for row in p["tables"]["cnn"]}
    assert len(cnn) == len(get_workload("cnn").graph)  # one row per spec op
    spec, _, torch_cell, keras_cell, *_ = cnn["2"]
    assert spec.startswith("{op: conv2d, name: conv2, out_channels: 50")
    assert "nn.Conv2d(50, 50, 3, padding=1)" in torch_cell
    assert 'layers.Conv2D(50, 3, padding="same", name="conv2")' in keras_cell
    assert "OIHW -> HWIO" in keras_cell and "OIHW" not in torch_cell  # called out where it happens
    fc1_keras = cnn["13"][3]
    assert "rows permuted from C, H, W to H, W, C" in fc1_keras
    gru_torch = {row[0]: row[1:] for row in p["tables"]["gru"]}["1"][2]
    assert "r | z | n" in gru_torch
    assert visit.external_requests(url) == [] and visit.console_errors == []


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_code_all_refuses_to_write_through_a_symlink(tmp_path, capsys, dangling):
    """Issue 33 item 9: a link inside DIR is refused by name and nothing is written anywhere."""
    outside = tmp_path / "outside.py"
    if not dangling:
        outside.write_text("keep me\n")
    folder = tmp_path / "out"
    folder.mkdir()
    link = folder / codegen.file_name("cnn", "torch")
    link.symlink_to(outside)
    assert main(["code", "cnn", "--all", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(link) in err and "symbolic link" in err
    assert sorted(p.name for p in folder.iterdir()) == [link.name]  # nothing else written
    if dangling:
        assert not outside.exists()
    else:
        assert outside.read_text() == "keep me\n"


def test_the_numpy_file_defines_each_top_level_name_once():
    """The plain-NumPy file concatenates the reference's kernel modules and layers: a name two of
    them define (the GRU's logistic helper and the sigmoid layer were both ``sigmoid``) would
    silently shadow the first in the file, while the package kept them apart."""
    tree = ast.parse(codegen.generate("gru", "numpy_ref").text)
    names = [
        n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
    ]  # fmt: skip
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert not repeated, f"defined more than once in the generated NumPy file: {repeated}"
