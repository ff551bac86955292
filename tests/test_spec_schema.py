"""The op field schema is derived from the op dataclasses: adding an op is adding one class."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import rosetta.spec
from rosetta.errors import SpecError
from rosetta.spec import load_workload, models_dir, ops
from rosetta.spec.fields import KINDS, init_field, op_schema, spec_field
from rosetta.spec.params import ParamSpec, Shape


def test_every_registered_op_declares_known_kinds():
    for name, cls in ops.OPS.items():
        assert cls.OP == name
        schema = op_schema(cls)
        assert all(kind in KINDS for kind in schema.fields.values()), name


def test_schema_read_from_the_dataclass():
    schema = op_schema(ops.Conv2D)
    assert schema.fields == {
        "name": "str",
        "out_channels": "posint",
        "kernel": "pair",
        "stride": "pair",
        "padding": "quad",
        "bias": "bool",
        "groups": "posint",
    }
    assert schema.inits == ("kernel", "bias")
    assert schema.optional == {"groups"}  # the YAML may leave it out (1)
    assert op_schema(ops.ReLU).fields == {} and op_schema(ops.ReLU).inits == ()


@pytest.fixture
def scale_op():
    """A new op defined the way a contributor would: one dataclass, nothing else."""

    @ops.register("scale_test")
    @dataclass(frozen=True)
    class Scale:
        name: str = spec_field("str")
        factor: float = spec_field("posfloat")
        init: dict = init_field("gain")

        def out_shape(self, in_shape: Shape) -> Shape:
            return in_shape

        def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
            return [ParamSpec(f"{self.name}.gain", (in_shape[0],), "C", self.init["gain"])]

        def flops(self, in_shape: Shape) -> int:
            return 0

    yield Scale
    del ops.OPS["scale_test"]


def test_a_new_op_is_loaded_and_checked_from_its_dataclass_alone(tmp_path, scale_op):
    raw = yaml.safe_load((models_dir() / "cnn.yaml").read_text())
    raw["layers"].insert(
        1, {"op": "scale_test", "name": "s", "factor": 2, "init": {"gain": "ones"}}
    )
    path = tmp_path / "cnn.yaml"
    path.write_text(yaml.safe_dump(raw))
    w = load_workload(path)
    node = w.graph[1]
    assert isinstance(node, scale_op) and node.factor == 2.0 and isinstance(node.factor, float)
    assert "s.gain" in {p.name for p in w.param_specs}
    raw["layers"][1]["factor"] = -1
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match=r"field 'layers\[1\].factor': expected a positive number"):
        load_workload(path)


def test_groups_may_be_left_out_and_must_divide_the_channels(tmp_path):
    """conv2d's ``groups`` is optional (1: the built-in workloads never write it); a value that
    does not divide the channels is one line naming the field."""
    raw = yaml.safe_load((models_dir() / "cnn.yaml").read_text())
    path = tmp_path / "cnn.yaml"
    assert "groups" not in raw["layers"][0] and load_workload(models_dir() / "cnn.yaml")
    first = load_workload(models_dir() / "cnn.yaml").graph[0]
    assert isinstance(first, ops.Conv2D) and first.groups == 1
    raw["layers"][0]["groups"] = 3  # 3 input channels, 32 outputs: 32 is not a multiple of 3
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match=r"layers\[0\]\.groups.*must divide") as e:
        load_workload(path)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="needs a default"):
        spec_field("posint", optional=True)


def test_registering_an_op_name_twice_fails():
    with pytest.raises(ValueError, match="registered twice"):
        ops.register("relu")(type("Other", (), {}))


def _imports(module: str) -> set[str]:
    path = Path(rosetta.spec.__file__).parent / f"{module}.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_import_cycle_between_ops_and_graph():
    """``ops`` imports ``graph``; ``graph`` knows ops only through its protocol."""
    assert "rosetta.spec.graph" in _imports("ops")
    assert not {"rosetta.spec.ops", "rosetta.spec"} & _imports("graph")
    assert not {"rosetta.spec.ops", "rosetta.spec.graph"} & _imports("params")
